"""The RocksDB block cache that every store open in one worker process shares.

Why one cache per process, not one per store: RocksDB keeps the blocks of files that a compaction deleted
until the cache evicts them, so in a long run every cache fills to its capacity, whatever its store
holds. A cache per store therefore costs its full size times the number of stores a worker holds, and a
query with 200 shuffle partitions puts dozens of stores on each worker. A single LRU cache per process
bounds the worker's cache memory by `rocksdb.blockCacheSizeMB`. Its room also goes where the reads are:
one large, busy store can use what the small ones leave.

A store takes a `BlockCacheLease` when it opens its database and returns it when it closes. The cache
lives while any lease on it is held. Stores that ask for different sizes (queries with different
settings in one application) get different caches.

Memory figures: each store reports an equal share of its cache's usage, so the figures of a worker's
stores add up to its cache once.
"""
from __future__ import annotations

import threading

import rocksdict


class _SharedCache:
    def __init__(self, capacity_mb: int) -> None:
        self.cache = rocksdict.Cache(capacity_mb << 20)
        self.leases = 0


_caches: dict[int, _SharedCache] = {}
_lock = threading.Lock()


class BlockCacheLease:
    """One store's use of its process's block cache of `capacity_mb` MiB, from open to `release`."""

    def __init__(self, capacity_mb: int) -> None:
        self.capacity_mb = capacity_mb
        with _lock:
            shared = _caches.get(capacity_mb)
            if shared is None:
                shared = _caches[capacity_mb] = _SharedCache(capacity_mb)
            shared.leases += 1
        self._shared: _SharedCache | None = shared

    @property
    def cache(self) -> rocksdict.Cache:
        assert self._shared is not None, "block cache lease used after release"
        return self._shared.cache

    def usage_share(self) -> int:
        """This store's share of the cache's bytes in use: the usage split evenly over the open stores."""
        shared = self._shared
        if shared is None:
            return 0
        return shared.cache.get_usage() // max(1, shared.leases)

    def release(self) -> None:
        """Give the lease back (idempotent); the last lease drops the process's reference to the cache."""
        with _lock:
            shared, self._shared = self._shared, None
            if shared is None:
                return
            shared.leases -= 1
            if shared.leases == 0 and _caches.get(self.capacity_mb) is shared:
                del _caches[self.capacity_mb]


def open_leases() -> dict[int, int]:
    """Capacity in MiB -> stores holding a lease on that cache (for tests and diagnostics)."""
    with _lock:
        return {mb: shared.leases for mb, shared in _caches.items()}
