"""Arrow state files: the journal of a version's writes, which both backends keep (the heap backend's
delta, the RocksDB backend's change log), and the heap backend's full snapshots. Arrow IPC with
compressed record batches.

Byte layout: full snapshots are Arrow IPC *files* (magic `ARROW1`, schema, record batches, footer).
Deltas are Arrow IPC *streams* (schema, record batches, end-of-stream marker, no footer): the journal
of the version's writes, appended while the batch runs. Each record batch body is compressed with the
codec chosen by `heap.compression` (zstd or lz4 frame; Arrow records the codec per batch, so readers
need no setting). Both are written in format version 3, the block format:

    rows           int32  not null   rows in the block
    key_lengths    binary not null   the length of every key, int32 little-endian
    keys           binary not null   the keys' bytes (see below)
    value_lengths  binary not null   the length of every value, int32 little-endian; -1 = the key was
                                     removed (deltas only; a full snapshot has none)
    values         binary not null   the values' bytes (removed keys have none)

Every record batch is one row: one block of up to BATCH_ROWS rows. The bytes of a column are the rows'
bytes concatenated, except that when every (present) entry has the same length w they are stored
byte-transposed: byte 0 of every entry, then byte 1 of every entry, ..., byte w-1 of every entry. A
fixed-width UnsafeRow key or value then becomes runs of equal bytes (null bitsets, the high bytes of
small numbers), which compress several times better than the rows in order; lengths take the place of
Arrow's offsets, which compress poorly (an ascending sequence) where lengths repeat one number.

Formats 1 and 2 (still read) are one Arrow row per state row, with Arrow's own binary columns:

    kg     int32  not null   key group (first 4 bytes of the storage key, big-endian signed)
    key    binary not null   storage key
    value  binary nullable   value; null = the key was removed (deltas only)

format 1: a full snapshot (IPC file), or a delta holding each changed key once (IPC file); format 2: a
delta journal (IPC stream).

Schema metadata (our magic and format version):

    sparkstate.format         "heap-delta" | "heap-full"
    sparkstate.formatVersion  "3" (blocks), "1" or "2" (rows); others are refused
    sparkstate.version        store version the file belongs to (decimal)
    sparkstate.rows           number of rows (decimal; -1 when streamed)

A delta of format 2 or 3 holds the version's writes in the order they were applied, removes as null
values, a key possibly several times: replay applies the rows in order (last write wins).

File names (the `local` name in the manifest): `delta-<version>.arrow`, `full-<version>.arrow`.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from .. import liveness
from ..errors import CorruptCheckpointError
from .arrow_columns import MAX_BINARY_BYTES, binary_column, int_column, offsets, validity

KIND_DELTA = "heap-delta"
KIND_FULL = "heap-full"
ROWS_FORMAT_VERSION = "1"     # a row per state row: full snapshots and whole deltas (IPC files)
JOURNAL_FORMAT_VERSION = "2"  # a row per state row: delta journals (IPC stream)
BLOCK_FORMAT_VERSION = "3"    # a row per block of state rows: what is written (module docstring)
_READABLE = {KIND_DELTA: ("1", "2", "3"), KIND_FULL: ("1", "3")}
JOURNAL_FLUSH_ROWS = 4096  # rows a journal gathers before it writes a record batch
BATCH_ROWS = 65536
_NAME = re.compile(r"^(delta|full)-(\d+)\.arrow$")

_FIELDS = [pa.field("kg", pa.int32(), nullable=False), pa.field("key", pa.binary(), nullable=False),
           pa.field("value", pa.binary(), nullable=True)]
_BLOCK_FIELDS = [pa.field("rows", pa.int32(), nullable=False),
                 pa.field("key_lengths", pa.binary(), nullable=False), pa.field("keys", pa.binary(), nullable=False),
                 pa.field("value_lengths", pa.binary(), nullable=False),
                 pa.field("values", pa.binary(), nullable=False)]
_BLOCK_SCHEMA = pa.schema(_BLOCK_FIELDS)
_REMOVED = -1  # the length of a removed key's value


def schema(kind: str, version: int, rows: int, format_version: str = BLOCK_FORMAT_VERSION) -> pa.Schema:
    fields = _BLOCK_FIELDS if format_version == BLOCK_FORMAT_VERSION else _FIELDS
    return pa.schema(fields, metadata={"sparkstate.format": kind, "sparkstate.formatVersion": format_version,
                                       "sparkstate.version": str(version), "sparkstate.rows": str(rows)})


def local_name(kind: str, version: int) -> str:
    return f"{'delta' if kind == KIND_DELTA else 'full'}-{version}.arrow"


def parse_local_name(name: str) -> tuple[str, int] | None:
    """(kind, version) of a heap file name, or None if it is not one."""
    m = _NAME.match(name)
    if not m:
        return None
    return (KIND_DELTA if m.group(1) == "delta" else KIND_FULL), int(m.group(2))


def _options(compression: str) -> pa.ipc.IpcWriteOptions:
    return pa.ipc.IpcWriteOptions(compression=None if compression == "none" else compression)


def _key_groups(keys: pa.BinaryArray) -> pa.Array:
    """kg of every key, vectorized: the first 4 bytes of each key read as big-endian int32 (0 for keys
    shorter than 4 bytes, which only tests write)."""
    n = len(keys)
    if n == 0:
        return int_column(np.zeros(0, np.int32))
    ends = offsets(keys)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)
    starts = ends[:-1]
    ok = (ends[1:] - starts) >= 4
    idx = np.where(ok, starts, 0)[:, None] + np.arange(4)
    if len(data) < 4:
        return int_column(np.zeros(n, dtype=np.int32))
    kg = np.ascontiguousarray(data[np.minimum(idx, len(data) - 1)]).view(">i4").reshape(n).astype(np.int32)
    return int_column(np.where(ok, kg, 0).astype(np.int32))


def _batch(rows: Sequence[tuple[bytes, bytes | None]]) -> pa.RecordBatch:
    """Rows as a record batch of format 1 or 2 (one Arrow row per state row)."""
    keys = binary_column([k for k, _ in rows])
    return pa.RecordBatch.from_arrays([_key_groups(keys), keys, binary_column([v for _, v in rows])],
                                      schema=pa.schema(_FIELDS))


# ---- blocks (format 3) ------------------------------------------------------------------------------

def _one_width(lengths: np.ndarray) -> int:
    """The width of a column's entries if every present one (length >= 0) has the same width of at least
    2 bytes and there are at least two, else 0: when the bytes are stored transposed (module docstring;
    transposing one entry, or entries of one byte, changes nothing)."""
    present = lengths[lengths >= 0]
    if len(present) < 2 or present[0] < 2 or not (present == present[0]).all():
        return 0
    return int(present[0])


def _transposed(data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`data` (the entries' bytes in order) byte-transposed if the column has one width."""
    w = _one_width(lengths)
    if not w:
        return data
    rows = data.reshape(-1, w)
    out = np.empty((w, len(rows)), np.uint8)
    for j in range(w):  # a strided copy per byte position: several times numpy's 2-d transposed copy
        out[j] = rows[:, j]
    return out.reshape(-1)


def _untransposed(data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    w = _one_width(lengths)
    if not w:
        return data
    planes = data.reshape(w, -1)
    out = np.empty((planes.shape[1], w), np.uint8)
    for j in range(w):
        out[:, j] = planes[j]
    return out.reshape(-1)


def _pack_items(items: Sequence[bytes | None]) -> tuple[pa.Buffer, pa.Buffer]:
    """(lengths, bytes) of a block column from Python bytes (None: removed)."""
    if None in items:
        lengths = np.fromiter((_REMOVED if x is None else len(x) for x in items), np.int32, len(items))
        data = b"".join(x for x in items if x is not None)
    else:
        lengths = np.fromiter(map(len, items), np.int32, len(items))
        data = b"".join(items)  # type: ignore[arg-type]
    return _packed(lengths, np.frombuffer(data, np.uint8))


def _pack_column(column: pa.Array) -> tuple[pa.Buffer, pa.Buffer]:
    """(lengths, bytes) of a block column from an Arrow binary column (null: removed)."""
    if column.null_count:
        present = validity(column)
        dense = column.drop_null()
        lengths = np.full(len(column), _REMOVED, np.int32)
        lengths[present] = np.diff(offsets(dense))
        column = dense
    else:
        lengths = np.diff(offsets(column)).astype(np.int32)
    ends = offsets(column)
    buf = column.buffers()[2]
    data = np.frombuffer(buf, np.uint8)[ends[0]:ends[-1]] if buf is not None and len(column) else np.zeros(0, np.uint8)
    return _packed(lengths, data)


def _packed(lengths: np.ndarray, data: np.ndarray) -> tuple[pa.Buffer, pa.Buffer]:
    if len(data) > MAX_BINARY_BYTES:
        raise ValueError(f"{len(data)} bytes do not fit one block column (32-bit offsets)")
    return pa.py_buffer(lengths.astype("<i4", copy=False)), pa.py_buffer(_transposed(data, lengths))


def _blob(buf: pa.Buffer) -> pa.Array:
    """A binary column of one entry holding `buf`."""
    return pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(np.array([0, buf.size], np.int32)), buf])


def _block(rows: int, keys: tuple[pa.Buffer, pa.Buffer], values: tuple[pa.Buffer, pa.Buffer]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([int_column(np.array([rows], np.int32)), _blob(keys[0]), _blob(keys[1]),
                                       _blob(values[0]), _blob(values[1])], schema=_BLOCK_SCHEMA)


def _items_block(rows: Sequence[tuple[bytes, bytes | None]]) -> pa.RecordBatch:
    return _block(len(rows), _pack_items([k for k, _ in rows]), _pack_items([v for _, v in rows]))


def _arrays_block(keys: pa.Array, values: pa.Array) -> pa.RecordBatch:
    return _block(len(keys), _pack_column(keys), _pack_column(values))


def _unpack(n: int, lengths_buf: pa.Buffer, data_buf: pa.Buffer, what: str) -> pa.Array:
    """The Arrow binary column (null: removed) of a block column."""
    if lengths_buf.size != 4 * n:
        raise ValueError(f"{what}: {lengths_buf.size} bytes of lengths for {n} rows")
    lengths = np.frombuffer(lengths_buf, "<i4", n)
    if n and lengths[0] >= 0 and (lengths == lengths[0]).all():  # one width, nothing removed: no sums
        w = int(lengths[0])
        total = n * w
        ends = np.arange(0, total + 1, w or 1, dtype=np.int64)[:n + 1] if w else np.zeros(n + 1, np.int64)
        present, nulls = None, 0
    else:
        present = lengths >= 0
        if (lengths < _REMOVED).any():
            raise ValueError(f"{what}: a length below {_REMOVED}")
        ends = np.zeros(n + 1, np.int64)
        np.cumsum(np.where(present, lengths, 0), out=ends[1:])
        total = int(ends[-1])
        nulls = n - int(present.sum())
    if total != data_buf.size:
        raise ValueError(f"{what}: lengths add up to {total} bytes, the block holds {data_buf.size}")
    if total > MAX_BINARY_BYTES:
        raise ValueError(f"{what}: {total} bytes do not fit a binary column")
    data = _untransposed(np.frombuffer(data_buf, np.uint8), lengths)
    valid = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [valid, pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(data)],
                                 null_count=nulls)


def _blob_buffer(column: pa.Array) -> pa.Buffer:
    ends = offsets(column)
    buf = column.buffers()[2]
    if buf is None:
        return pa.py_buffer(b"")
    return buf.slice(int(ends[0]), int(ends[1] - ends[0]))


def _block_columns(b: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
    """(keys, values) of one block."""
    if b.num_rows != 1 or b.column(0).null_count:
        raise ValueError(f"a block is one row; this record batch has {b.num_rows}")
    n = b.column(0)[0].as_py()
    if n < 0:
        raise ValueError(f"a block of {n} rows")
    keys = _unpack(n, _blob_buffer(b.column(1)), _blob_buffer(b.column(2)), "keys")
    values = _unpack(n, _blob_buffer(b.column(3)), _blob_buffer(b.column(4)), "values")
    return keys, values


# ---- writers --------------------------------------------------------------------------------------

def encode(kind: str, version: int, rows: Sequence[tuple[bytes, bytes | None]], compression: str,
           format_version: str = ROWS_FORMAT_VERSION) -> bytes:
    """A whole (small) file in memory, in format 1 (IPC file), 2 (IPC stream, deltas) or 3. The backend
    writes deltas as journals (see `JournalWriter`); this writer exists so tests can check that every
    format stays readable."""
    sink = pa.BufferOutputStream()
    stream = format_version == JOURNAL_FORMAT_VERSION or (format_version == BLOCK_FORMAT_VERSION
                                                            and kind == KIND_DELTA)
    open_writer = pa.ipc.new_stream if stream else pa.ipc.new_file
    with open_writer(sink, schema(kind, version, len(rows), format_version), options=_options(compression)) as w:
        for chunk in chunks(rows, BATCH_ROWS):
            w.write_batch(_items_block(chunk) if format_version == BLOCK_FORMAT_VERSION else _batch(chunk))
    return sink.getvalue().to_pybytes()


class StreamingWriter:
    """Writes a (large) file batch by batch into `sink` (the file manager's NewFile): used for full
    snapshots. The row count in the schema is unknown up front, so it is stored as -1 there; readers
    count batches instead."""

    def __init__(self, sink, kind: str, version: int, compression: str) -> None:
        self._writer = pa.ipc.new_file(pa.PythonFile(sink, mode="w"), schema(kind, version, -1),
                                       options=_options(compression))
        self.rows = 0

    def write_arrays(self, keys: pa.BinaryArray, values: pa.BinaryArray) -> None:
        """Rows given as two Arrow columns (built without a Python object per row)."""
        if len(keys):
            for start in range(0, len(keys), BATCH_ROWS):
                self._writer.write_batch(_arrays_block(keys.slice(start, BATCH_ROWS), values.slice(start, BATCH_ROWS)))
            self.rows += len(keys)
            liveness.tick()

    def close(self) -> None:
        """Write the footer (the sink stays open: its owner makes it durable)."""
        self._writer.close()


class JournalWriter:
    """A delta being written while its version's batch runs, into `sink` (the file manager's NewFile).
    Appends are gathered into blocks of at least JOURNAL_FLUSH_ROWS rows (split at BATCH_ROWS): operators
    that read between writes (joins, dedup) append one row at a time, and a record batch per row would
    cost hundreds of bytes of framing each. `finish` writes the rest and ends the stream; the sink's
    owner makes it durable."""

    def __init__(self, sink, version: int, compression: str) -> None:
        self._writer = pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), schema(KIND_DELTA, version, -1),
                                         options=_options(compression))
        self._pending: list[tuple[bytes, bytes | None]] = []
        self.rows = 0

    def append(self, rows: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._pending.extend(rows)
        self.rows += len(rows)
        if len(self._pending) >= JOURNAL_FLUSH_ROWS:
            self._write_pending()

    def _write_pending(self) -> None:
        for chunk in chunks(self._pending, BATCH_ROWS):
            self._writer.write_batch(_items_block(chunk))
        self._pending = []

    def finish(self) -> None:
        """Write what is pending and end the stream."""
        self._write_pending()
        self._writer.close()


def _open(path: str, source: str):
    """(schema, record batch iterator) of an IPC file (magic ARROW1) or an IPC stream."""
    try:
        with open(path, "rb") as f:
            is_file = f.read(6) == b"ARROW1"
        src = pa.memory_map(path, "r")
        if is_file:
            reader = pa.ipc.open_file(src)
            return reader.schema, is_file, (reader.get_batch(i) for i in range(reader.num_record_batches))
        reader = pa.ipc.open_stream(src)
        return reader.schema, is_file, iter(reader)
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptCheckpointError(f"heap checkpoint file {source} is not a readable Arrow IPC file: {e}") from None


def read(path: str, kind: str, version: int, source: str) -> Iterator[tuple[list[bytes], list[bytes | None]]]:
    """(keys, values) per record batch of a verified local copy, as Python lists."""
    for keys, values in read_columns(path, kind, version, source):
        yield keys.to_pylist(), values.to_pylist()


def read_columns(path: str, kind: str, version: int, source: str) -> Iterator[tuple[pa.Array, pa.Array]]:
    """(keys, values) per record batch of a verified local copy, as Arrow columns; checks magic, format and
    version, that no key is null, and that a full snapshot has a value for every key (a delta's null value
    is a delete)."""
    file_schema, is_file, batches = _open(path, source)
    meta = {k.decode(): v.decode() for k, v in (file_schema.metadata or {}).items()}
    if meta.get("sparkstate.format") != kind or meta.get("sparkstate.version") != str(version):
        raise CorruptCheckpointError(
            f"heap checkpoint file {source} holds {meta.get('sparkstate.format')} of version "
            f"{meta.get('sparkstate.version')}, expected {kind} of version {version}")
    fmt = meta.get("sparkstate.formatVersion")
    if fmt not in _READABLE[kind]:
        raise CorruptCheckpointError(f"heap checkpoint file {source} has format version {fmt}; this "
                                     f"sparkstate reads {' and '.join(_READABLE[kind])} for {kind}")
    want_file = fmt == ROWS_FORMAT_VERSION or (fmt == BLOCK_FORMAT_VERSION and kind == KIND_FULL)
    if is_file != want_file:
        raise CorruptCheckpointError(f"heap checkpoint file {source}: {kind} format version {fmt} must be an "
                                     f"Arrow IPC {'file' if want_file else 'stream'}")
    blocks = fmt == BLOCK_FORMAT_VERSION
    if blocks and file_schema.remove_metadata() != _BLOCK_SCHEMA:
        raise CorruptCheckpointError(f"heap checkpoint file {source} has format version {fmt} but not its "
                                     f"columns: {file_schema.names}")
    try:
        for b in batches:
            liveness.tick()  # a long restore is progress, not a hang (worker heartbeat)
            try:
                keys, values = _block_columns(b) if blocks else (b.column(1), b.column(2))
            except ValueError as e:
                raise CorruptCheckpointError(f"heap checkpoint file {source} has a damaged block: {e}") from None
            full = kind == KIND_FULL
            if keys.null_count or (full and values.null_count):
                nulls = f"{keys.null_count} null keys" + (f" and {values.null_count} null values" if full else "")
                raise CorruptCheckpointError(f"heap checkpoint file {source} is a "
                                             f"{'full snapshot' if full else 'delta'} with {nulls}")
            yield keys, values
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptCheckpointError(f"heap checkpoint file {source} is truncated or corrupt: {e}") from None


def chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
