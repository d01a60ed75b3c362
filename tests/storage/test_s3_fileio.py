"""S3FileIO against a real S3 protocol server (moto on 127.0.0.1): every verb, multipart, batching,
put-if-absent, error mapping, and that credentials never show up in reprs, errors or logs."""
from __future__ import annotations

import logging
import os
import pickle

import pytest

from sparkstate.config import PREFIX, Settings
from sparkstate.errors import StorageError
from sparkstate.storage import fileio_for
from sparkstate.storage import s3 as s3mod
from sparkstate.storage.s3 import S3FileIO, S3Options

from .s3_server import SECRET_KEY
from .stub_http import FixedAnswerServer


@pytest.fixture()
def io(moto_s3):
    return S3FileIO(moto_s3.options())


def test_scheme_selection():
    assert isinstance(fileio_for("s3://b/x"), S3FileIO)
    assert isinstance(fileio_for("s3a://b/x", S3Options(endpoint="http://127.0.0.1:1")), S3FileIO)


def test_verbs(io, bucket, tmp_path):
    root = f"s3a://{bucket}/ckpt/sparkstate"
    io.write_bytes_atomic(io.join(root, "manifests", "1.manifest"), b"one")
    assert io.read_bytes(f"{root}/manifests/1.manifest") == b"one"
    assert io.exists(f"{root}/manifests/1.manifest") and not io.exists(f"{root}/manifests/2.manifest")
    with pytest.raises(FileNotFoundError):
        io.read_bytes(f"{root}/manifests/2.manifest")
    with pytest.raises(FileNotFoundError):
        io.download_file(f"{root}/files/nope", str(tmp_path / "x"))
    src = tmp_path / "a.sst"
    src.write_bytes(os.urandom(1000))
    io.upload_file(str(src), f"{root}/files/1-ab-a.sst")
    io.download_file(f"{root}/files/1-ab-a.sst", str(tmp_path / "b"))
    assert (tmp_path / "b").read_bytes() == src.read_bytes()
    assert io.size(f"{root}/files/1-ab-a.sst") == 1000
    assert io.list(f"{root}/manifests") == ["1.manifest"]  # direct children only
    assert io.list(f"{root}") == []
    assert io.list(f"s3://{bucket}/nothing/here") == []
    infos = io.list_info(root, recursive=True)
    assert sorted(i.name for i in infos) == ["files/1-ab-a.sst", "manifests/1.manifest"]
    assert all(i.mtime > 0 for i in infos)
    io.delete_many([f"{root}/files/1-ab-a.sst", f"{root}/files/already-gone"])
    assert not io.exists(f"{root}/files/1-ab-a.sst")


def test_a_listing_answered_by_a_server_that_is_not_s3_is_an_error_not_an_empty_list():
    """A missing bucket lists as empty (NoSuchBucket), but a bare 404 means the endpoint is not S3 (or the
    addressing is wrong): saying "nothing there" would misreport a checkpoint as holding no state."""
    with FixedAnswerServer(404) as server:
        io = S3FileIO(S3Options(endpoint=server.endpoint, access_key="k", secret_key="s", path_style=True,
                                max_attempts=1))
        with pytest.raises(StorageError, match="answered 404.*is the endpoint an S3 service"):
            io.list_info("s3://state/demo", recursive=True)


def test_a_missing_bucket_lists_as_empty(io):
    assert io.list_info("s3://no-such-bucket-here/x", recursive=True) == []


def test_create_exclusive_is_put_if_absent(io, bucket):
    path = f"s3://{bucket}/m/3.manifest"
    assert io.create_exclusive(path, b"first") is True
    assert io.create_exclusive(path, b"second") is False
    assert io.read_bytes(path) == b"first"


def test_multipart_upload_of_a_large_file(io, bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(s3mod, "MULTIPART_THRESHOLD", 5 << 20)
    monkeypatch.setattr(s3mod, "MULTIPART_CHUNK", 5 << 20)
    big = tmp_path / "big.sst"
    big.write_bytes(os.urandom(11 << 20))
    io.upload_file(str(big), f"s3://{bucket}/big.sst")
    head = io.client.head_object(Bucket=bucket, Key="big.sst")
    assert head["ETag"].strip('"').endswith("-3")  # three parts
    io.download_file(f"s3://{bucket}/big.sst", str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == big.read_bytes()


def test_delete_many_batches_1000_keys(io, bucket, monkeypatch):
    paths = [f"s3://{bucket}/files/f{i:04d}" for i in range(2100)]
    client = io.client
    for p in paths[:30]:
        io.write_bytes_atomic(p, b"x")
    calls = []
    real = client.delete_objects

    def spy(**kw):
        calls.append(len(kw["Delete"]["Objects"]))
        return real(**kw)

    monkeypatch.setattr(client, "delete_objects", spy)
    io.delete_many(paths)
    assert calls == [1000, 1000, 100]
    assert io.list(f"s3://{bucket}/files") == []


def test_options_from_spark_and_hadoop_conf():
    s3a = {"fs.s3a.endpoint": "127.0.0.1:9000", "fs.s3a.connection.ssl.enabled": "false",
           "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK-secret", "fs.s3a.path.style.access": "true",
           "fs.s3a.endpoint.region": "eu-west-3"}
    o = S3Options.from_conf(Settings(), s3a)
    assert (o.endpoint, o.region, o.path_style, o.access_key, o.secret_key) == \
        ("http://127.0.0.1:9000", "eu-west-3", True, "AK", "SK-secret")
    mine = Settings.parse({PREFIX + "s3.endpoint": "http://h:1", PREFIX + "s3.region": "r",
                           PREFIX + "s3.pathStyleAccess": "false", PREFIX + "s3.maxAttempts": "3"})
    o = S3Options.from_conf(mine, s3a)
    assert (o.endpoint, o.region, o.path_style, o.max_attempts) == ("http://h:1", "r", False, 3)
    o = S3Options.from_conf(Settings(), {})
    assert (o.endpoint, o.access_key) == (None, None)  # boto3's standard chain


def test_secrets_never_in_repr_errors_or_logs(moto_s3, caplog, tmp_path):
    caplog.set_level(logging.DEBUG, logger="sparkstate")
    opts = moto_s3.options()
    io = S3FileIO(opts)
    for text in (repr(opts), str(opts), repr(io), repr(pickle.loads(pickle.dumps(io)))):
        assert SECRET_KEY not in text and moto_s3.access_key not in text
    # an unreachable endpoint: the error names the operation and the object, not the keys
    dead = S3FileIO(S3Options(endpoint="http://127.0.0.1:9", region="us-east-1", path_style=True,
                              access_key="AKIDLEAKCHECK", secret_key=SECRET_KEY, max_attempts=1,
                              connect_timeout_s=0.5))
    with pytest.raises(StorageError) as err:
        dead.write_bytes_atomic("s3://b/k/1.manifest", b"x")
    assert "s3://b/k/1.manifest" in str(err.value) and "PUT" in str(err.value)
    assert SECRET_KEY not in str(err.value) and "AKIDLEAKCHECK" not in str(err.value)
    assert SECRET_KEY not in caplog.text


def test_secrets_not_in_store_spec_repr():
    from sparkstate.engine import StoreSpec
    spec = StoreSpec.from_json({
        "checkpointLocation": "file:/tmp/c/state/0/1", "operatorId": 0, "partitionId": 1, "storeName": "default",
        "instanceId": "i", "queryRunId": "q", "keySchema": "{}", "valueSchema": "{}", "numColsPrefixKey": 0,
        "numPartitions": 2, "minVersionsToRetain": 2,
        "settings": {PREFIX + "stateLocation": "s3://b/p"},
        "hadoopS3a": {"fs.s3a.secret.key": SECRET_KEY, "fs.s3a.access.key": "AKIDLEAKCHECK"}})
    assert SECRET_KEY not in repr(spec) and SECRET_KEY not in spec.describe()
    assert spec.hadoop_s3a["fs.s3a.secret.key"] == SECRET_KEY


def test_a_download_onto_a_full_local_disk_names_the_local_disk(io, bucket, tmp_path, monkeypatch):
    """boto3 passes the local write's OSError through; it is the local disk's fault, not S3's."""
    import errno

    io.write_bytes_atomic(f"s3://{bucket}/f.sst", b"x" * 100)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.client, "download_file", full)
    with pytest.raises(StorageError) as err:
        io.download_file(f"s3://{bucket}/f.sst", str(tmp_path / "cache" / "f.sst"))
    text = str(err.value)
    assert f"cannot write the download of s3://{bucket}/f.sst to {tmp_path}/cache/f.sst" in text
    assert "No space left on device [errno 28]; the file system is full" in text and "after up to" not in text
