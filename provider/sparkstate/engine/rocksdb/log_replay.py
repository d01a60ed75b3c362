"""Replay of change logs into a reopened RocksDB database: the writes since its SST set, as one SST file.

A version committed between flushes is its last SST set plus the change logs after it. Inserting those
writes one by one into the memtable costs a random-order skiplist insert each (2-4 us at a few hundred
thousand writes), and leaves a memtable that the next flush must write again. Instead the logs' columns
are sorted by key (a stable sort, so a key's writes keep their order), each key's last write is kept,
and the puts are written in key order into one SST file that RocksDB ingests above every existing file.
Deletes, which an SST writer cannot hold, go through a write batch after the ingest; a key is either
put or deleted by then, so the two do not overlap and their order does not matter. The logs' writes are
held in memory at once, which the flush rule bounds (backend.py, LOG_SHARE_BEFORE_FLUSH: the logs since
a flush stay under half its SST files' bytes, compressed).

The replay's file is compressed with lz4 where the database uses zstd: it is written on the load path,
where zstd's compression is about a seventh of a replay's time, and it sits at level 0 until a compaction
rewrites it with the database's codec (measured on 250,000 writes of 16-byte keys and values: 113
against 131 ms per store, a file of 2.1 against 1.3 MB).
"""
from __future__ import annotations

import dataclasses
import os
from collections import deque
from itertools import starmap
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import rocksdict

from ...config import Settings
from ..arrow_columns import offsets
from .options import make_options


def last_writes(columns: Iterable[tuple[pa.Array, pa.Array]]) -> tuple[pa.Array, pa.Array]:
    """(keys, values) sorted by key, each key once with its last value (null: deleted), from the (keys,
    values) record batches of the logs in write order."""
    # (No pa.array of Python objects here: that imports pandas, half a second in a fresh worker.)
    parts = list(columns)
    if not parts:
        return pa.nulls(0, pa.binary()), pa.nulls(0, pa.binary())
    keys = pa.concat_arrays([k.cast(pa.binary()) for k, _ in parts])
    values = pa.concat_arrays([v.cast(pa.binary()) for _, v in parts])
    order = stable_key_order(keys)
    keys, values = keys.take(order), values.take(order)
    if len(keys) > 1:  # a key's last write is where the next key differs; the last row always is one
        last = pc.not_equal(keys[:-1], keys[1:])
        keys = pa.concat_arrays([keys[:-1].filter(last), keys[-1:]])
        values = pa.concat_arrays([values[:-1].filter(last), values[-1:]])
    return keys, values


def stable_key_order(keys: pa.Array) -> pa.Array:
    """Indices that sort `keys` (binary, no nulls) by their bytes, equal keys in their order. Keys of one
    width (a fixed-size key row, as most operators' are) sort as big-endian 16-bit words with numpy's
    lexsort, whose stable sort of 16-bit integers is a radix sort (one linear pass per word): several
    times faster than 64-bit words or Arrow's sort of binary values. Others sort with Arrow's stable sort."""
    n = len(keys)
    ends = offsets(keys)
    width = int(ends[1] - ends[0]) if n else 0
    if n < 2 or width == 0 or keys.null_count or not (np.diff(ends) == width).all():
        return pc.sort_indices(keys)
    words = -(-width // 2)
    rows = np.zeros((n, words * 2), np.uint8)  # zero padding: same for every key, so order is kept
    data = np.frombuffer(keys.buffers()[2], np.uint8, n * width, int(ends[0]))
    rows[:, :width] = data.reshape(n, width)
    columns = rows.view(">u2")  # (n, words), each word compares as its bytes do
    order = np.lexsort(columns.T[::-1]).astype(np.int64, copy=False)  # stable; the last key is the primary one
    # (From the buffer: pa.array of a numpy array imports pandas, half a second in a fresh worker.)
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(order)])


def replay_file_options(settings: Settings) -> rocksdict.Options:
    """Options of the SST file a replay writes: the database's, with lz4 in place of zstd."""
    if settings.rocksdb_compression == "zstd":
        settings = dataclasses.replace(settings, rocksdb_compression="lz4")
    return make_options(settings, None)


def replay_logs(db: rocksdict.Rdict, options: rocksdict.Options, columns: Iterable[tuple[pa.Array, pa.Array]],
                sst_path: str) -> int:
    """Apply the logs' writes to `db`; returns the number of keys written or deleted. `sst_path`: where
    the SST file is built, on the database's file system (the ingest moves it in)."""
    keys, values = last_writes(columns)
    if not len(keys):
        return 0
    deleted = values.is_null()
    kept = pc.invert(deleted)
    put_keys, put_values = keys.filter(kept).to_pylist(), values.filter(kept).to_pylist()
    if put_keys:
        writer = rocksdict.SstFileWriter(options=options)
        writer.open(sst_path)
        try:
            # In key order, iterated in C; the writer refuses a key not greater than the one before it.
            deque(starmap(writer.__setitem__, zip(put_keys, put_values)), maxlen=0)
            writer.finish()
            ingest = rocksdict.IngestExternalFileOptions()
            ingest.set_move_files(True)
            db.ingest_external_file([sst_path], ingest)
        finally:
            if os.path.exists(sst_path):
                os.unlink(sst_path)
    delete_keys = keys.filter(deleted).to_pylist()
    if delete_keys:
        batch = rocksdict.WriteBatch(raw_mode=True)
        deque(map(batch.delete, delete_keys), maxlen=0)
        db.write(batch)
    return len(keys)
