"""RocksDB backend on rocksdict: raw byte keys, WAL off, bloom filter, per-store memtable and cache.

Durability comes from checkpoints, not the WAL: a commit flushes and checkpoints (see
rocksdb_snapshot), and anything not committed is discarded by restoring, so the WAL would only cost.

Exact key count: RocksDB has none, so it is tracked here. Each write needs to know whether its key
existed. `get` remembers the answer (`_known`), which covers the usual get-then-put of stateful
operators at no extra cost; the remaining keys of a batch are looked up with one multi-get. The map
lives for one micro-batch (cleared at commit) and is bounded by KNOWN_KEYS_LIMIT within one.
"""
from __future__ import annotations

import shutil
from itertools import chain, islice
from typing import Sequence

import rocksdict

from ..checkpoint import Manifest, SharedFileRef
from ..config import Settings
from ..errors import StoreStateError
from .backend import Backend, BackendContext, Cursor, SnapshotOutcome, SnapshotResources
from .rocksdb_restore import choose_restore
from .rocksdb_snapshot import IncrementalSstSnapshot, SstSnapshotResources

# Bound on remembered key existence: enough for a big micro-batch of get-then-put, small in memory.
KNOWN_KEYS_LIMIT = 200_000
# RocksDB appends to its MANIFEST on every flush/compaction and only rolls it at this size; the whole
# file is embedded in every checkpoint manifest, so keep it small.
MAX_ROCKSDB_MANIFEST_BYTES = 1 << 20
# Cursor runs: the first is small (it measures the row size), later ones aim at the chunk's byte limit.
_FIRST_RUN_ROWS = 64
_MAX_RUN_ROWS = 16384

_COMPRESSION = {
    "lz4": rocksdict.DBCompressionType.lz4,
    "zstd": rocksdict.DBCompressionType.zstd,
    "snappy": rocksdict.DBCompressionType.snappy,
    "none": rocksdict.DBCompressionType.none,
}


def make_options(settings: Settings) -> tuple[rocksdict.Options, rocksdict.Cache | None]:
    opt = rocksdict.Options(raw_mode=True)
    opt.create_if_missing(True)
    opt.set_write_buffer_size(settings.rocksdb_write_buffer_mb << 20)
    opt.set_compression_type(_COMPRESSION[settings.rocksdb_compression]())
    opt.set_max_manifest_file_size(MAX_ROCKSDB_MANIFEST_BYTES)
    opt.set_keep_log_file_num(2)
    table = rocksdict.BlockBasedOptions()
    if settings.rocksdb_bloom_bits > 0:
        table.set_bloom_filter(settings.rocksdb_bloom_bits, False)
    cache = None
    if settings.rocksdb_block_cache_mb > 0:
        cache = rocksdict.Cache(settings.rocksdb_block_cache_mb << 20)
        table.set_block_cache(cache)
    else:
        table.disable_cache()
    opt.set_block_based_table_factory(table)
    return opt, cache


class RocksDBCursor(Cursor):
    """Prefix scan over a rocksdict snapshot. Holding the snapshot/iterator keeps the DB LOCK held,
    so `close` drops both references and the backend closes every open cursor before closing the DB.

    Rows are pulled from the iterator in runs (`islice`, no Python code per row) into `_buffer`, which
    always holds at least one row while the scan is not over, so `done` is exact. Runs are sized from
    the rows seen so far to stay near `max_bytes`; what a run fetched beyond a chunk's limits stays in
    `_buffer` for the next chunk. Keys are sorted and the scan starts at `prefix`, so the keys with the
    prefix are exactly the leading run of rows that have it (found by bisection, not a test per row).
    """

    def __init__(self, snapshot: rocksdict.Snapshot, prefix: bytes, on_close) -> None:
        self._snapshot: rocksdict.Snapshot | None = snapshot
        self._items = iter(snapshot.items(from_key=prefix)) if prefix else iter(snapshot.items())
        self._prefix = prefix
        self._buffer: list[tuple[bytes, bytes]] = []
        self._exhausted = False
        self._on_close = on_close
        self._fetch(1)

    def _fetch(self, n: int) -> list[tuple[bytes, bytes]]:
        """Append up to `n` more rows with the prefix to `_buffer`; returns them."""
        more = list(islice(self._items, n))
        if len(more) < n:
            self._exhausted = True
        prefix = self._prefix
        if prefix and more and not more[-1][0].startswith(prefix):
            lo, hi = 0, len(more) - 1  # more[hi] lacks the prefix; find the first row that does
            while lo < hi:
                mid = (lo + hi) // 2
                if more[mid][0].startswith(prefix):
                    lo = mid + 1
                else:
                    hi = mid
            del more[lo:]
            self._exhausted = True
        if self._exhausted:
            self._items = iter(())
        self._buffer.extend(more)
        return more

    @property
    def closed(self) -> bool:
        return self._snapshot is None

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        if self._snapshot is None:
            raise StoreStateError("cursor is closed (its store was released, reloaded or closed)")
        if not self._buffer:
            self.close()
            return [], True
        max_rows = max(1, max_rows)
        size = _row_bytes(self._buffer)
        step = min(_FIRST_RUN_ROWS, max_rows)
        while not self._exhausted and len(self._buffer) <= max_rows and size < max_bytes:
            size += _row_bytes(self._fetch(min(step, max_rows + 1 - len(self._buffer))))
            per_row = size // max(1, len(self._buffer)) + 1
            step = max(1, min(_MAX_RUN_ROWS, (max_bytes - size) // per_row + 1))
        rows = self._buffer
        n = min(len(rows), max_rows)
        if size >= max_bytes:
            # At least one row; then rows while the size before them is still under max_bytes.
            total = 0
            for i in range(n):
                total += len(rows[i][0]) + len(rows[i][1])
                if total >= max_bytes:
                    n = i + 1
                    break
        chunk, self._buffer = rows[:n], rows[n:]
        if not self._buffer and not self._exhausted:
            self._fetch(1)  # one row of lookahead, so `done` is exact
        done = not self._buffer
        if done:
            self.close()
        return chunk, done

    def close(self) -> None:
        if self._snapshot is None:
            return
        self._items = iter(())
        self._buffer = []
        self._snapshot = None
        cb, self._on_close = self._on_close, None
        if cb is not None:
            cb(self)


def _row_bytes(rows: list[tuple[bytes, bytes]]) -> int:
    return sum(map(len, chain.from_iterable(rows)))


class RocksDBBackend(Backend):
    """One open rocksdict database in `db_dir` with its lineage (local SST name -> remote file).

    `base` is the manifest of the committed version the database started from (restored, or last
    committed; None: the empty version 0). `rewind` to that version rebuilds the database from it and the
    local cache, without reading the checkpoint: an abort (a cancelled task, a failed batch) costs a
    database reopen, not a restore."""

    def __init__(self, ctx: BackendContext, db_dir: str, lineage: dict[str, SharedFileRef], num_keys: int,
                 base: Manifest | None = None) -> None:
        self.ctx = ctx
        self.db_dir = db_dir
        options, self._cache = make_options(ctx.settings)
        self._db: rocksdict.Rdict | None = rocksdict.Rdict(db_dir, options)
        wo = rocksdict.WriteOptions()
        wo.disable_wal = True
        self._db.set_write_options(wo)
        self._lineage = lineage
        self._num_keys = num_keys
        self._base = base
        self._known: dict[bytes, bool] = {}
        self._cursors: set[RocksDBCursor] = set()
        self._snapshot_strategy = IncrementalSstSnapshot(ctx)

    @property
    def lineage(self) -> dict[str, SharedFileRef]:
        return dict(self._lineage)

    def _live(self) -> rocksdict.Rdict:
        if self._db is None:
            raise StoreStateError(f"database {self.db_dir} is closed")
        return self._db

    # ---- data -----------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        db = self._db
        if db is None:
            raise StoreStateError(f"database {self.db_dir} is closed")
        value = db.get(key)
        known = self._known
        if len(known) >= KNOWN_KEYS_LIMIT:
            known.clear()
        known[key] = value is not None
        return value

    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        db = self._live()
        known = self._known
        unknown = [k for k, _ in records if k not in known]  # empty after the usual get-then-put
        if unknown:
            unknown = list(dict.fromkeys(unknown))
            for k, v in zip(unknown, db.get(unknown)):
                known[k] = v is not None
        batch = rocksdict.WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        n = self._num_keys
        for k, v in records:
            if v is None:
                delete(k)
                if known[k]:
                    n -= 1
                    known[k] = False
            else:
                put(k, v)
                if not known[k]:
                    n += 1
                    known[k] = True
        try:
            db.write(batch)
        except BaseException:
            known.clear()  # it described writes that did not happen
            raise
        self._num_keys = n
        if len(known) > KNOWN_KEYS_LIMIT:
            known.clear()

    def open_cursor(self, prefix: bytes) -> Cursor:
        cursor = RocksDBCursor(self._live().snapshot(), prefix, self._cursors.discard)
        if not cursor.closed:
            self._cursors.add(cursor)
        return cursor

    def num_keys(self) -> int:
        return self._num_keys

    def fill_from_sst_files(self, paths: Sequence[str], num_keys: int) -> None:
        """Fill this empty database with SST files written by `rocksdict.SstFileWriter` with this
        backend's options (`make_options`), holding `num_keys` distinct keys in all; the files are moved
        in (hard links), one ingest call. For building a store in bulk (rescaling): no memtable, flush or
        compaction. Files may overlap in key range but must not share keys."""
        db = self._live()
        if self._num_keys != 0:
            raise StoreStateError(f"database {self.db_dir} is not empty ({self._num_keys} keys)")
        if not paths:
            return
        opts = rocksdict.IngestExternalFileOptions()
        opts.set_move_files(True)
        db.ingest_external_file(list(paths), opts)
        # Exact here (ingested files only, no overwrites or deletes).
        held = db.property_int_value("rocksdb.estimate-num-keys")
        if held != num_keys:
            raise StoreStateError(f"database {self.db_dir}: {num_keys} keys expected from {len(paths)} SST "
                                  f"file(s), {held} ingested")
        self._num_keys = num_keys
        self._known.clear()

    def memory_used_bytes(self) -> int:
        db = self._db
        if db is None:
            return 0
        total = 0
        for prop in ("rocksdb.size-all-mem-tables", "rocksdb.estimate-table-readers-mem"):
            total += db.property_int_value(prop) or 0
        if self._cache is not None:
            total += self._cache.get_usage()
        return total

    # ---- snapshot -------------------------------------------------------------------------------
    def prepare_snapshot(self, version: int) -> SnapshotResources:
        # A batch's get-then-put pairs end at its commit; a smaller map stays in the CPU caches.
        self._known.clear()
        return self._snapshot_strategy.prepare(self._live(), version, self._num_keys)

    def upload_snapshot(self, resources: SnapshotResources) -> SnapshotOutcome:
        assert isinstance(resources, SstSnapshotResources)
        outcome, lineage = self._snapshot_strategy.upload(resources, self._lineage)
        self._lineage = lineage
        self._base = outcome.manifest
        self.ctx.file_manager.prune_cache(self.ctx.layout.cache_dir, outcome.manifest.remote_names())
        outcome.flush_ms = resources.flush_ms
        return outcome

    def release_snapshot(self, resources: SnapshotResources) -> None:
        assert isinstance(resources, SstSnapshotResources)
        self._snapshot_strategy.release(resources)

    # ---- versions -------------------------------------------------------------------------------
    def rewind(self, version: int) -> bool:
        """Rebuild the database as committed `version` from local files, if it is the base version."""
        base_version = self._base.version if self._base is not None else 0
        if self._db is None or version != base_version:
            return False
        self.close()
        restored = choose_restore(self.ctx, self._base).run()  # the lineage's files are in cache/
        try:
            options, self._cache = make_options(self.ctx.settings)
            self._db = rocksdict.Rdict(restored.db_dir, options)
            wo = rocksdict.WriteOptions()
            wo.disable_wal = True
            self._db.set_write_options(wo)
        except BaseException:
            shutil.rmtree(restored.db_dir, ignore_errors=True)
            raise
        self.db_dir, self._lineage, self._num_keys = restored.db_dir, restored.lineage, restored.num_keys
        self.ctx.layout.remove_other_dbs(keep=restored.db_dir)
        return True

    # ---- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        for cursor in list(self._cursors):
            cursor.close()
        self._cursors.clear()
        db, self._db = self._db, None
        self._known.clear()
        if db is not None:
            db.close()


def open_rocksdb_backend(ctx: BackendContext, manifest: Manifest | None) -> RocksDBBackend:
    """BackendBuilder for RocksDB: run the restore that fits, open the result, drop stale local dirs."""
    restored = choose_restore(ctx, manifest).run()
    try:
        backend = RocksDBBackend(ctx, restored.db_dir, restored.lineage, restored.num_keys, manifest)
    except BaseException:
        shutil.rmtree(restored.db_dir, ignore_errors=True)
        raise
    ctx.layout.remove_other_dbs(keep=restored.db_dir)
    ctx.file_manager.prune_cache(ctx.layout.cache_dir, {ref.remote for ref in restored.lineage.values()})
    return backend
