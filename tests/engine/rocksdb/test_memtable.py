"""The memtable of a store (`rocksdb.memtable`): a hash memtable while the store only gets and puts, and a
skip list from its first scan on, with every write, committed or not, still there."""
from __future__ import annotations

import glob
import os

from sparkstate.engine import Store

from ..conftest import apply_writes, contents, kv, make_spec


def _memtable(local: str) -> str:
    """The memtable factory in the OPTIONS file RocksDB wrote at the live database's last open."""
    files = sorted(glob.glob(os.path.join(local, "**", "OPTIONS-*"), recursive=True), key=os.path.getmtime)
    assert files, "no OPTIONS file: the test would prove nothing"
    with open(files[-1], encoding="utf-8") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)["memtable_factory"]


def _store(tmp_path, name: str, **settings) -> tuple[Store, str]:
    local = str(tmp_path / name / "local")
    return Store(make_spec("file:" + str(tmp_path / name / "ckpt"), backend="rocksdb", **settings), local), local


def _write_versions(store: Store, live: dict[bytes, bytes], first: int, last: int) -> None:
    """Commit versions `first`..`last` (the store has `first` - 1 loaded), each adding, overwriting and
    removing keys."""
    for v in range(first, last + 1):
        writes = [kv(i, b"v%d" % v) for i in range(v * 300, v * 300 + 2000)] + [(kv(v * 7)[0], None)]
        store.apply_batch(writes)
        apply_writes(live, writes)
        store.commit()
        store.load(v)


def test_a_store_that_only_gets_and_puts_keeps_a_hash_memtable(tmp_path):
    store, local = _store(tmp_path, "auto")
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        _write_versions(store, live, 1, 4)
        for n in range(300):  # one key written more often than a bucket's list holds (RocksDB: 256)
            store.apply_batch([kv(42, b"n%d" % n)])
        apply_writes(live, [kv(42, b"n299")])
        assert all(store.get(k) == v for k, v in live.items())
        assert "HashLinkList" in _memtable(local)
    finally:
        store.close()


def test_the_first_scan_reopens_the_store_with_a_skip_list_and_sees_every_write(tmp_path):
    store, local = _store(tmp_path, "auto")
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        _write_versions(store, live, 1, 3)
        uncommitted = [kv(i, b"new") for i in range(5000, 5300)] + [(kv(301)[0], None)]
        for n in range(300):
            store.apply_batch([kv(42, b"n%d" % n)])
        apply_writes(live, [kv(42, b"n299")])
        store.apply_batch(uncommitted)
        apply_writes(live, uncommitted)
        assert "HashLinkList" in _memtable(local)
        assert contents(store) == live  # in key order, across the hash memtable's buckets
        assert _memtable(local) == "SkipListFactory"
        prefix = kv(5)[0][:2]  # one key group
        assert contents(store, prefix) == {k: v for k, v in live.items() if k.startswith(prefix)}
        store.apply_batch([kv(7000, b"after")])
        apply_writes(live, [kv(7000, b"after")])
        store.commit()
        store.load(4)
        _write_versions(store, live, 5, 6)
        assert _memtable(local) == "SkipListFactory"  # for as long as the store is open
        assert contents(store) == live
    finally:
        store.close()
    reader, _ = _store(tmp_path, "auto")
    try:
        reader.load(6)
        assert contents(reader) == live
    finally:
        reader.close()


def test_a_walk_switches_the_memtable_like_a_cursor(tmp_path):
    store, local = _store(tmp_path, "auto")
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        _write_versions(store, live, 1, 2)
        store.apply_batch([kv(9000, b"new")])
        apply_writes(live, [kv(9000, b"new")])
        backend = store._backend  # type: ignore[attr-defined]
        rows, position = backend.walk(None, 1000)
        while position is not None:
            more, position = backend.walk(position, 1000)
            rows += more
        assert rows == sorted(live.items())
        assert _memtable(local) == "SkipListFactory"
    finally:
        store.close()


def test_the_skiplist_setting_keeps_a_skip_list_from_the_start(tmp_path):
    store, local = _store(tmp_path, "skiplist", rocksdb_memtable="skiplist")
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        _write_versions(store, live, 1, 2)
        assert _memtable(local) == "SkipListFactory"
        assert contents(store) == live
    finally:
        store.close()


def test_a_flush_at_every_commit_keeps_a_skip_list(tmp_path):
    """The memtable then holds one batch, which the commit's flush would have to sort."""
    store, local = _store(tmp_path, "fe1", rocksdb_flush_every=1)
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        _write_versions(store, live, 1, 2)
        assert _memtable(local) == "SkipListFactory"
        assert all(store.get(k) == v for k, v in live.items())
    finally:
        store.close()
