import json
import os
import threading

import pytest

from sparkstate.engine import State, Store, StoreSpec
from sparkstate.engine.rocksdb.private_files import PACK_NAME
from sparkstate.engine.store import CUSTOM_METRICS
from sparkstate.errors import ConfigError, CorruptCheckpointError, LocalDiskError, StoreStateError, VersionNotFoundError
from sparkstate.keygroups import storage_key
from tests.storage.instrumented import InjectedFault, InstrumentedFileIO

from .conftest import contents, kv, maintain, settle

# Where a store finds an older version it committed itself (or its version after an abort).
OLDER_VERSION_SOURCE = {"rocksdb": "checkpoint", "heap": "memory"}


def test_spec_from_json():
    doc = {"checkpointLocation": "file:/tmp/c/state/0/3", "operatorId": 0, "partitionId": 3, "storeName": "default",
           "instanceId": "u1", "queryRunId": "r1", "keySchema": "{}", "valueSchema": "{}", "numColsPrefixKey": 1,
           "numPartitions": 4, "minVersionsToRetain": 100,
           "settings": {"spark.sql.streaming.stateStore.sparkstate.rocksdb.bloomFilterBitsPerKey": "0"}}
    spec = StoreSpec.from_json(json.dumps(doc))
    assert spec.partition_id == 3 and spec.num_cols_prefix_key == 1 and spec.settings.rocksdb_bloom_bits == 0
    with pytest.raises(ConfigError, match="numPartitions"):
        StoreSpec.from_json({k: v for k, v in doc.items() if k != "numPartitions"})


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_a_standalone_store_commits_and_a_second_instance_reads_it(tmp_path, backend):
    import dataclasses

    from sparkstate.config import Settings
    settings = dataclasses.replace(Settings(), backend=backend)
    location = "file:" + str(tmp_path / "ckpt")
    writer = Store(StoreSpec.standalone(location, settings, "writer"), str(tmp_path / "w"))
    writer.load(0)
    writer.apply_batch([kv(1), kv(2)])
    writer.commit()
    writer.close()
    reader = Store(StoreSpec.standalone(location, settings, "reader"), str(tmp_path / "r"))
    reader.load(1)
    assert contents(reader) == dict([kv(1), kv(2)])
    reader.close()


def test_put_get_remove_scan_prefix(new_store):
    s = new_store()
    assert s.load(0).source == "checkpoint"
    s.apply_batch([kv(i) for i in range(100)])
    s.apply_batch([(kv(i)[0], None) for i in range(0, 100, 10)] + [(b"\x00\x00\x00\x01other", b"o")])
    assert s.get(kv(5)[0]) == kv(5)[1] and s.get(kv(10)[0]) is None and s.get(b"nope") is None
    expected = dict(kv(i) for i in range(100) if i % 10)
    expected[b"\x00\x00\x00\x01other"] = b"o"
    assert contents(s) == expected
    assert list(contents(s)) == sorted(expected)  # byte order
    prefix = storage_key(3, b"")
    assert contents(s, prefix) == {k: v for k, v in expected.items() if k.startswith(prefix)}
    assert contents(s, b"\xff\xff") == {}
    assert s.metrics().num_keys == len(expected)
    chunks = list(s.scan(b"", 7, 1 << 20))
    assert [k for c in chunks for k, _ in c] == sorted(expected) and max(map(len, chunks)) == 7
    assert list(s.scan(b"\xff\xff", 7, 1 << 20)) == []


def test_num_keys_exact_with_duplicates_and_get_then_put(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([(b"a", b"1"), (b"a", b"2"), (b"b", b"1"), (b"a", None), (b"c", None), (b"a", b"3")])
    assert s.metrics().num_keys == 2
    assert s.get(b"z") is None
    s.apply_batch([(b"z", b"1")])            # existence learned from get
    assert s.get(b"b") == b"1"
    s.apply_batch([(b"b", b"2"), (b"b", None)])
    assert s.metrics().num_keys == 2
    # puts only (the columnar path): a new key put twice in one batch counts once
    s.apply_batch([(b"n", b"1"), (b"n", b"2"), (b"z", b"2")])
    s.apply_batch([(b"m", b"1")])
    assert s.metrics().num_keys == 4 and s.get(b"n") == b"2"
    s.apply_batch([(b"n", None), (b"m", None)])
    assert s.metrics().num_keys == 2
    assert s.commit().version == 1
    t = new_store("inst-2")
    t.load(1)
    assert t.metrics().num_keys == 2 == len(contents(t))


def test_get_many_answers_in_order_and_its_answers_keep_the_key_count_exact(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(10)])
    s.commit()
    s.load(1)
    s.apply_batch([kv(10), (kv(3)[0], None)])  # uncommitted writes are seen
    absent = storage_key(0, b"absent")
    keys = [kv(2)[0], kv(3)[0], kv(10)[0], absent, kv(2)[0]]
    assert s.get_many(keys) == [kv(2)[1], None, kv(10)[1], None, kv(2)[1]]
    assert s.get_many([]) == []
    # puts and removes after it: the rocksdb backend counts keys from the existence its lookups learned
    s.apply_batch([(kv(2)[0], b"new"), (kv(3)[0], b"back"), (absent, b"x"), (kv(10)[0], None)])
    assert s.metrics().num_keys == 11 == len(contents(s))
    assert s.get_many([kv(2)[0], kv(3)[0], kv(10)[0]]) == [b"new", b"back", None]
    assert s.commit().version == 2


def test_commit_then_reload_in_fresh_instance(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(500)])
    r = s.commit()
    assert r.version == 1 and set(r.metrics) == set(CUSTOM_METRICS)
    assert r.metrics["sparkstateFilesUploaded"] >= 1 and r.metrics["sparkstateCheckpointBytes"] > 0
    assert s.load(1).source == "memory"
    fresh = new_store("inst-2")
    res = fresh.load(1)
    assert res.source == "checkpoint" and res.version == 1
    assert contents(fresh) == dict(kv(i) for i in range(500))


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])  # logged commits: rocksdb/test_logged_commits.py
def test_incremental_commit_uploads_only_new_files(new_store):
    s = new_store(rocksdb_flush_every=1)  # RocksDB: a flushed commit
    s.load(0)
    s.apply_batch([kv(i) for i in range(1000)])
    first = s.commit().metrics
    s.load(1)
    s.apply_batch([kv(i) for i in range(1000, 1100)])
    second = s.commit().metrics
    assert second["sparkstateFilesReused"] >= first["sparkstateFilesUploaded"]
    assert second["sparkstateFilesUploaded"] == 1
    assert second["sparkstateBytesUploaded"] < first["sparkstateBytesUploaded"]
    s.load(2)
    third = s.commit().metrics          # no writes: nothing new to upload
    assert third["sparkstateFilesUploaded"] == 0 and third["sparkstateBytesUploaded"] == 0
    fresh = new_store("inst-2")
    fresh.load(3)
    assert contents(fresh) == dict(kv(i) for i in range(1100))


def test_a_recommitted_version_is_the_last_attempts(new_store):
    # The last attempt to commit a version counts (Spark's rule under checkpoint format 1): a retried or
    # re-executed batch replaces what an earlier attempt committed, atomically.
    s = new_store()
    s.load(0)
    s.apply_batch([(b"k", b"v1")])
    s.commit()
    s.load(1)
    s.apply_batch([(b"first", b"attempt")])
    assert s.commit().version == 2
    # RocksDB: the live DB is at 2, so 1 comes from the checkpoint; heap: 1 is still a view in memory
    assert s.load(1).source == OLDER_VERSION_SOURCE[new_store.backend]
    assert contents(s) == {b"k": b"v1"}
    s.apply_batch([(b"second", b"attempt"), (b"k", None)])
    assert s.commit().version == 2
    fresh = new_store("inst-2")
    fresh.load(2)
    assert contents(fresh) == {b"second": b"attempt"}
    assert fresh.metrics().num_keys == 1
    assert s.load(2).source == "memory"  # the live database is the durable version 2
    s.apply_batch([(b"third", b"x")])
    s.commit()
    fresh.load(3)
    assert contents(fresh) == {b"second": b"attempt", b"third": b"x"}


def test_abort_discards(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([(b"a", b"1")])
    s.commit()
    s.load(1)
    s.apply_batch([(b"b", b"2"), (b"a", None)])
    s.abort()
    s.abort()  # idempotent
    assert s.state is State.ABORTED
    with pytest.raises(StoreStateError, match="get"):
        s.get(b"a")
    # Rewound without reading the checkpoint: heap rolls back in memory, RocksDB reopens its base
    # version from the local cache.
    assert s.load(1).source == "memory"
    assert s.metrics().custom["sparkstateCheckpointLoads"] == 0
    assert contents(s) == {b"a": b"1"} and s.metrics().num_keys == 1
    s.abort()  # abort without writes keeps the clean live DB
    assert s.load(1).source == "memory"


def test_lifecycle_guards(new_store):
    s = new_store()
    for call in (lambda: s.get(b"x"), lambda: s.get_many([b"x"]), lambda: s.apply_batch([]), s.commit,
                 lambda: s.open_cursor(b"")):
        with pytest.raises(StoreStateError, match="CLOSED"):
            call()
    s.abort()  # no-op when nothing is loaded
    s.load(0)
    s.commit()
    with pytest.raises(StoreStateError, match="COMMITTED"):
        s.apply_batch([(b"a", b"1")])
    with pytest.raises(StoreStateError):
        s.commit()
    with pytest.raises(VersionNotFoundError):
        s.load(-1)


def test_iteration_while_removing(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(300)])
    cursor = s.open_cursor(b"")
    seen = {}
    done = False
    while not done:
        rows, done = cursor.next_chunk(50, 1 << 20)
        seen.update(rows)
        s.apply_batch([(k, None) for k, _ in rows] + [(b"\xff-new-%d" % len(seen), b"n")])
    assert seen == dict(kv(i) for i in range(300))
    assert s.metrics().num_keys == 6
    assert set(contents(s)) == {b"\xff-new-%d" % n for n in range(50, 301, 50)}


def test_chunks_respect_max_bytes(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([(b"k%03d" % i, b"x" * 100) for i in range(10)])
    cursor = s.open_cursor(b"k")
    rows, done = cursor.next_chunk(100, 250)
    assert len(rows) == 3 and not done
    cursor.close()
    with pytest.raises(StoreStateError, match="closed"):
        cursor.next_chunk(1, 1)


def test_open_cursor_closed_by_release_and_reopen_works(new_store, tmp_path):
    s = new_store()
    s.load(0)
    s.apply_batch([(b"a", b"1"), (b"b", b"2")])
    s.commit()
    s.load(1)
    cursor = s.open_cursor(b"")
    cursor.next_chunk(1, 100)
    s.release()  # must free the DB LOCK despite the open cursor
    assert cursor.closed
    other = new_store()  # same instance id and local dir, as another worker would
    assert other.load(1).source == "checkpoint"
    assert contents(other) == {b"a": b"1", b"b": b"2"}
    other.close()  # before `s` closes: closing an instance removes its local directory


def test_corrupt_sst_in_checkpoint(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(200)])
    s.commit()
    files_dir = new_store.checkpoint_dir / "files"
    (ref,) = [r for r in s.file_manager.read_manifest(1).shared_files  # the state's one file: not the change
              if r.local != PACK_NAME]                                # log, nor RocksDB's private files
    sst = ref.remote
    path = files_dir / sst
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    cold = new_store("inst-cold")
    with pytest.raises(CorruptCheckpointError, match=rf"{sst}.*version 1"):
        cold.load(1)
    assert cold.state is State.CLOSED


def test_deleted_manifest(new_store):
    s = new_store()
    s.load(0)
    s.commit()
    s.load(1)
    s.commit()
    os.remove(new_store.checkpoint_dir / "manifests" / "1.manifest")
    with pytest.raises(VersionNotFoundError, match=r"version 1 .*1\.manifest"):
        new_store("inst-2").load(1)
    s.load(2)
    with pytest.raises(VersionNotFoundError, match="version 7"):
        s.load(7)
    assert s.state is State.CLOSED
    with pytest.raises(StoreStateError):
        s.get(b"a")
    assert s.load(2).source == "checkpoint"


def test_cleanup_retains_versions_that_all_load(new_store):
    # heap: full snapshots let old deltas go; RocksDB: merges of level 0 (at 2 files) let old SST files go
    s = new_store(retain=3, heap_snapshot_every=2, rocksdb_level0_trigger=2)
    s.load(0)
    for v in range(1, 9):
        s.apply_batch([kv(i) for i in range(v * 50, v * 50 + 50)] + [(kv(v * 50 - 50)[0], None)])
        assert s.commit().version == v
        s.load(v)
        maintain(s)
    remote_before = set(os.listdir(new_store.checkpoint_dir / "files"))
    s.maintenance_cleanup()
    manifests = sorted(os.listdir(new_store.checkpoint_dir / "manifests"))
    assert manifests == ["6.manifest", "7.manifest", "8.manifest"]
    remote_after = set(os.listdir(new_store.checkpoint_dir / "files"))
    referenced = set()
    for v in (6, 7, 8):
        referenced |= s.file_manager.read_manifest(v).remote_names()
    # heap: a full snapshot of the newest version (8) is written but referenced from the next commit on
    assert referenced <= remote_after < remote_before
    assert all(name.startswith("8-") for name in remote_after - referenced)
    for v in (6, 7, 8):
        fresh = new_store(f"check-{v}")
        fresh.load(v)
        assert fresh.metrics().num_keys == len(contents(fresh))
    s.apply_batch([(b"after", b"cleanup")])
    assert s.commit().version == 9


def test_two_instances_share_checkpoint(new_store, tmp_path):
    a = new_store("inst-a", retain=2)
    b = new_store("inst-b", retain=2, local_root=tmp_path / "local-b")
    a.load(0)
    a.apply_batch([(b"from-a", b"1")])
    a.commit()
    b.load(1)
    b.apply_batch([(b"from-b", b"2")])
    b.commit()
    assert a.load(2).source == "checkpoint"
    a.apply_batch([(b"from-a-again", b"3")])
    a.commit()
    b.maintenance_cleanup()
    a.maintenance_cleanup()
    b.load(3)
    assert contents(b) == {b"from-a": b"1", b"from-b": b"2", b"from-a-again": b"3"}


@pytest.mark.parametrize("backend,verb,pattern,after_bytes", [
    ("rocksdb", "upload_file", "*/files/2-*", None),      # an SST upload fails
    ("heap", "open_write", "*/files/2-*", 300),           # the delta, written in place, fails halfway
    ("rocksdb", "create_exclusive", "*/manifests/2.manifest", None),
    ("heap", "create_exclusive", "*/manifests/2.manifest", None),
])
def test_failed_commit_leaves_previous_version_loadable(new_store, verb, pattern, after_bytes):
    io = InstrumentedFileIO()
    s = new_store(fileio=io, rocksdb_flush_every=1)  # RocksDB: version 2 uploads an SST file
    s.load(0)
    s.apply_batch([kv(i) for i in range(100)])
    s.commit()
    s.load(1)
    io.fail(verb, pattern, after_bytes=after_bytes)
    s.apply_batch([kv(i, b"new") for i in range(100, 200)])
    with pytest.raises(InjectedFault):
        s.commit()
    assert s.state is State.ABORTED
    s.abort()
    assert s.file_manager.versions() == [1]
    assert s.load(1).source == "memory"  # the version the failed commit started from, rewound
    assert contents(s) == dict(kv(i) for i in range(100))
    io.heal()
    s.apply_batch([(b"x", b"y")])
    assert s.commit().version == 2
    fresh = new_store("inst-2")
    fresh.load(2)
    assert fresh.metrics().num_keys == 101


def test_metrics_from_other_thread_and_close_removes_local_dir(new_store, tmp_path):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(1000)])
    results = []
    t = threading.Thread(target=lambda: results.append(s.metrics()))
    t.start()
    t.join()
    assert results[0].num_keys == 1000 and results[0].memory_used_bytes > 0
    s.commit()
    s.maintenance_snapshot()
    s.close()
    assert not (tmp_path / "local" / "inst-1").exists()
    assert s.state is State.CLOSED and s.metrics().num_keys == 0


@pytest.mark.parametrize("written_by,read_by", [("rocksdb", "heap"), ("heap", "rocksdb")])
def test_a_checkpoint_of_the_other_backend_is_read_with_its_own_and_never_written(tmp_path, written_by, read_by):
    from sparkstate.errors import CheckpointError

    from .conftest import make_spec

    checkpoint = "file:" + str(tmp_path / "ckpt")
    writer = Store(make_spec(checkpoint, "w", backend=written_by), str(tmp_path / "local"))
    writer.load(0)
    writer.apply_batch([(b"\0\0\0\1key", b"value")])
    writer.commit()
    writer.close()
    reader = Store(make_spec(checkpoint, "r", backend=read_by), str(tmp_path / "local"))
    try:
        reader.load(1)  # Spark's state source reads it whatever the session's backend setting
        assert contents(reader) == {b"\0\0\0\1key": b"value"}
        reader.apply_batch([(b"\0\0\0\1key", b"other")])
        with pytest.raises(CheckpointError, match=f"written by the '{written_by}' backend.*backend={written_by}"):
            reader.commit()  # a query never continues it with another backend
        assert reader.file_manager.versions() == [1]
    finally:
        reader.close()


# ---- which attempt counts -----------------------------------------------------------------------

def test_a_batch_reexecuted_by_a_new_run_replaces_the_version_it_rewrites(new_store):
    """A crash after the stores committed v2 but before Spark recorded the batch: the restarted run
    re-executes it with other input; its v2 is the one that counts, also as the base of later
    versions, through retention and gc."""
    from sparkstate.checkpoint.gc import collect_garbage

    killed = new_store("run-1")
    killed.load(0)
    killed.apply_batch([kv(i) for i in range(50)])
    killed.commit()
    killed.load(1)
    killed.apply_batch([kv(i, b"killed") for i in range(50, 80)])
    killed.commit()
    killed.release()
    rerun = new_store("run-2", retain=2)
    rerun.load(1)
    rerun.apply_batch([kv(i, b"rerun") for i in range(60, 90)] + [(kv(0)[0], None)])
    assert rerun.commit().version == 2
    expected = {**dict(kv(i) for i in range(1, 50)), **dict(kv(i, b"rerun") for i in range(60, 90))}
    fresh = new_store("reader")
    fresh.load(2)
    assert contents(fresh) == expected
    for v in (3, 4, 5):  # later versions build on the replaced one (heap: deltas chained on it)
        rerun.load(v - 1)
        rerun.apply_batch([kv(1000 + v)])
        rerun.commit()
        expected[kv(1000 + v)[0]] = kv(1000 + v)[1]
    settle(rerun)
    rerun.maintenance_cleanup()
    collect_garbage(str(new_store.checkpoint_dir.parent), grace_s=0)
    for v in rerun.file_manager.versions():
        fresh.load(v)
        assert fresh.metrics().num_keys == len(contents(fresh))
    fresh.load(5)
    assert contents(fresh) == expected


def test_two_writers_of_one_version_never_mix_it(new_store):
    """Two instances committing the same version at the same time, many times over: the version is
    always exactly one writer's content, and loadable."""
    base = new_store("base")
    base.load(0)
    base.apply_batch([kv(i) for i in range(20)])
    base.commit()
    writers = [new_store(f"writer-{w}") for w in (0, 1)]
    for round_ in range(12):
        version = round_ + 1

        def commit(w: int) -> None:
            store = writers[w]
            store.load(version)
            store.apply_batch([kv(i, b"w%d-%d" % (w, round_)) for i in range(20)])
            store.commit()

        threads = [threading.Thread(target=commit, args=(w,)) for w in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        reader = new_store(f"reader-{round_}")
        reader.load(version + 1)
        got = contents(reader)
        assert got in ({kv(i, b"w0-%d" % round_)[0]: kv(i, b"w0-%d" % round_)[1] for i in range(20)},
                       {kv(i, b"w1-%d" % round_)[0]: kv(i, b"w1-%d" % round_)[1] for i in range(20)})
        reader.close()
        for w in writers:  # both continue from the durable version, as a new task would
            w.release()


def test_abort_after_writes_rewinds_without_reading_the_checkpoint(new_store):
    io = InstrumentedFileIO()
    s = new_store(fileio=io)
    s.load(0)
    s.apply_batch([kv(i) for i in range(300)])
    s.commit()
    s.load(1)
    s.apply_batch([kv(i, b"aborted") for i in range(100, 400)])
    s.abort()
    io.calls.clear()
    assert s.load(1).source == "memory"
    assert s.metrics().custom["sparkstateCheckpointLoads"] == 0
    assert io.calls["read_bytes"] == io.calls["download_file"] == 0, dict(io.calls)
    assert contents(s) == dict(kv(i) for i in range(300))
    s.apply_batch([kv(7, b"after")])
    assert s.commit().version == 2
    fresh = new_store("inst-2")
    fresh.load(2)
    assert contents(fresh) == {**dict(kv(i) for i in range(300)), **dict([kv(7, b"after")])}


def test_load_errors_name_the_versions_a_roll_back_can_go_to(new_store):
    """A damaged newest version: the error names the file and version, the older versions that load, and
    where to read the roll-back; a directory where a file belongs is named, not a raw OSError."""
    s = new_store()
    for v in range(4):
        s.load(v)
        s.apply_batch([kv(10 * v + i) for i in range(10)])
        s.commit()
    s.release()
    manifests = new_store.checkpoint_dir / "manifests"
    raw = (manifests / "4.manifest").read_bytes()
    (manifests / "4.manifest").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptCheckpointError) as e:
        new_store("cold").load(4)
    text = str(e.value)
    assert "4.manifest" in text and "truncated" in text
    assert "Older versions that look loadable: 3, 2, 1" in text
    assert "sparkstate verify --checkpoint" in text and "When the checkpoint is damaged" in text

    os.remove(manifests / "4.manifest")
    with pytest.raises(VersionNotFoundError, match="stateLocation.*loadable: 3, 2, 1"):
        new_store("cold-2").load(4)

    os.mkdir(manifests / "4.manifest")  # a directory where a manifest belongs
    with pytest.raises(LocalDiskError, match=r"4\.manifest.*directory sits where sparkstate expects a file"):
        new_store("cold-3").load(4)
    reader = new_store("cold-4")
    reader.load(3)
    assert len(contents(reader)) == 30


def test_load_empty_writes_a_whole_state_as_one_new_version(new_store):
    """Spark's loadEmpty (what migration between providers writes with): the new version holds exactly
    what was put after it, names no file of an earlier version, and reloads in a fresh instance."""
    s = new_store()
    for v in range(3):
        s.load(v)
        s.apply_batch([kv(10 * v + i) for i in range(10)])
        s.commit()
    s.load_empty(7)
    assert s.metrics().num_keys == 0 and contents(s) == {}
    s.apply_batch([kv(100 + i, b"m") for i in range(5)])
    assert s.commit().version == 8
    manifest = s.file_manager.read_manifest(8)
    assert manifest.num_keys == 5
    assert all(ref.remote.startswith("8-") for ref in manifest.shared_files), manifest.shared_files
    fresh = new_store("inst-2")
    fresh.load(8)
    assert contents(fresh) == dict(kv(100 + i, b"m") for i in range(5))
    fresh.load(3)  # the versions before it stay as they were
    assert len(contents(fresh)) == 30
    s.load(8)
    s.apply_batch([kv(200)])
    s.commit()
    fresh.load(9)
    assert len(contents(fresh)) == 6
