"""Idle-state expiry through the Store, on every backend: what a batch sees is decided by the batch times
the checkpoint records, deletion happens a slice per commit, and stamps survive restarts."""
from __future__ import annotations

import time

import pytest

from sparkstate.engine import Store
from sparkstate.engine.ttl import STAMP, StampedBackend

from .conftest import contents, kv, maintain, make_spec, settle

TTL = 10_000  # ms
T0 = 1_700_000_000_000  # ms: the fake wall clock's start


class FakeClock:
    """The wall clock every commit and first load reads (`time.time`), set by the test."""

    def __init__(self, monkeypatch) -> None:
        self.ms = T0
        monkeypatch.setattr(time, "time", lambda: self.ms / 1000)

    def at(self, ms: int) -> None:
        self.ms = ms


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return FakeClock(monkeypatch)


def batch(store: Store, version: int, writes=(), commit_at: int | None = None, clock: FakeClock | None = None):
    """Load `version`, write, commit (the wall clock at `commit_at` when given): one micro-batch."""
    store.load(version)
    if writes:
        store.apply_batch(list(writes))
    if commit_at is not None and clock is not None:
        clock.at(commit_at)
    result = store.commit()
    maintain(store)
    return result


def visible(store: Store, keys) -> dict[bytes, bytes | None]:
    return {k: store.get(k) for k in keys}


def test_a_key_is_seen_while_its_idle_time_is_at_most_the_ttl_and_gone_after(new_store, clock):
    s = new_store(ttl_ms=TTL)
    a, b = kv(1), kv(2)
    batch(s, 0, [a, b], commit_at=T0, clock=clock)               # both stamped T0 (the first load's clock)
    batch(s, 1, [], commit_at=T0 + TTL, clock=clock)             # runs at T0: nothing expires
    s.load(2)                                                    # runs at T0 + TTL: idle exactly TTL
    assert visible(s, [a[0], b[0]]) == {a[0]: a[1], b[0]: b[1]}
    s.apply_batch([(b[0], b"b-again")])                          # b's last write: T0 + TTL
    clock.at(T0 + TTL + 1)
    s.commit()
    settle(s)
    s.load(3)                                                    # runs at T0 + TTL + 1
    assert s.get(a[0]) is None and s.get(b[0]) == b"b-again"
    assert s.get_many([a[0], b[0], kv(3)[0]]) == [None, b"b-again", None]
    assert contents(s) == {b[0]: b"b-again"}


def test_the_decision_depends_on_recorded_batch_times_not_the_wall_clock(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(i) for i in range(20)], commit_at=T0 + 1, clock=clock)   # version 1 records T0 + 1
    clock.at(T0 + 100 * TTL)                                      # whatever the wall clock says now
    s.load(1)
    assert len(contents(s)) == 20
    again = new_store(instance_id="restarted", ttl_ms=TTL)
    again.load(1)
    assert len(contents(again)) == 20


def test_a_re_executed_batch_expires_the_same_keys(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(i) for i in range(10)], commit_at=T0, clock=clock)
    # Batch 1 runs at T0 (the time version 1 records), so keys 0..4 keep the stamp T0.
    batch(s, 1, [kv(i, b"w") for i in range(5)], commit_at=T0 + TTL // 2, clock=clock)
    # Batch 2 runs at T0 + TTL / 2; batch 3 at T0 + TTL + 1, when only keys 0..2 are young enough.
    batch(s, 2, [kv(i, b"x") for i in range(3)], commit_at=T0 + TTL + 1, clock=clock)
    runs = []
    for attempt in range(2):                                      # batch 3, twice: the second after a "crash"
        store = s if attempt == 0 else new_store(instance_id="retry", ttl_ms=TTL)
        clock.at(T0 + 50 * TTL + attempt)                         # a later wall clock for the re-run
        store.load(3)
        runs.append(contents(store))
        store.apply_batch([kv(100)])
        store.commit()
        settle(store)
    assert runs[0] == runs[1] == {kv(i)[0]: b"x-%d" % i for i in range(3)}
    # ... and the same version again from memory, after an abort
    s.load(3)
    s.apply_batch([kv(200)])
    s.abort()
    s.load(3)
    assert contents(s) == runs[0]


def test_a_restart_keeps_each_keys_last_write_time(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(1)], commit_at=T0 + 10, clock=clock)          # kv(1) at T0
    batch(s, 1, [kv(2)], commit_at=T0 + 20, clock=clock)          # kv(2) at T0 + 10
    s.close()
    r = new_store(instance_id="after-restart", ttl_ms=TTL)
    batch(r, 2, [], commit_at=T0 + TTL + 5, clock=clock)          # runs at T0 + 20
    r.load(3)                                                     # runs at T0 + TTL + 5
    assert r.get(kv(1)[0]) is None and r.get(kv(2)[0]) == kv(2)[1]


def test_expired_keys_are_deleted_a_slice_per_commit_and_never_by_a_read(new_store, clock):
    s = new_store(ttl_ms=TTL, ttl_cleanup_rows=16, rocksdb_change_log=True)
    batch(s, 0, [kv(i) for i in range(200)], commit_at=T0, clock=clock)
    batch(s, 1, [kv(500)], commit_at=T0 + TTL + 1, clock=clock)     # batch 2 runs at T0 + TTL + 1
    s.load(2)
    assert s.get(kv(3)[0]) is None and s.metrics().num_keys == 201  # a read deletes nothing
    version, expired, keys = 2, [], []
    while s.metrics().num_keys > 1 and version < 200:
        s.load(version)
        s.apply_batch([(kv(500)[0], b"kept")])                      # refreshed every batch
        clock.at(T0 + TTL + version)
        result = s.commit()
        settle(s)
        version += 1
        expired.append(result.metrics["sparkstateTtlExpiredKeys"])
        keys.append(s.metrics().num_keys)
    assert sum(expired) == 200 and keys[-1] == 1
    assert max(expired) <= 16 + 32  # a slice (the heap walks whole buckets: a bucket's few entries more)
    assert len(expired) >= 200 // 48
    # The change feed shows each expiry as a delete of the key, the value as Spark wrote it.
    removed = {k for ch in s.changes(3, version) for k, v in ch.rows if v is None}
    assert removed == {kv(i)[0] for i in range(200)}
    kept = [v for ch in s.changes(3, version) for k, v in ch.rows if v is not None]
    assert set(kept) == {b"kept"}


def test_without_ttl_the_store_stamps_nothing(new_store, clock):
    s = new_store()
    batch(s, 0, [kv(1)], commit_at=T0, clock=clock)
    s.load(1)
    assert not isinstance(s._backend, StampedBackend)
    manifest = s.file_manager.read_manifest(1)
    assert not manifest.ttl_stamps and manifest.batch_time_ms is None
    assert s._backend.get(kv(1)[0]) == kv(1)[1]                      # stored as Spark wrote it


def test_values_are_stored_behind_an_8_byte_stamp(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(1)], commit_at=T0 + 7, clock=clock)
    s.load(1)
    raw = s._backend.inner.get(kv(1)[0])
    assert raw == STAMP.pack(T0) + kv(1)[1]
    manifest = s.file_manager.read_manifest(1)
    assert manifest.ttl_stamps and manifest.batch_time_ms == T0 and manifest.clock_ms == T0 + 7


def test_turning_ttl_on_stamps_existing_state_with_that_batchs_time(new_store, clock):
    s = new_store()
    batch(s, 0, [kv(i) for i in range(50)], commit_at=T0, clock=clock)
    batch(s, 1, [], commit_at=T0 + 5 * TTL, clock=clock)
    s.close()
    on = new_store(instance_id="with-ttl", ttl_ms=TTL)
    batch(on, 2, [kv(1, b"new")], commit_at=T0 + 5 * TTL + 1, clock=clock)   # runs at T0 + 5 TTL
    on.load(3)                                                   # idle for 1 ms only: all seen
    assert len(contents(on)) == 50 and on.get(kv(1)[0]) == b"new-1"
    assert on.file_manager.read_manifest(3).ttl_stamps
    batch(on, 3, [], commit_at=T0 + 6 * TTL + 1, clock=clock)
    on.load(4)                                                   # runs at T0 + 6 TTL + 1: all expired
    assert contents(on) == {}


def test_removing_the_ttl_keeps_the_stamps_and_expires_nothing(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(1), kv(2)], commit_at=T0, clock=clock)
    batch(s, 1, [kv(2, b"w")], commit_at=T0 + 10 * TTL, clock=clock)
    s.close()
    off = new_store(instance_id="without-ttl")
    batch(off, 2, [kv(3)], commit_at=T0 + 10 * TTL + 1, clock=clock)   # kv(3) at T0 + 10 TTL
    off.load(3)
    assert contents(off) == {kv(1)[0]: kv(1)[1], kv(2)[0]: b"w-2", kv(3)[0]: kv(3)[1]}
    assert off.file_manager.read_manifest(3).ttl_stamps
    clock.at(T0 + 10 * TTL + 2)
    assert off.commit().metrics["sparkstateTtlExpiredKeys"] == 0
    settle(off)
    back = new_store(instance_id="ttl-again", ttl_ms=TTL)
    back.load(4)                             # runs at T0 + 10 TTL + 2: kv(1) and kv(2) were last written at T0
    assert contents(back) == {kv(3)[0]: kv(3)[1]}


def test_batch_times_never_go_backwards(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(1)], commit_at=T0 + 5 * TTL, clock=clock)     # version 1 recorded at T0 + 5 TTL
    batch(s, 1, [kv(2)], commit_at=T0, clock=clock)               # this executor's clock is behind
    m = s.file_manager.read_manifest(2)
    assert m.batch_time_ms == T0 + 5 * TTL and m.clock_ms == T0 + 5 * TTL
    s.load(2)
    assert s.get(kv(2)[0]) == kv(2)[1]


def test_the_change_feed_shows_values_as_spark_wrote_them(new_store, clock):
    s = new_store(ttl_ms=TTL, rocksdb_change_log=True)
    batch(s, 0, [kv(1), kv(2)], commit_at=T0, clock=clock)
    batch(s, 1, [(kv(1)[0], None)], commit_at=T0 + 1, clock=clock)
    assert [c.rows for c in s.changes(1, 2)] == [[kv(1), kv(2)], [(kv(1)[0], None)]]


def test_a_snapshot_replay_keeps_the_stamps(new_store, clock):
    s = new_store(ttl_ms=TTL, rocksdb_change_log=True, heap_snapshot_every=1)
    batch(s, 0, [kv(1)], commit_at=T0, clock=clock)
    batch(s, 1, [kv(2)], commit_at=T0 + TTL, clock=clock)          # kv(2) at T0
    batch(s, 2, [kv(3)], commit_at=T0 + TTL + 1, clock=clock)      # kv(3) at T0 + TTL
    reader = new_store(instance_id="replay", ttl_ms=TTL)
    reader.replay(1, 3)                                            # the state of version 3, read at its time
    assert contents(reader) == {kv(3)[0]: kv(3)[1]}


def test_a_walk_visits_every_entry_once(new_store, clock):
    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(i) for i in range(300)], commit_at=T0, clock=clock)
    s.load(1)
    inner = s._backend.inner
    seen, position = [], None
    while True:
        rows, position = inner.walk(position, 37)
        seen += [k for k, _ in rows]
        if position is None:
            break
    assert sorted(seen) == sorted(kv(i)[0] for i in range(300))


def test_a_copy_of_the_stored_values_keeps_the_stamps(new_store, clock, tmp_path):
    """What a rescale needs: the values as stored, expired keys included, written into a new store through a
    bulk loader whose commit declares the source's stamps; the copy decides as the source does."""
    import os

    from sparkstate.checkpoint.location import open_file_manager
    from sparkstate.engine.backend_contract import BackendContext
    from sparkstate.engine.backend_registry import bulk_loader_for
    from sparkstate.engine.local_layout import InstanceLayout
    from sparkstate.engine.snapshot_runner import run_snapshot

    s = new_store(ttl_ms=TTL)
    batch(s, 0, [kv(1), kv(2)], commit_at=T0, clock=clock)
    batch(s, 1, [kv(2, b"w")], commit_at=T0 + TTL // 2, clock=clock)  # runs at T0: kv(2) stamped T0
    batch(s, 2, [kv(3)], commit_at=T0 + TTL + 1, clock=clock)         # runs at T0 + TTL / 2: no sweep yet
    s.load(3)                                                          # runs at T0 + TTL + 1
    assert contents(s) == {kv(3)[0]: kv(3)[1]}
    stored = [row for chunk in s.scan(b"", 100, 1 << 20, as_stored=True) for row in chunk]
    assert [k for k, _ in stored] == sorted([kv(1)[0], kv(2)[0], kv(3)[0]])   # expired ones too, stamped
    assert dict(stored)[kv(3)[0]] == STAMP.pack(T0 + TTL // 2) + kv(3)[1]
    stamps = s.stored_stamps()
    assert stamps.stamped and stamps.batch_time_ms == T0 + TTL + 1

    target = make_spec("file:" + str(tmp_path / "copy"), "copier", backend=new_store.backend, ttl_ms=TTL)
    layout = InstanceLayout(str(tmp_path / "copy-local"))
    layout.ensure_private()
    ctx = BackendContext(settings=target.settings, layout=layout, instance_id="copier", query_run_id="copy",
                         file_manager=open_file_manager(target.state_location(), target.settings, {}),
                         store=target.identity(), stamps=stamps)
    loader = bulk_loader_for(new_store.backend, ctx)
    loader.add(0, stored)
    loader.end_source(0)
    run_snapshot(loader.finish(), 4)
    loader.close()
    copy = Store(target, str(tmp_path / "reader"))
    copy.load(4)
    assert contents(copy) == {kv(3)[0]: kv(3)[1]}
    assert copy.file_manager.read_manifest(4).ttl_stamps
    copy.close()
    assert os.path.isdir(str(tmp_path / "copy"))


def test_checkpoint_format_v2_attempts_carry_the_stamps(new_store, clock):
    s = new_store(ttl_ms=TTL, checkpoint_ids=True)
    s.load(0)
    s.apply_batch([kv(1), kv(2)])
    clock.at(T0 + TTL // 2)
    first = s.commit()
    s.load(1, first.checkpoint_id)
    s.apply_batch([kv(2, b"w")])                                   # runs at T0 + TTL / 2
    clock.at(T0 + TTL + 1)
    second = s.commit()
    settle(s)
    manifest = s.file_manager.read_manifest(2, second.checkpoint_id)
    assert manifest.ttl_stamps and manifest.batch_time_ms == T0 + TTL // 2
    other = new_store(instance_id="other-executor", ttl_ms=TTL, checkpoint_ids=True)
    other.load(2, second.checkpoint_id)                            # runs at T0 + TTL + 1
    assert contents(other) == {kv(2)[0]: b"w-2"}
