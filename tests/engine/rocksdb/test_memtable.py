"""The memtable of a store (`rocksdb.memtable`): a hash memtable while the store only gets and puts, and a
skip list from its first scan on, with every write, committed or not, still there."""
from __future__ import annotations

from sparkstate.engine import Store

from ..conftest import apply_writes, contents, kv, live_rocksdb_options


def _memtable(local: str) -> str:
    """The memtable factory RocksDB recorded at the live database's last open."""
    return live_rocksdb_options(local)["memtable_factory"]


def _written(store: Store, versions: int) -> dict[bytes, bytes]:
    """Versions 1..`versions` committed from an empty store; returns the contents."""
    store.load(0)
    live: dict[bytes, bytes] = {}
    _write_versions(store, live, 1, versions)
    return live


def _apply(store: Store, live: dict[bytes, bytes], writes: list[tuple[bytes, bytes | None]]) -> None:
    """Uncommitted writes, to the store and to the expected contents."""
    store.apply_batch(writes)
    apply_writes(live, writes)


def _write_one_key_often(store: Store, live: dict[bytes, bytes]) -> None:
    """One key written more often than a bucket's list holds (RocksDB turns it into a skip list at 256)."""
    for n in range(300):
        store.apply_batch([kv(42, b"n%d" % n)])
    apply_writes(live, [kv(42, b"n299")])


def _write_versions(store: Store, live: dict[bytes, bytes], first: int, last: int) -> None:
    """Commit versions `first`..`last` (the store has `first` - 1 loaded), each adding, overwriting and
    removing keys."""
    for v in range(first, last + 1):
        writes = [kv(i, b"v%d" % v) for i in range(v * 300, v * 300 + 2000)] + [(kv(v * 7)[0], None)]
        _apply(store, live, writes)
        store.commit()
        store.load(v)


def test_a_store_that_only_gets_and_puts_keeps_a_hash_memtable(open_store):
    store, local = open_store("auto")
    live = _written(store, 4)
    _write_one_key_often(store, live)
    assert all(store.get(k) == v for k, v in live.items())
    assert "HashLinkList" in _memtable(local)


def test_the_first_scan_reopens_the_store_with_a_skip_list_and_sees_every_write(open_store):
    store, local = open_store("auto")
    live = _written(store, 3)
    _write_one_key_often(store, live)
    _apply(store, live, [kv(i, b"new") for i in range(5000, 5300)] + [(kv(301)[0], None)])
    assert "HashLinkList" in _memtable(local)
    assert contents(store) == live  # in key order, across the hash memtable's buckets
    assert _memtable(local) == "SkipListFactory"
    prefix = kv(5)[0][:2]  # one key group
    assert contents(store, prefix) == {k: v for k, v in live.items() if k.startswith(prefix)}
    _apply(store, live, [kv(7000, b"after")])
    store.commit()
    store.load(4)
    _write_versions(store, live, 5, 6)
    assert _memtable(local) == "SkipListFactory"  # for as long as the store is open
    assert contents(store) == live
    store.close()
    reader, _ = open_store("auto")
    reader.load(6)
    assert contents(reader) == live


def test_a_walk_switches_the_memtable_like_a_cursor(open_store):
    store, local = open_store("auto")
    live = _written(store, 2)
    _apply(store, live, [kv(9000, b"new")])
    backend = store._backend  # type: ignore[attr-defined]
    rows, position = backend.walk(None, 1000)
    while position is not None:
        more, position = backend.walk(position, 1000)
        rows += more
    assert rows == sorted(live.items())
    assert _memtable(local) == "SkipListFactory"


def test_the_skiplist_setting_keeps_a_skip_list_from_the_start(open_store):
    store, local = open_store("skiplist", rocksdb_memtable="skiplist")
    live = _written(store, 2)
    assert _memtable(local) == "SkipListFactory"
    assert contents(store) == live


def test_a_flush_at_every_commit_keeps_a_skip_list(open_store):
    """The memtable then holds one batch, which the commit's flush would have to sort."""
    store, local = open_store("fe1", rocksdb_flush_every=1)
    live = _written(store, 2)
    assert _memtable(local) == "SkipListFactory"
    assert all(store.get(k) == v for k, v in live.items())
