"""Backend name -> how to build one (restored from a manifest, or empty), how to fill one in bulk, and
whether a manifest lists files it can restore from.

The only module that knows every backend; each is imported on first use, so a heap-only setup never
imports rocksdict.
"""
from __future__ import annotations

from typing import Sequence

from ..errors import ConfigError
from ..checkpoint import Manifest
from .backend_contract import Backend, BackendBuilder, BackendContext, BulkLoader

BACKENDS = ("rocksdb", "heap")


def builder_for(backend_name: str) -> BackendBuilder:
    """The builder for `settings.backend`."""
    if backend_name == "rocksdb":
        from .rocksdb.backend import open_rocksdb_backend
        return open_rocksdb_backend
    if backend_name == "heap":
        from .heap.backend import open_heap_backend
        return open_heap_backend
    raise ConfigError(f"unknown state backend {backend_name!r} (expected one of {', '.join(BACKENDS)})")


def open_snapshot(backend_name: str, ctx: BackendContext, lineage: Sequence[Manifest]) -> Backend:
    """A backend holding the snapshot that snapshot replay starts from (change_feed.py), the version of the
    last manifest of `lineage` (the manifests from the replay's end version down to it): for RocksDB that
    version's own checkpoint, for the heap backend its full snapshot of that version."""
    if backend_name == "rocksdb":
        from .rocksdb.backend import open_rocksdb_backend
        return open_rocksdb_backend(ctx, lineage[-1])
    if backend_name == "heap":
        from .heap.backend import open_heap_snapshot
        return open_heap_snapshot(ctx, lineage)
    raise ConfigError(f"unknown state backend {backend_name!r} (expected one of {', '.join(BACKENDS)})")


def check_restorable(manifest: Manifest, source: str) -> None:
    """Raise CorruptCheckpointError when the files `manifest` lists are not a set its backend can restore the
    version from (heap: at most one full snapshot, then deltas up to the version, `heap.chain`); RocksDB's
    files are a set without an order to check. `source` names the manifest in the message. For readers that
    check a checkpoint without opening its stores (`sparkstate verify`)."""
    if manifest.backend == "heap":
        from .heap.chain import Chain
        Chain.of(manifest, source)


def bulk_loader_for(backend_name: str, ctx: BackendContext) -> BulkLoader:
    """A loader filling a new, empty store of `backend_name`: RocksDB writes sorted SST files and
    ingests them (no memtable, no compaction); any other backend takes batches of puts."""
    if backend_name == "rocksdb":
        from .rocksdb.bulk_load import SstBulkLoader
        return SstBulkLoader(ctx)
    return BatchBulkLoader(builder_for(backend_name)(ctx, None))


class BatchBulkLoader:
    """Puts every row into an empty backend, in batches of WRITE_BATCH_ROWS."""

    WRITE_BATCH_ROWS = 65536

    def __init__(self, backend: Backend) -> None:
        self._backend: Backend | None = backend
        self._pending: list[tuple[bytes, bytes]] = []

    def add(self, source: int, rows: Sequence[tuple[bytes, bytes]]) -> None:
        self._pending.extend(rows)
        if len(self._pending) >= self.WRITE_BATCH_ROWS:
            self._flush()

    def end_source(self, source: int) -> None:
        """Nothing to do per source."""

    def _flush(self) -> None:
        if self._pending:
            assert self._backend is not None
            self._backend.apply_batch(self._pending)
            self._pending = []

    def finish(self) -> Backend:
        assert self._backend is not None
        self._flush()
        self._backend.bulk_loaded()
        return self._backend

    def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()
