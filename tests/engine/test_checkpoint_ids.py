"""Checkpoint format v2: every commit is an attempt with a unique id; a load with an id takes exactly that
attempt (not the last one published), retention and gc keep what retained attempts need, and the change
feed and snapshot replay follow the lineage of the attempt they are given."""
from __future__ import annotations

import os
import time

import pytest

from sparkstate.checkpoint.gc import collect_garbage
from sparkstate.errors import VersionNotFoundError

from .conftest import contents, kv, settle

HOURS_LATER = 2 * 3600


def _commit(store, version: int, rows) -> str | None:
    store.apply_batch(rows)
    result = store.commit()
    assert result.version == version + 1
    return result.checkpoint_id


def _two_attempts(new_store):
    """Version 1 committed once (id a1); version 2 committed by two attempts built on it: B writes keys 0-9
    with tag b, then C (published last, so `2.manifest` is C's) writes keys 0-9 with tag c."""
    first = new_store("writer-a", checkpoint_ids=True, rocksdb_change_log=True)
    first.load(0)
    a1 = _commit(first, 0, [kv(i, b"a") for i in range(20)])
    b = new_store("writer-b", checkpoint_ids=True, rocksdb_change_log=True)
    b.load(1, a1)
    b2 = _commit(b, 1, [kv(i, b"b") for i in range(10)])
    c = new_store("writer-c", checkpoint_ids=True, rocksdb_change_log=True)
    c.load(1, a1)
    c2 = _commit(c, 1, [kv(i, b"c") for i in range(10)] + [(kv(19)[0], None)])
    settle(b), settle(c)
    return a1, b2, c2, b


def _expected(tag: bytes, removed: bool = False) -> dict[bytes, bytes]:
    out = dict(kv(i, b"a") for i in range(20))
    out.update(kv(i, tag) for i in range(10))
    if removed:
        del out[kv(19)[0]]
    return out


def test_each_commit_is_an_attempt_with_its_own_manifest_and_its_base(new_store):
    store = new_store(checkpoint_ids=True)
    store.load(0)
    first = store.commit()
    store.load(1, first.checkpoint_id)
    store.apply_batch([kv(1)])
    second = store.commit()
    assert first.checkpoint_id and second.checkpoint_id and first.checkpoint_id != second.checkpoint_id
    assert (first.base_checkpoint_id, second.base_checkpoint_id) == (None, first.checkpoint_id)
    names = sorted(os.listdir(new_store.checkpoint_dir / "manifests"))
    assert names == sorted(["1.manifest", f"1_{first.checkpoint_id}.manifest",
                            "2.manifest", f"2_{second.checkpoint_id}.manifest"])
    fm = store.file_manager
    assert fm.read_manifest(2, second.checkpoint_id).base_checkpoint_id == first.checkpoint_id


def test_format_one_commits_carry_no_id(new_store):
    store = new_store()
    store.load(0)
    assert store.commit().checkpoint_id is None
    assert os.listdir(new_store.checkpoint_dir / "manifests") == ["1.manifest"]


def test_a_load_with_an_id_takes_that_attempt_not_the_last_one_published(new_store):
    _, b2, c2, _ = _two_attempts(new_store)
    reader = new_store("reader", checkpoint_ids=True)
    reader.load(2)  # no id: the version's manifest, the last attempt published
    assert contents(reader) == _expected(b"c", removed=True)
    reader.load(2, b2)
    assert contents(reader) == _expected(b"b")
    reader.load(2, c2)
    assert contents(reader) == _expected(b"c", removed=True)


def test_a_live_store_holding_another_attempt_reloads_the_recorded_one(new_store):
    _, b2, c2, b = _two_attempts(new_store)
    assert b.load(2, b2).source == "memory"  # the attempt it committed itself
    result = b.load(2, c2)                    # another executor's attempt was recorded
    assert result.source == "checkpoint"
    assert contents(b) == _expected(b"c", removed=True)
    b.apply_batch([kv(50)])
    third = b.commit()
    assert third.base_checkpoint_id == c2
    assert b.file_manager.read_manifest(3, third.checkpoint_id).base_checkpoint_id == c2


def test_an_unknown_attempt_is_refused_with_what_to_check(new_store):
    store = new_store(checkpoint_ids=True)
    store.load(0)
    store.commit()
    with pytest.raises(VersionNotFoundError, match="no manifest of attempt 0000-missing .*commit log recorded"):
        new_store("reader", checkpoint_ids=True).load(1, "0000-missing")


def test_retention_drops_every_attempt_of_old_versions_and_keeps_retained_attempts_loadable(new_store):
    a1, b2, c2, _ = _two_attempts(new_store)
    store = new_store("writer-d", retain=2, checkpoint_ids=True)
    store.load(2, b2)
    d3 = _commit(store, 2, [kv(30)])
    settle(store)
    store.maintenance_cleanup()
    names = sorted(os.listdir(new_store.checkpoint_dir / "manifests"))
    assert names == sorted(["2.manifest", f"2_{b2}.manifest", f"2_{c2}.manifest", "3.manifest", f"3_{d3}.manifest"])
    reader = new_store("reader", checkpoint_ids=True)
    for attempt, expected in ((b2, _expected(b"b")), (c2, _expected(b"c", removed=True))):
        reader.load(2, attempt)
        assert contents(reader) == expected
    reader.load(3, d3)
    assert contents(reader) == {**_expected(b"b"), **dict([kv(30)])}


def test_gc_keeps_the_files_only_an_attempt_names(new_store):
    _, b2, _, _ = _two_attempts(new_store)
    report = collect_garbage(str(new_store.checkpoint_dir.parent), now=time.time() + HOURS_LATER)
    assert report.orphans == 0
    reader = new_store("reader", checkpoint_ids=True)
    reader.load(2, b2)  # `2.manifest` is the other attempt's: b's files are named by its own manifest only
    assert contents(reader) == _expected(b"b")


def test_the_change_feed_follows_the_lineage_of_the_given_attempt(new_store):
    a1, b2, c2, _ = _two_attempts(new_store)
    reader = new_store("reader", checkpoint_ids=True, rocksdb_change_log=True)
    by_attempt = {c.version: dict(c.rows) for c in reader.changes(1, 2, b2)}
    assert by_attempt[2] == dict(kv(i, b"b") for i in range(10))
    by_other = {c.version: dict(c.rows) for c in reader.changes(1, 2, c2)}
    assert by_other[2] == {**dict(kv(i, b"c") for i in range(10)), kv(19)[0]: None}
    assert by_attempt[1] == by_other[1] == dict(kv(i, b"a") for i in range(20))


@pytest.mark.parametrize("backend", ["rocksdb"])  # every RocksDB version is a snapshot to replay from
def test_snapshot_replay_follows_the_lineage_of_the_given_attempt(new_store):
    a1, b2, c2, _ = _two_attempts(new_store)
    reader = new_store("reader", checkpoint_ids=True, rocksdb_change_log=True)
    reader.replay(1, 2, a1, b2)
    assert contents(reader) == _expected(b"b")
    reader.replay(1, 2, a1, c2)
    assert contents(reader) == _expected(b"c", removed=True)
