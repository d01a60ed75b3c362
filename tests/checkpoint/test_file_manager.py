import os
import threading

import pytest

from sparkstate.checkpoint import CheckpointFileManager, Manifest, PrivateFile
from sparkstate.errors import CorruptCheckpointError, VersionNotFoundError
from tests.storage.instrumented import InstrumentedFileIO


def commit(fm: CheckpointFileManager, tmp_path, version: int, new_files: dict[str, bytes], reuse=()) -> Manifest:
    local = tmp_path / f"local-{version}-{len(os.listdir(tmp_path))}"
    local.mkdir()
    for name, data in new_files.items():
        (local / name).write_bytes(data)
    attempt = f"{version:04x}{len(os.listdir(tmp_path)):04x}"
    up = fm.upload_new_files(version, attempt, str(local), sorted(new_files))
    m = Manifest(version=version, backend="rocksdb", num_keys=version, writer_instance_id="w", query_run_id="q",
                 created_ms=0, shared_files=tuple(reuse) + tuple(up.refs),
                 private_files=(PrivateFile("CURRENT", b"MANIFEST-1\n"),))
    fm.publish_manifest(m)
    return m


@pytest.fixture
def fm(tmp_path):
    return CheckpointFileManager("file:" + str(tmp_path / "ckpt"))


def test_versions_and_missing_manifest(fm, tmp_path):
    assert fm.latest_version() is None
    commit(fm, tmp_path, 1, {"a.sst": b"aaa"})
    commit(fm, tmp_path, 2, {"b.sst": b"bbb"})
    assert fm.versions() == [1, 2] and fm.latest_version() == 2
    with pytest.raises(VersionNotFoundError, match=r"version 5 .*manifests/5\.manifest"):
        fm.read_manifest(5)


def test_fetch_verifies_size_and_crc(fm, tmp_path):
    m = commit(fm, tmp_path, 1, {"a.sst": b"a" * 100})
    ref = m.shared_files[0]
    cache = str(tmp_path / "cache")
    assert open(fm.fetch_to_cache(ref, cache, 1), "rb").read() == b"a" * 100
    remote = str(tmp_path / "ckpt" / "sparkstate" / "files" / ref.remote)
    with open(remote, "r+b") as f:
        f.seek(50)
        f.write(b"b")
    cold = str(tmp_path / "cold-cache")
    with pytest.raises(CorruptCheckpointError, match=rf"{ref.remote}.*version 1"):
        fm.fetch_to_cache(ref, cold, 1)
    assert os.listdir(cold) == []  # nothing unverified stays in the cache
    os.remove(remote)
    with pytest.raises(CorruptCheckpointError, match="missing"):
        fm.fetch_to_cache(ref, cold, 1)


def test_recommit_replaces_the_version_and_the_same_bytes_are_a_no_op(fm, tmp_path):
    commit(fm, tmp_path, 1, {"a.sst": b"a"})
    first = commit(fm, tmp_path, 2, {"b.sst": b"b1"})
    second = commit(fm, tmp_path, 2, {"b.sst": b"b2"})  # the last attempt counts
    assert fm.read_manifest(2) == second != first
    fm.drop_cached([2])
    assert fm.read_manifest(2) == second
    raw = fm.fileio.read_bytes(fm.manifest_path(2))
    assert fm.publish_manifest(second) == second  # the same bytes again (a lost response, retried)
    assert fm.fileio.read_bytes(fm.manifest_path(2)) == raw
    assert {r.remote for r in first.shared_files} - {r.remote for r in second.shared_files} <= set(
        fm.fileio.list(fm.files_dir)), "a replaced manifest's files stay for readers that read it"
    assert sorted(fm.fileio.list(fm.manifests_dir)) == ["1.manifest", "2.manifest"]


def test_a_corrupt_manifest_is_replaced_by_the_next_commit(fm, tmp_path):
    commit(fm, tmp_path, 1, {"a.sst": b"a"})
    fm.fileio.write_bytes_atomic(fm.manifest_path(2), b"SPARKSTATE-MANIFEST v1 crc32=00000000 len=3\nxyz")
    fm.drop_cached([2])
    written = commit(fm, tmp_path, 2, {"b.sst": b"b"})
    fm.drop_cached([2])
    assert fm.read_manifest(2) == written


def test_cleanup_keeps_newest_and_deletes_unreferenced(fm, tmp_path):
    base = commit(fm, tmp_path, 1, {"base.sst": b"base"})
    ms = {1: base}
    for v in range(2, 7):
        ms[v] = commit(fm, tmp_path, v, {f"f{v}.sst": b"x%d" % v}, reuse=base.shared_files)
    # a superseded record of 6, as older sparkstate versions wrote on re-commit: retention still frees it
    legacy = commit(fm, tmp_path, 60, {"again.sst": b"again"}, reuse=base.shared_files)
    fm.fileio.write_bytes_atomic(fm.fileio.join(fm.manifests_dir, "6.superseded-0000abcd"),
                                 Manifest(**{**legacy.__dict__, "version": 6}).to_bytes())
    fm.fileio.delete_many([fm.manifest_path(60)])
    fm.drop_cached([60])
    result = fm.cleanup(3)
    assert result.versions_deleted == [1, 2, 3]
    assert fm.versions() == [4, 5, 6]
    files = set(fm.fileio.list(fm.files_dir))
    assert base.shared_files[0].remote in files  # still referenced by retained versions
    for v in (2, 3):
        assert ms[v].shared_files[-1].remote not in files
    for v in (4, 5, 6):
        for ref in fm.read_manifest(v).shared_files:
            assert ref.remote in files
    # the superseded content of 6 is released once 6 itself leaves the window
    commit(fm, tmp_path, 7, {}, reuse=base.shared_files)
    commit(fm, tmp_path, 8, {}, reuse=base.shared_files)
    commit(fm, tmp_path, 9, {}, reuse=base.shared_files)
    fm.cleanup(3)
    assert not any(n.startswith("6.") for n in fm.fileio.list(fm.manifests_dir))
    assert not any(r.startswith("6-") for r in fm.fileio.list(fm.files_dir))
    assert legacy.shared_files[-1].remote not in fm.fileio.list(fm.files_dir)
    assert fm.cleanup(3).versions_deleted == []


def test_cleanup_never_lists_files_dir(tmp_path):
    io = InstrumentedFileIO()
    fm = CheckpointFileManager(str(tmp_path / "ckpt"), io)
    for v in range(1, 5):
        commit(fm, tmp_path, v, {f"f{v}.sst": b"x"})
    io.fail("list", "*/files")
    fm.cleanup(2)
    assert fm.versions() == [3, 4]


def test_concurrent_cleaners_and_commits(tmp_path):
    loc = str(tmp_path / "ckpt")
    writer, other = CheckpointFileManager(loc), CheckpointFileManager(loc)
    base = commit(writer, tmp_path, 1, {"base.sst": b"base"})
    errors = []

    def clean():
        try:
            for _ in range(30):
                other.cleanup(2)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    t = threading.Thread(target=clean)
    t.start()
    for v in range(2, 30):
        commit(writer, tmp_path, v, {f"f{v}.sst": b"x%d" % v}, reuse=base.shared_files)
        writer.cleanup(2)
    t.join()
    assert not errors
    files = set(writer.fileio.list(writer.files_dir))
    for v in writer.versions():
        assert {r.remote for r in writer.read_manifest(v).shared_files} <= files
