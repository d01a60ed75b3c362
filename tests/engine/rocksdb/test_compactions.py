"""Automatic compactions of a store's database: an open of committed files holds them until Spark's
maintenance after a commit, or a commit that finds level 0 at its trigger; a new store compacts from the
start."""
from __future__ import annotations

import os
import time

from sparkstate.engine import Store

from ..conftest import contents, kv, live_rocksdb_options

VERSIONS = 4
# The writer flushes each version into a level-0 file of its own and never merges them.
WRITER = dict(backend="rocksdb", rocksdb_flush_every=1, rocksdb_level0_trigger=100, rocksdb_level_base_mb=256)
# Reopened, those files outweigh the first level below (1 MiB), so RocksDB would merge them at once, while
# their count stays under the trigger.
BY_SIZE = dict(backend="rocksdb", rocksdb_flush_every=1, rocksdb_level0_trigger=10, rocksdb_level_base_mb=1)
# Reopened, their count reaches the trigger.
BY_COUNT = dict(backend="rocksdb", rocksdb_flush_every=1, rocksdb_level0_trigger=VERSIONS, rocksdb_level_base_mb=256)
SETTLE_S = 0.5  # a merge of these few MiB, had one started, would be over


def _auto_compactions(local: str) -> bool:
    return live_rocksdb_options(local)["disable_auto_compactions"] == "false"


def _level0_files(store: Store) -> int:
    return store._backend._live().property_int_value("rocksdb.num-files-at-level0")  # type: ignore[attr-defined]


def _committed_in_level0_files(open_store) -> dict[bytes, bytes]:
    """VERSIONS versions of about 450 KiB each (values that do not compress), each flushed into a level-0
    file of its own; returns the contents."""
    writer, _ = open_store(**WRITER)
    writer.load(0)
    live: dict[bytes, bytes] = {}
    for v in range(1, VERSIONS + 1):
        writes = [(kv(i)[0], os.urandom(200)) for i in range(v * 1000, v * 1000 + 2000)]
        writer.apply_batch(writes)
        live.update(writes)
        writer.commit()
        writer.load(v)
    assert _level0_files(writer) == VERSIONS
    return live


def _commit_one_write(store: Store, live: dict[bytes, bytes], tag: bytes) -> None:
    store.apply_batch([kv(1, tag)])
    live.update([kv(1, tag)])
    store.commit()


def _merged_soon(store: Store, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _level0_files(store) == 0:
            return True
        time.sleep(0.05)
    return False


def test_a_restored_store_merges_no_level_until_maintenance_after_a_commit(open_store):
    live = _committed_in_level0_files(open_store)
    store, local = open_store(**BY_SIZE)
    store.load(VERSIONS)
    time.sleep(SETTLE_S)
    assert _level0_files(store) == VERSIONS and not _auto_compactions(local)
    assert contents(store) == live
    _commit_one_write(store, live, b"a")
    store.load(VERSIONS + 1)
    time.sleep(SETTLE_S)
    assert _level0_files(store) == VERSIONS + 1 and not _auto_compactions(local)  # the commit's flush
    store.maintenance_snapshot()
    assert _auto_compactions(local)
    assert _merged_soon(store), "maintenance started no compaction"
    assert contents(store) == live


def test_a_commit_that_finds_level0_at_its_trigger_starts_compactions(open_store):
    live = _committed_in_level0_files(open_store)
    store, local = open_store(**BY_COUNT)
    store.load(VERSIONS)
    time.sleep(SETTLE_S)
    assert not _auto_compactions(local)
    _commit_one_write(store, live, b"a")
    assert _auto_compactions(local)
    assert _merged_soon(store)
    store.load(VERSIONS + 1)
    assert contents(store) == live


def test_a_reader_never_compacts(open_store):
    live = _committed_in_level0_files(open_store)
    store, local = open_store(**BY_SIZE)
    store.load(VERSIONS)
    assert contents(store) == live
    store.maintenance_snapshot()
    time.sleep(SETTLE_S)
    assert _level0_files(store) == VERSIONS and not _auto_compactions(local)


def test_a_rewind_holds_compactions_again(open_store):
    live = _committed_in_level0_files(open_store)
    store, local = open_store(**BY_SIZE)
    store.load(VERSIONS)
    _commit_one_write(store, live, b"a")
    store.load(VERSIONS + 1)
    store.maintenance_snapshot()
    assert _auto_compactions(local)
    store.apply_batch([kv(2, b"aborted")])
    store.abort()
    store.load(VERSIONS + 1)  # the base version, rebuilt from the local cache
    assert not _auto_compactions(local)
    assert contents(store) == live


def test_a_new_store_compacts_from_the_start(open_store):
    store, local = open_store(**BY_SIZE)
    store.load(0)
    store.apply_batch([kv(1)])
    assert _auto_compactions(local)
