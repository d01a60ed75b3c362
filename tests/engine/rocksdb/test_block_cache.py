"""The block cache that the RocksDB stores of one process share: one cache per size, held while a store is
open, its usage reported once over the stores."""
from __future__ import annotations

from sparkstate.engine import Store
from sparkstate.engine.rocksdb.block_cache import BlockCacheLease, open_leases

from ..conftest import kv, make_spec

MB = 3  # a size no other test's store asks for, so the counts below are this test's own


def _store(tmp_path, name: str, mb: int = MB) -> Store:
    store = Store(make_spec("file:" + str(tmp_path / "ckpt" / name), instance_id=name, backend="rocksdb",
                            rocksdb_block_cache_mb=mb), str(tmp_path / "local"))
    store.load(0)
    store.apply_batch([kv(i) for i in range(2000)])
    store.commit()
    store.load(1)
    return store


def test_stores_of_one_process_share_one_cache_while_any_is_open(tmp_path):
    a, b = _store(tmp_path, "a"), _store(tmp_path, "b")
    try:
        assert open_leases().get(MB) == 2
        assert a._backend._cache.cache is b._backend._cache.cache  # type: ignore[union-attr]
        other = _store(tmp_path, "c", mb=MB + 1)  # another size: another cache
        assert open_leases().get(MB) == 2 and open_leases().get(MB + 1) == 1
        other.close()
        assert MB + 1 not in open_leases()
        a.close()
        assert open_leases().get(MB) == 1
    finally:
        a.close()
        b.close()
    assert MB not in open_leases()


def test_the_cache_usage_is_counted_once_over_the_stores(tmp_path):
    a, b = _store(tmp_path, "a"), _store(tmp_path, "b")
    try:
        for store in (a, b):  # reads fill the cache with both stores' blocks
            for i in range(0, 2000, 7):
                assert store.get(kv(i)[0]) == kv(i)[1]
        lease = a._backend._cache  # type: ignore[union-attr]
        usage = lease.cache.get_usage()
        assert usage > 0
        assert lease.usage_share() == b._backend._cache.usage_share() == usage // 2  # type: ignore[union-attr]
    finally:
        a.close()
        b.close()


def test_a_rewind_keeps_the_cache_of_a_store_alone_on_it(tmp_path):
    store = _store(tmp_path, "alone", mb=MB + 2)
    try:
        cache = store._backend._cache.cache  # type: ignore[union-attr]
        store.apply_batch([kv(i, b"aborted") for i in range(10)])
        store.abort()
        assert store.load(1).source == "memory"  # rewound, not restored from the checkpoint
        assert store._backend._cache.cache is cache and open_leases().get(MB + 2) == 1  # type: ignore[union-attr]
        assert store.get(kv(3)[0]) == kv(3)[1]
    finally:
        store.close()
    assert MB + 2 not in open_leases()


def test_a_released_lease_stays_released():
    lease = BlockCacheLease(MB)
    assert open_leases().get(MB) == 1
    lease.release()
    lease.release()
    assert MB not in open_leases() and lease.usage_share() == 0


def test_size_zero_opens_the_store_without_a_cache(tmp_path):
    store = _store(tmp_path, "none", mb=0)
    try:
        assert store._backend._cache is None and 0 not in open_leases()  # type: ignore[union-attr]
        assert store.get(kv(5)[0]) == kv(5)[1]
    finally:
        store.close()
