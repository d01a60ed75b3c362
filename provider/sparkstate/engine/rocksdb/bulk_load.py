"""SstBulkLoader: a new RocksDB store filled from sorted rows without a memtable (rescaling's target).

Each source's rows arrive in key order (an old partition scanned in key order gives a new partition its
entries already sorted), so they stream into one SST file per source through RocksDB's `SstFileWriter`
with the store's own table options (compression, bloom filter); `finish` ingests every file into an empty
database in one call (the files are moved in, i.e. hard-linked). No write batch, existence lookup, flush
or compaction. Files of different sources may overlap in key range, which one ingest call accepts: their
keys are disjoint (each key lives in exactly one source; rescaling checks it while routing). The version
committed afterwards lists the ingested SSTs exactly like any other RocksDB version.
"""
from __future__ import annotations

import os
from collections import deque
from itertools import starmap
from typing import Any, Sequence

import rocksdict

from ...errors import StoreStateError
from ..backend_contract import BackendContext
from .backend import RocksDBBackend
from .options import make_options
from .restore import RestoredDir


class SstBulkLoader:
    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self._options = make_options(ctx.settings, None)  # the SST writer reads nothing back
        self._sst_dir = os.path.join(ctx.layout.instance_dir, "ingest")
        os.makedirs(self._sst_dir, exist_ok=True)
        self._writer: Any = None  # SstFileWriter of the current source, opened at its first row
        self._files: list[str] = []
        self._rows = 0
        self._backend: RocksDBBackend | None = None

    def add(self, source: int, rows: Sequence[tuple[bytes, bytes]]) -> None:
        if not rows:
            return
        w = self._writer
        if w is None:
            w = self._writer = rocksdict.SstFileWriter(options=self._options)
            path = os.path.join(self._sst_dir, f"from-{source}.sst")
            w.open(path)
            self._files.append(path)
        # w[k] = v for every row, iterated in C; the writer refuses a key not greater than the one before
        # it, so the sort order is checked as well.
        deque(starmap(w.__setitem__, rows), maxlen=0)
        self._rows += len(rows)

    def end_source(self, source: int) -> None:
        w, self._writer = self._writer, None
        if w is not None:
            w.finish()

    def finish(self) -> RocksDBBackend:
        self.end_source(-1)
        empty = RestoredDir(db_dir=self.ctx.layout.new_db_dir(), num_keys=0)
        backend = self._backend = RocksDBBackend(self.ctx, empty)
        backend.bulk_loaded()
        if self._files:
            opts = rocksdict.IngestExternalFileOptions()
            opts.set_move_files(True)
            backend.live_db().ingest_external_file(list(self._files), opts)
            # Exact here (ingested files only, no overwrites or deletes).
            held = backend.live_db().property_int_value("rocksdb.estimate-num-keys")
            if held != self._rows:
                raise StoreStateError(f"database {backend.db_dir}: {self._rows} keys expected from "
                                      f"{len(self._files)} SST file(s), {held} ingested")
            backend.set_num_keys(self._rows)
        return backend

    def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()
        self._writer = None
