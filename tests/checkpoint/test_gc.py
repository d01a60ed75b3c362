"""`sparkstate gc` and retention never delete what a version that can still be committed will name; stray
manifests and partitions a rescale left behind are collected."""
from __future__ import annotations

import dataclasses
import os
import time

import pytest

from sparkstate.checkpoint import Manifest
from sparkstate.checkpoint.gc import collect_garbage
from sparkstate.checkpoint.spark_logs import SparkLogs
from sparkstate.engine import Store
from sparkstate.engine.heap.snapshot import HeapFullSnapshot
from sparkstate.storage import fileio_for

from ..engine.conftest import contents, kv, make_spec, settle

HOURS_LATER = 7200.0


def _store(root: str, instance: str, partition: int = 1, retain: int = 2, **settings) -> Store:
    spec = dataclasses.replace(make_spec(f"file:{root}/state/0/{partition}", instance, retain, **settings),
                               partition_id=partition)
    return Store(spec, f"{root}/../local")


def _commit_next(store: Store, version: int, rows) -> None:
    store.load(version)
    store.apply_batch(rows)
    assert store.commit().version == version + 1


def _write_spark_logs(root: str, batch: int, partitions: int) -> SparkLogs:
    """Offset and commit log entries saying batch `batch` ran with `partitions` state partitions."""
    for log in ("offsets", "commits"):
        os.makedirs(f"{root}/{log}", exist_ok=True)
    with open(f"{root}/offsets/{batch}", "w") as f:
        f.write('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{"spark.sql.shuffle.partitions":"%d"}}\n'
                % partitions)
    with open(f"{root}/commits/{batch}", "w") as f:
        f.write('v1\n{"nextBatchWatermarkMs":0}')
    return SparkLogs(fileio_for(root), root)


def test_gc_racing_a_background_heap_snapshot_keeps_what_the_next_commit_names(tmp_path, monkeypatch):
    """The full snapshot of v2 finishes while v4 commits (too late for v4 to use it); the stream then idles
    past gc's grace period and gc runs; v5 adopts the snapshot. Every retained version must load."""
    release = __import__("threading").Event()
    real_upload = HeapFullSnapshot.upload_snapshot

    def held_upload(self, res):
        assert release.wait(60)
        return real_upload(self, res)

    monkeypatch.setattr(HeapFullSnapshot, "upload_snapshot", held_upload)
    root = str(tmp_path / "q")
    store = _store(root, "writer", backend="heap", heap_snapshot_every=2)
    expected: dict[bytes, bytes] = {}
    fm = store.file_manager
    real_publish = fm.publish_manifest

    def publish(manifest: Manifest) -> Manifest:
        if manifest.version == 4:  # the snapshot of v2 becomes durable just before manifest 4
            release.set()
            assert store._backend.wait_for_background(60)
        return real_publish(manifest)

    monkeypatch.setattr(fm, "publish_manifest", publish)
    for v in range(4):  # commits v1..v4; the full snapshot of v2 starts after commit 2
        rows = [kv(10 * v + i, b"v%d" % v) for i in range(10)]
        _commit_next(store, v, rows)
        expected.update(rows)
        store.maintenance_snapshot()
        store.maintenance_cleanup()
    full = [n for n in fm.fileio.list(fm.files_dir) if n.endswith("full-2.arrow")]
    assert len(full) == 1, "the background snapshot of v2 is durable"
    assert all(full[0] not in fm.read_manifest(v).remote_names() for v in fm.versions()), "and listed by none"
    manifest_4 = os.stat(fm.fileio.local_path(fm.manifest_path(4))).st_mtime
    os.utime(fm.fileio.local_path(fm.file_path(full[0])), (manifest_4 - 1, manifest_4 - 1))  # before manifest 4

    report = collect_garbage(f"{root}/state", now=time.time() + HOURS_LATER)  # idle for two hours
    assert report.orphans == 0 and report.stores[0].adoptable == 1, report

    rows = [kv(100 + i, b"v5") for i in range(10)]
    _commit_next(store, 4, rows)
    expected.update(rows)
    assert full[0] in fm.read_manifest(5).remote_names(), "v5 is based on the background snapshot"
    store.maintenance_cleanup()
    collect_garbage(f"{root}/state", now=time.time() + HOURS_LATER)
    settle(store)
    store.close()

    reader = _store(root, "reader", backend="heap")
    try:
        for v in reader.file_manager.versions():
            reader.load(v)
            assert len(contents(reader)) == reader.file_manager.read_manifest(v).num_keys
        assert contents(reader) == expected
    finally:
        reader.close()


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_a_stray_far_future_manifest_does_not_stop_retention_and_gc_collects_it(tmp_path, backend):
    root = str(tmp_path / "q")
    store = _store(root, "writer", backend=backend)
    fm = store.file_manager
    for v in range(3):
        _commit_next(store, v, [kv(10 * v + i) for i in range(10)])
    stray = dataclasses.replace(fm.read_manifest(3), version=1000)
    with open(fm.fileio.local_path(fm.manifest_path(1000)), "wb") as f:
        f.write(stray.to_bytes())
    with open(fm.fileio.local_path(fm.manifest_path(2000)), "wb") as f:
        f.write(b"not a manifest")
    for v in range(3, 9):
        _commit_next(store, v, [kv(10 * v + i) for i in range(10)])
        store.maintenance_cleanup()
    assert fm.versions() == [8, 9, 1000, 2000], "the newest two versions up to the head, and the strays"
    # The query's commit log says batch 8 was the last: versions beyond 10 cannot be the query's.
    logs = _write_spark_logs(root, 8, 4)
    young = collect_garbage(f"{root}/state", spark_logs=logs)
    assert young.stores[0].stray_manifests == [], "strays younger than the grace period are kept"
    report = collect_garbage(f"{root}/state", now=time.time() + HOURS_LATER, spark_logs=logs)
    assert report.stores[0].stray_manifests == [1000, 2000], report
    assert fm.versions() == [8, 9]
    store.close()
    reader = _store(root, "reader", backend=backend)
    for v in (8, 9):
        reader.load(v)
        assert len(contents(reader)) == 10 * v
    reader.close()


def test_gc_deletes_the_partitions_a_rescale_left_once_no_retained_batch_needs_them(tmp_path):
    root = str(tmp_path / "q")
    stores = {p: _store(root, f"w{p}", partition=p) for p in range(4)}
    for p, s in stores.items():
        for v in range(2):
            _commit_next(s, v, [kv(100 * p + 10 * v + i) for i in range(5)])
    for p in (2, 3):
        stores.pop(p).close()
    logs = _write_spark_logs(root, 2, 2)  # rescaled to two partitions at batch 2
    for p, s in stores.items():
        _commit_next(s, 2, [kv(100 * p + 20 + i) for i in range(5)])
        s.maintenance_cleanup()  # retains v2, v3: v2 is as old as partitions 2 and 3's newest version

    kept = collect_garbage(f"{root}/state", now=time.time() + HOURS_LATER, spark_logs=logs)
    assert [s.abandoned for s in kept.stores] == [False] * 4
    assert sum("kept while those versions are retained" in (s.skipped or "") for s in kept.stores) == 2, kept
    for p, s in stores.items():
        _commit_next(s, 3, [kv(100 * p + 30 + i) for i in range(5)])
        s.maintenance_cleanup()  # retains v3, v4: no retained batch ran with four partitions
    dry = collect_garbage(f"{root}/state", dry_run=True, spark_logs=logs)
    assert [s.abandoned for s in dry.stores] == [False, False, True, True]
    assert os.path.isdir(f"{root}/state/0/3/sparkstate")
    report = collect_garbage(f"{root}/state", spark_logs=logs)
    assert sum(s.abandoned for s in report.stores) == 2 and report.deleted
    assert sorted(os.listdir(f"{root}/state/0")) == ["0", "1"]
    for s in stores.values():
        s.close()
    reader = _store(root, "reader", partition=1)
    reader.load(4)
    assert len(contents(reader)) == 20
    reader.close()
