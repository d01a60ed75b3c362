"""Heap backend checkpoint files: Arrow IPC (file format) with compressed record batches.

Byte layout: a standard Arrow IPC file (magic `ARROW1`, schema, record batches, footer). Each record
batch body is compressed with the codec chosen by `heap.compression` (lz4 frame or zstd; Arrow records
the codec per batch, so readers need no setting). Schema, fixed for format version 1:

    kg     int32  not null   key group (first 4 bytes of the storage key, big-endian signed)
    key    binary not null   storage key
    value  binary nullable   value; null = the key was removed (deltas only; a full snapshot has none)

Schema metadata (our magic and format version):

    sparkstate.format         "heap-delta" | "heap-full"
    sparkstate.formatVersion  "1"   (readers refuse other versions)
    sparkstate.version        store version the file belongs to (decimal)
    sparkstate.rows           number of rows (decimal)

File names (the `local` name in the manifest): `delta-<version>.arrow`, `full-<version>.arrow`.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptCheckpointError

FORMAT_VERSION = "1"
KIND_DELTA = "heap-delta"
KIND_FULL = "heap-full"
BATCH_ROWS = 65536
_NAME = re.compile(r"^(delta|full)-(\d+)\.arrow$")

_FIELDS = [pa.field("kg", pa.int32(), nullable=False), pa.field("key", pa.binary(), nullable=False),
           pa.field("value", pa.binary(), nullable=True)]


def schema(kind: str, version: int, rows: int) -> pa.Schema:
    return pa.schema(_FIELDS, metadata={"sparkstate.format": kind, "sparkstate.formatVersion": FORMAT_VERSION,
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
        return pa.array([], pa.int32())
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32, count=n + 1, offset=keys.offset * 4)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)
    starts = offsets[:-1]
    ok = (offsets[1:] - starts) >= 4
    idx = np.where(ok, starts, 0)[:, None] + np.arange(4)
    if len(data) < 4:
        return pa.array(np.zeros(n, dtype=np.int32))
    kg = np.ascontiguousarray(data[np.minimum(idx, len(data) - 1)]).view(">i4").reshape(n).astype(np.int32)
    return pa.array(np.where(ok, kg, 0).astype(np.int32))


def _batch(rows: Sequence[tuple[bytes, bytes | None]]) -> pa.RecordBatch:
    keys = pa.array([k for k, _ in rows], pa.binary())
    return pa.RecordBatch.from_arrays(
        [_key_groups(keys), keys, pa.array([v for _, v in rows], pa.binary())], schema=pa.schema(_FIELDS))


def encode(kind: str, version: int, rows: Sequence[tuple[bytes, bytes | None]], compression: str) -> bytes:
    """A whole (small) file in memory: used for deltas."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema(kind, version, len(rows)), options=_options(compression)) as w:
        for i in range(0, len(rows), BATCH_ROWS):
            w.write_batch(_batch(rows[i:i + BATCH_ROWS]))
    return sink.getvalue().to_pybytes()


class StreamingWriter:
    """Writes a (large) file batch by batch to a local path: used for full snapshots. The row count in
    the schema is unknown up front, so it is stored as -1 there; readers count batches instead."""

    def __init__(self, path: str, kind: str, version: int, compression: str) -> None:
        self._sink = pa.OSFile(path, "wb")
        self._writer = pa.ipc.new_file(self._sink, schema(kind, version, -1), options=_options(compression))
        self.rows = 0

    def write(self, rows: Sequence[tuple[bytes, bytes | None]]) -> None:
        if rows:
            self._writer.write_batch(_batch(rows))
            self.rows += len(rows)

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self._sink.close()


def read(path: str, kind: str, version: int, source: str) -> Iterator[tuple[list[bytes], list[bytes | None]]]:
    """(keys, values) per record batch of a verified local copy; checks magic, format and version."""
    try:
        reader = pa.ipc.open_file(pa.memory_map(path, "r"))
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptCheckpointError(f"heap checkpoint file {source} is not a readable Arrow IPC file: {e}") from None
    meta = {k.decode(): v.decode() for k, v in (reader.schema.metadata or {}).items()}
    if meta.get("sparkstate.format") != kind or meta.get("sparkstate.version") != str(version):
        raise CorruptCheckpointError(
            f"heap checkpoint file {source} holds {meta.get('sparkstate.format')} of version "
            f"{meta.get('sparkstate.version')}, expected {kind} of version {version}")
    if meta.get("sparkstate.formatVersion") != FORMAT_VERSION:
        raise CorruptCheckpointError(f"heap checkpoint file {source} has format version "
                                     f"{meta.get('sparkstate.formatVersion')}; this sparkstate reads {FORMAT_VERSION}")
    for i in range(reader.num_record_batches):
        b = reader.get_batch(i)
        yield b.column(1).to_pylist(), b.column(2).to_pylist()


def apply_file(data: dict[bytes, bytes], path: str, kind: str, version: int, source: str) -> None:
    """Load a full snapshot into / replay a delta onto `data`."""
    for keys, values in read(path, kind, version, source):
        if kind == KIND_FULL:
            data.update(zip(keys, values))  # type: ignore[arg-type]
            continue
        for k, v in zip(keys, values):
            if v is None:
                data.pop(k, None)
            else:
                data[k] = v


def chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
