"""Arrow state files: the journal of a version's writes, which both backends keep (the heap backend's
delta, the RocksDB backend's change log), and the heap backend's full snapshots. Arrow IPC with
compressed record batches.

Byte layout: full snapshots (format version 1) are Arrow IPC *files* (magic `ARROW1`, schema, record
batches, footer). Deltas (format version 2) are Arrow IPC *streams* (schema, record batches,
end-of-stream marker, no footer): the journal of the version's writes, appended while the batch runs.
Delta format version 1 (an IPC file holding each changed key once) is still read. Each record batch
body is compressed with the codec chosen by `heap.compression` (lz4 frame or zstd; Arrow records the
codec per batch, so readers need no setting). Schema (both versions):

    kg     int32  not null   key group (first 4 bytes of the storage key, big-endian signed)
    key    binary not null   storage key
    value  binary nullable   value; null = the key was removed (deltas only; a full snapshot has none)

Schema metadata (our magic and format version):

    sparkstate.format         "heap-delta" | "heap-full"
    sparkstate.formatVersion  "1" (full, legacy delta) | "2" (journaled delta); others are refused
    sparkstate.version        store version the file belongs to (decimal)
    sparkstate.rows           number of rows (decimal; -1 when streamed)

A v2 delta holds the version's writes in the order they were applied, removes as null values, a key
possibly several times: replay applies the rows in order (last write wins).

File names (the `local` name in the manifest): `delta-<version>.arrow`, `full-<version>.arrow`.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from .. import liveness
from ..errors import CorruptCheckpointError
from .arrow_columns import binary_column, int_column, offsets

KIND_DELTA = "heap-delta"
KIND_FULL = "heap-full"
FORMAT_VERSION = "1"          # full snapshots, and the legacy delta written by `encode`
DELTA_FORMAT_VERSION = "2"    # journaled deltas (IPC stream)
_READABLE = {KIND_DELTA: ("1", "2"), KIND_FULL: ("1",)}
JOURNAL_FLUSH_ROWS = 4096  # rows a journal gathers before it writes a record batch
BATCH_ROWS = 65536
_NAME = re.compile(r"^(delta|full)-(\d+)\.arrow$")

_FIELDS = [pa.field("kg", pa.int32(), nullable=False), pa.field("key", pa.binary(), nullable=False),
           pa.field("value", pa.binary(), nullable=True)]


def schema(kind: str, version: int, rows: int, format_version: str = FORMAT_VERSION) -> pa.Schema:
    return pa.schema(_FIELDS, metadata={"sparkstate.format": kind, "sparkstate.formatVersion": format_version,
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
    return _columns_batch([k for k, _ in rows], [v for _, v in rows])


def _columns_batch(keys: Sequence[bytes], values: Sequence[bytes | None]) -> pa.RecordBatch:
    return _arrays_batch(binary_column(keys), binary_column(values))


def _arrays_batch(keys: pa.BinaryArray, values: pa.BinaryArray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([_key_groups(keys), keys, values], schema=pa.schema(_FIELDS))


def encode(kind: str, version: int, rows: Sequence[tuple[bytes, bytes | None]], compression: str) -> bytes:
    """A whole (small) format-v1 file in memory. The backend writes deltas as journals (see
    `JournalWriter`); this writer exists so tests can check that v1 deltas stay readable."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema(kind, version, len(rows)), options=_options(compression)) as w:
        for i in range(0, len(rows), BATCH_ROWS):
            w.write_batch(_batch(rows[i:i + BATCH_ROWS]))
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
            self._writer.write_batch(_arrays_batch(keys, values))
            self.rows += len(keys)
            liveness.tick()

    def close(self) -> None:
        """Write the footer (the sink stays open: its owner makes it durable)."""
        self._writer.close()


class JournalWriter:
    """A v2 delta being written while its version's batch runs, into `sink` (the file manager's
    NewFile). Appends are gathered into record batches of at least JOURNAL_FLUSH_ROWS rows (split at
    BATCH_ROWS): operators that read between writes (joins, dedup) append one row at a time, and a record
    batch per row would cost hundreds of bytes of framing each. `finish` writes the rest and ends the
    stream; the sink's owner makes it durable."""

    def __init__(self, sink, version: int, compression: str) -> None:
        self._writer = pa.ipc.new_stream(pa.PythonFile(sink, mode="w"),
                                         schema(KIND_DELTA, version, -1, DELTA_FORMAT_VERSION),
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
            self._writer.write_batch(_batch(chunk))
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
    if is_file != (fmt == "1"):
        raise CorruptCheckpointError(f"heap checkpoint file {source}: format version {fmt} must be an Arrow IPC "
                                     f"{'file' if fmt == '1' else 'stream'}")
    try:
        for b in batches:
            liveness.tick()  # a long restore is progress, not a hang (worker heartbeat)
            keys, values = b.column(1), b.column(2)
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
