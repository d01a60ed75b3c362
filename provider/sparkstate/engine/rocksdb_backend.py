"""RocksDB backend on rocksdict: raw byte keys, WAL off, bloom filter, per-store memtable and cache.

Durability comes from checkpoints, not the WAL: a commit flushes and checkpoints (see
rocksdb_snapshot), and anything not committed is discarded by restoring, so the WAL would only cost.

Exact key count: RocksDB has none, so it is tracked here. Each write needs to know whether its key
existed. `get` remembers the answer (`_known`), which covers the usual get-then-put of stateful
operators at no extra cost; the remaining keys of a batch are looked up with one multi-get.
"""
from __future__ import annotations

import shutil
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
    so `close` drops both references and the backend closes every open cursor before closing the DB."""

    def __init__(self, snapshot: rocksdict.Snapshot, prefix: bytes, on_close) -> None:
        self._snapshot: rocksdict.Snapshot | None = snapshot
        self._items = iter(snapshot.items(from_key=prefix)) if prefix else iter(snapshot.items())
        self._prefix = prefix
        self._pending: tuple[bytes, bytes] | None = None
        self._on_close = on_close
        self._advance()

    def _advance(self) -> None:
        row = next(self._items, None)
        if row is not None and not row[0].startswith(self._prefix):
            row = None
        self._pending = row

    @property
    def closed(self) -> bool:
        return self._snapshot is None

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        if self._snapshot is None:
            raise StoreStateError("cursor is closed (its store was released, reloaded or closed)")
        pending = self._pending
        if pending is None:
            self.close()
            return [], True
        # Hot loop (rows of a whole chunk): locals only, one lookahead row for `done` and the prefix.
        rows = [pending]
        append, items, prefix = rows.append, self._items, self._prefix
        size = len(pending[0]) + len(pending[1])
        pending = None
        for row in items:
            if not row[0].startswith(prefix):
                break
            if len(rows) >= max_rows or size >= max_bytes:
                pending = row
                break
            append(row)
            size += len(row[0]) + len(row[1])
        self._pending = pending
        done = pending is None
        if done:
            self.close()
        return rows, done

    def close(self) -> None:
        if self._snapshot is None:
            return
        self._items = iter(())
        self._pending = None
        self._snapshot = None
        cb, self._on_close = self._on_close, None
        if cb is not None:
            cb(self)


class RocksDBBackend(Backend):
    """One open rocksdict database in `db_dir` with its lineage (local SST name -> remote file)."""

    def __init__(self, ctx: BackendContext, db_dir: str, lineage: dict[str, SharedFileRef], num_keys: int) -> None:
        self.ctx = ctx
        self.db_dir = db_dir
        options, self._cache = make_options(ctx.settings)
        self._db: rocksdict.Rdict | None = rocksdict.Rdict(db_dir, options)
        wo = rocksdict.WriteOptions()
        wo.disable_wal = True
        self._db.set_write_options(wo)
        self._lineage = lineage
        self._num_keys = num_keys
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
        value = self._live().get(key)
        known = self._known
        if len(known) >= KNOWN_KEYS_LIMIT:
            known.clear()
        known[key] = value is not None
        return value

    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        db = self._live()
        known = self._known
        unknown = list(dict.fromkeys(k for k, _ in records if k not in known))
        if unknown:
            for k, v in zip(unknown, db.get(unknown)):
                known[k] = v is not None
        batch = rocksdict.WriteBatch(raw_mode=True)
        n = self._num_keys
        for k, v in records:
            if v is None:
                batch.delete(k)
                if known[k]:
                    n -= 1
                    known[k] = False
            else:
                batch.put(k, v)
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
        return self._snapshot_strategy.prepare(self._live(), version, self._num_keys)

    def upload_snapshot(self, resources: SnapshotResources) -> SnapshotOutcome:
        assert isinstance(resources, SstSnapshotResources)
        outcome, lineage = self._snapshot_strategy.upload(resources, self._lineage)
        self._lineage = lineage
        self.ctx.layout.prune_cache(outcome.manifest.remote_names())
        outcome.flush_ms = resources.flush_ms
        return outcome

    def release_snapshot(self, resources: SnapshotResources) -> None:
        assert isinstance(resources, SstSnapshotResources)
        self._snapshot_strategy.release(resources)

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
        backend = RocksDBBackend(ctx, restored.db_dir, restored.lineage, restored.num_keys)
    except BaseException:
        shutil.rmtree(restored.db_dir, ignore_errors=True)
        raise
    ctx.layout.remove_other_dbs(keep=restored.db_dir)
    ctx.layout.prune_cache({ref.remote for ref in restored.lineage.values()})
    return backend
