"""S3 requests counted by phase and operation through botocore's hooks: a commit sends one PUT per file it
writes and no LIST, a multipart upload's parts count under the phase of the thread that started it, and
the request log holds one line per request."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from sparkstate.engine import Store
from sparkstate.storage import s3 as s3mod
from sparkstate.storage import s3_requests
from sparkstate.storage.s3 import S3FileIO, S3Options
from sparkstate.storage.s3_requests import COUNTS, counted_as, verb

from ..engine.conftest import kv, make_spec


@pytest.fixture(autouse=True)
def fresh_counts():
    COUNTS.reset()
    yield
    COUNTS.reset()


def _options(moto_s3) -> S3Options:
    return S3Options.from_conf(None, moto_s3.s3a_conf())


def _store(moto_s3, bucket, tmp_path, **settings) -> Store:
    spec = make_spec("file:/unused/ckpt/state/0/1", retain=100, **settings)
    spec = dataclasses.replace(spec, settings=dataclasses.replace(spec.settings, state_location=f"s3://{bucket}/q"),
                               hadoop_s3a=moto_s3.s3a_conf())
    return Store(spec, str(tmp_path / "local"))


@pytest.mark.parametrize("settings", [{"backend": "rocksdb"}, {"backend": "rocksdb", "rocksdb_flush_every": 3},
                                      {"backend": "rocksdb", "rocksdb_flush_every": 1}, {"backend": "heap"}],
                         ids=["rocksdb", "rocksdb-logged", "rocksdb-flush-every-commit", "heap"])
def test_a_commit_sends_one_put_per_file_it_writes_and_no_list(moto_s3, bucket, tmp_path, settings):
    store = _store(moto_s3, bucket, tmp_path, **settings)
    try:
        store.load(0)
        for v in range(1, 6):
            store.apply_batch([kv(i, b"v%d" % v) for i in range(v * 100, v * 100 + 500)])
            before = COUNTS.by_verb("commit")
            files = store.commit().metrics["sparkstateFilesUploaded"]
            after = COUNTS.by_verb("commit")
            sent = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
            assert files >= 1
            assert sent.get("PUT") == files + 1, (v, sent, files)  # its files and its manifest
            assert sent.get("LIST", 0) == 0 and sent.get("DELETE", 0) == 0, sent
            store.load(v)
        store.maintenance_cleanup()
    finally:
        store.close()
    counted = COUNTS.snapshot()
    assert counted.get(("maintenance", "ListObjectsV2"), 0) >= 1  # retention lists the manifests
    assert not [k for k in counted if k[0] == "commit" and verb(k[1]) == "LIST"]


def test_a_multipart_upload_counts_its_parts_as_puts_under_the_callers_phase(moto_s3, bucket, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setattr(s3mod, "MULTIPART_THRESHOLD", 5 << 20)
    monkeypatch.setattr(s3mod, "MULTIPART_CHUNK", 5 << 20)
    local = tmp_path / "big"
    local.write_bytes(os.urandom(11 << 20))
    io = S3FileIO(_options(moto_s3))
    with counted_as("commit"):
        io.upload_file(str(local), f"s3://{bucket}/big")
    counted = COUNTS.snapshot()
    assert counted == {("commit", "CreateMultipartUpload"): 1, ("commit", "UploadPart"): 3,
                       ("commit", "CompleteMultipartUpload"): 1}, counted
    assert COUNTS.by_verb("commit") == {"PUT": 5}
    with counted_as("load"):
        io.read_bytes(f"s3://{bucket}/big")
        io.size(f"s3://{bucket}/big")
    io.list(f"s3://{bucket}/")
    assert COUNTS.by_verb("load") == {"GET": 1, "HEAD": 1}
    assert COUNTS.by_verb(s3_requests.OTHER) == {"LIST": 1}


def test_the_request_log_has_a_line_per_request(moto_s3, bucket, tmp_path, monkeypatch):
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    monkeypatch.setenv(s3_requests.LOG_ENV, str(log_dir))
    io = S3FileIO(_options(moto_s3))
    with counted_as("commit"):
        io.write_bytes_atomic(f"s3://{bucket}/a", b"x")
        assert io.create_exclusive(f"s3://{bucket}/a", b"y") is False
    lines = [json.loads(line) for f in log_dir.iterdir() for line in f.read_text().splitlines()]
    assert [(r["phase"], r["op"], r["key"]) for r in lines] == [("commit", "PutObject", "a")] * 2
