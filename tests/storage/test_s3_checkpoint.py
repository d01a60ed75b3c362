"""The checkpoint layer and the store on S3: commits, restores, retention, orphan gc, concurrent
writers, and storage faults (server stopped mid-commit, corrupted/missing objects, throttling)."""
from __future__ import annotations

import dataclasses
import time
import uuid

import pytest

from sparkstate.checkpoint.gc import collect_garbage
from sparkstate.checkpoint.location import query_key, state_root
from sparkstate.cli import main as cli_main
from sparkstate.engine import Store
from sparkstate.errors import CorruptCheckpointError, StorageError
from sparkstate.keygroups import storage_key
from sparkstate.storage.s3 import S3FileIO

from ..engine.conftest import contents, make_spec
from .flaky_proxy import FlakyProxy


def kv(i: int, tag: bytes = b"v") -> tuple[bytes, bytes]:
    return storage_key(i % 7, b"key-%06d" % i), tag + b"-%d" % i


class CountingS3(S3FileIO):
    """S3FileIO that records the verbs and paths it was asked for (the fault-injection seam)."""

    def __init__(self, options, hook=None):
        super().__init__(options)
        self.calls: list[tuple[str, str]] = []
        self.hook = hook

    def _note(self, verb, path):
        self.calls.append((verb, path))
        if self.hook:
            self.hook(verb, path)

    def upload_file(self, local_path, path):
        self._note("upload", path)
        return super().upload_file(local_path, path)

    def create_exclusive(self, path, data):
        self._note("create_exclusive", path)
        return super().create_exclusive(path, data)

    def list(self, prefix_dir):
        self._note("list", prefix_dir)
        return super().list(prefix_dir)

    def delete_many(self, paths):
        paths = list(paths)
        for p in paths:
            self._note("delete", p)
        return super().delete_many(paths)


@pytest.fixture()
def s3_store(moto_s3, bucket, tmp_path):
    made = []

    def make(instance="inst-1", retain=100, io=None, server=None, location=None, **settings):
        server = server or moto_s3
        loc = location or f"s3://{bucket}/q1"
        spec = dataclasses.replace(make_spec("file:/unused/ckpt/state/0/1", instance, retain, **settings))
        spec = dataclasses.replace(spec, settings=dataclasses.replace(spec.settings, state_location=loc),
                                   hadoop_s3a=server.s3a_conf())
        s = Store(spec, str(tmp_path / f"local-{instance}"), fileio=io)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_store_on_s3_commit_restore_and_incremental_upload(s3_store, bucket):
    s = s3_store()
    assert s.file_manager.root == f"s3://{bucket}/q1/{query_key('/unused/ckpt')}/0/1/sparkstate"
    s.load(0)
    s.apply_batch([kv(i) for i in range(2000)])
    first = s.commit().metrics
    for v in range(1, 4):
        s.load(v)
        s.apply_batch([kv(i, b"u%d" % v) for i in range(v * 10)])
        m = s.commit().metrics
        assert m["sparkstateBytesUploaded"] < first["sparkstateBytesUploaded"] / 4  # only the new SST
    fresh = s3_store("inst-2")
    fresh.load(4)
    expected = dict(kv(i) for i in range(2000))
    expected.update(kv(i, b"u3") for i in range(30))
    assert contents(fresh) == expected


def test_retention_deletes_from_manifests_in_batches_without_listing_files(s3_store, moto_s3):
    io = CountingS3(moto_s3.options())
    s = s3_store(retain=2, io=io)
    s.load(0)
    for v in range(6):
        s.apply_batch([kv(i, b"r%d" % v) for i in range(v * 50, v * 50 + 50)])
        s.commit()
        s.load(v + 1)
    io.calls.clear()
    s.maintenance_cleanup()
    listed = [p for verb, p in io.calls if verb == "list"]
    assert listed and all(p.endswith("/manifests") for p in listed)
    deleted = [p for verb, p in io.calls if verb == "delete"]
    assert any(p.endswith("1.manifest") for p in deleted)
    assert s.file_manager.versions() == [5, 6]
    fresh = s3_store("inst-2")
    fresh.load(5)
    assert len(contents(fresh)) == 250


def test_concurrent_writers_one_version_one_content(s3_store):
    a, b = s3_store("a"), s3_store("b")
    a.load(0)
    a.apply_batch([kv(1)])
    a.commit()
    a.load(1)
    b.load(1)
    a.apply_batch([kv(2, b"a")])
    b.apply_batch([kv(2, b"b")])
    assert a.commit().version == 2
    assert b.commit().version == 2  # replaces a's version: the last attempt counts
    fresh = s3_store("c")
    fresh.load(2)
    assert contents(fresh) == dict([kv(1), kv(2, b"b")])
    fresh.load(2)
    b.load(2)
    assert contents(b) == contents(fresh)


def test_corrupted_or_missing_object_fails_naming_object_and_version(s3_store, moto_s3, bucket):
    s = s3_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(300)])
    s.commit()
    ref = s.file_manager.read_manifest(1).shared_files[0]
    store_key = f"q1/{query_key('/unused/ckpt')}/0/1/sparkstate"
    key = f"{store_key}/files/{ref.remote}"
    client = moto_s3.client()
    good = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    client.put_object(Bucket=bucket, Key=key, Body=good[:-10] + b"X" * 10)
    with pytest.raises(CorruptCheckpointError, match=rf"{ref.remote}.*version 1.*corrupt"):
        s3_store("cold-1").load(1)
    client.delete_object(Bucket=bucket, Key=key)
    with pytest.raises(CorruptCheckpointError, match=rf"{ref.remote}.*version 1.*missing"):
        s3_store("cold-2").load(1)
    client.put_object(Bucket=bucket, Key=f"{store_key}/manifests/1.manifest", Body=b"garbage")
    with pytest.raises(CorruptCheckpointError, match=r"manifests/1\.manifest"):
        s3_store("cold-3").load(1)


def test_throttling_and_slow_responses_are_retried(s3_store, moto_s3, bucket):
    for mode in ("slowdown", "delay"):
        proxy = FlakyProxy(moto_s3.endpoint, every=3, mode=mode, delay_s=1.2,
                           max_faults=6 if mode == "slowdown" else 3, window_s=30)
        try:
            server = type("ViaProxy", (), {
                "s3a_conf": lambda self: {**moto_s3.s3a_conf(), "fs.s3a.endpoint": proxy.endpoint}})()
            s = s3_store(f"t-{mode}", server=server, location=f"s3://{bucket}/{mode}",
                         s3_read_timeout_ms=1000, s3_max_attempts=8)
            s.load(0)
            t0 = time.monotonic()
            for v in range(3):
                s.apply_batch([kv(i, b"%d" % v) for i in range(v * 100, v * 100 + 100)])
                assert s.commit().version == v + 1
                s.load(v + 1)
            assert proxy.faults > 0 and time.monotonic() - t0 < 60
            assert len(contents(s)) == 300
        finally:
            proxy.close()


def test_gc_removes_orphans_of_crashed_commits_only(s3_store, moto_s3, bucket, capsys):
    s = s3_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(100)])
    s.commit()
    s.load(1)
    fm = s.file_manager
    # a crashed attempt of version 2: files uploaded, manifest never written
    client = moto_s3.client()
    client.put_object(Bucket=bucket, Key=f"q1/{query_key('/unused/ckpt')}/0/1/sparkstate/files/2-deadbeef-000009.sst", Body=b"orphan")
    time.sleep(1.1)  # S3 modification times have 1 s resolution; gc wants files strictly older
    s.apply_batch([kv(i, b"x") for i in range(10)])
    s.commit()  # version 2, manifest newer than the orphan
    root = state_root("/unused/ckpt", f"s3://{bucket}/q1")
    io = S3FileIO(moto_s3.options())
    young = collect_garbage(root, io, dry_run=True, grace_s=3600)
    assert young.orphans == 0 and young.stores[0].young_unreferenced == 1
    dry = collect_garbage(root, io, dry_run=True, grace_s=0)
    assert dry.stores[0].orphans == ["2-deadbeef-000009.sst"]
    assert "2-deadbeef-000009.sst" in fm.fileio.list(fm.files_dir)
    conf = [f"--conf=spark.hadoop.{k}={v}" for k, v in moto_s3.s3a_conf().items()]
    assert cli_main(["gc", "--checkpoint", "/unused/ckpt", "--state-location", f"s3://{bucket}/q1",
                     "--grace-seconds", "0", *conf]) == 0
    out = capsys.readouterr().out
    assert "deleted 1 orphans" in out and moto_s3.secret_key not in out
    assert "2-deadbeef-000009.sst" not in fm.fileio.list(fm.files_dir)
    fresh = s3_store("inst-2")
    for v in (1, 2):
        fresh.load(v)
        assert len(contents(fresh)) == 100


def test_server_stopped_mid_commit_then_restarted(seaweed, tmp_path):
    bucket = f"w-{uuid.uuid4().hex[:8]}"
    seaweed.create_bucket(bucket)
    uploads = []

    def stop_after_first_upload(verb, path):
        if verb == "upload" and "/files/2-" in path:
            uploads.append(path)
            if len(uploads) == 2:
                seaweed.stop(kill=True)

    opts = seaweed.options(max_attempts=2, connect_timeout_s=1.0, read_timeout_s=5.0)
    spec = make_spec("file:/unused", "w1", 100, io_threads=1, rocksdb_flush_every=1)  # version 2 uploads SSTs
    spec = dataclasses.replace(spec, settings=dataclasses.replace(spec.settings, state_location=f"s3://{bucket}/q"))
    s = Store(spec, str(tmp_path / "l1"), fileio=CountingS3(opts, stop_after_first_upload))
    try:
        s.load(0)
        s.apply_batch([kv(i) for i in range(500)])
        s.commit()
        s.load(1)
        # Several SSTs in version 2: one per flush, and no compaction that could merge them before the commit
        # (with version 1's file they reach RocksDB's level-0 trigger).
        s._live()._db.set_options({"disable_auto_compactions": "true"})
        for part in range(3):
            s.apply_batch([kv(i, b"p%d" % part) for i in range(1000 + part * 300, 1300 + part * 300)])
            s._live()._db.flush(wait=True)
        t0 = time.monotonic()
        with pytest.raises(StorageError, match=r"S3 upload of s3://.*/files/2-.*failed"):
            s.commit()
        assert time.monotonic() - t0 < 30
        assert len(uploads) == 2  # the server died between two uploads of the same commit
    finally:
        s.close()
    seaweed.start()
    r = Store(spec, str(tmp_path / "l2"), fileio=S3FileIO(opts))
    try:
        assert r.file_manager.versions() == [1]  # nothing half-written is visible
        r.load(1)
        assert contents(r) == dict(kv(i) for i in range(500))
        r.apply_batch([kv(7, b"again")])
        assert r.commit().version == 2
    finally:
        r.close()


def test_verify_reads_a_checkpoint_on_s3(s3_store, moto_s3, bucket, capsys):
    s = s3_store()
    for v in range(2):
        s.load(v)
        s.apply_batch([kv(10 * v + i) for i in range(10)])
        s.commit()
    conf = [f"--conf=spark.hadoop.{k}={v}" for k, v in moto_s3.s3a_conf().items()]
    args = ["verify", "--checkpoint", "/unused/ckpt", "--state-location", f"s3://{bucket}/q1", *conf]
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "OK; loadable versions: 1-2" in out and moto_s3.secret_key not in out
    newest = s.file_manager.read_manifest(2).shared_files[-1].remote
    key = f"q1/{query_key('/unused/ckpt')}/0/1/sparkstate/files/{newest}"
    moto_s3.client().delete_object(Bucket=bucket, Key=key)
    assert cli_main(args) == 1
    out = capsys.readouterr().out
    assert f"{newest} listed by version 2 is missing" in out and "loadable versions: 1" in out
