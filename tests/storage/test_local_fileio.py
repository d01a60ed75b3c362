import errno
import os

import pytest

from sparkstate.errors import ConfigError
from sparkstate.storage import LocalFileIO, fileio_for
from sparkstate.storage.local import local_path


def test_scheme_selection():
    assert isinstance(fileio_for("/tmp/x"), LocalFileIO)
    assert isinstance(fileio_for("file:/tmp/ckpt/state/0/1"), LocalFileIO)
    assert isinstance(fileio_for("file:///tmp/x"), LocalFileIO)
    with pytest.raises(ConfigError, match="gs"):
        fileio_for("gs://bucket/ckpt")


@pytest.mark.parametrize("uri,path", [("file:/tmp/a b/c", "/tmp/a b/c"), ("file:///tmp/a", "/tmp/a"),
                                      ("file://localhost/tmp/a", "/tmp/a"), ("/tmp/a", "/tmp/a"),
                                      ("rel/dir", "rel/dir")])
def test_local_path(uri, path):
    assert local_path(uri) == path


def test_verbs_with_file_uri(tmp_path):
    io = LocalFileIO()
    base = "file:" + str(tmp_path)
    target = io.join(base, "d", "x.bin")
    assert not io.exists(target)
    io.write_bytes_atomic(target, b"hello")
    assert io.read_bytes(target) == b"hello" and io.size(target) == 5
    io.write_bytes_atomic(target, b"replaced")
    assert io.read_bytes(target) == b"replaced"
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    io.upload_file(str(src), io.join(base, "d", "up.bin"))
    io.download_file(io.join(base, "d", "up.bin"), str(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == b"payload"
    assert sorted(io.list(io.join(base, "d"))) == ["up.bin", "x.bin"]  # no temp files left behind
    assert io.list(io.join(base, "missing")) == []
    io.delete_many([target, io.join(base, "d", "nope")])
    assert io.list(io.join(base, "d")) == ["up.bin"]
    with pytest.raises(FileNotFoundError):
        io.read_bytes(target)
    with pytest.raises(FileNotFoundError):
        io.size(target)


def test_failed_upload_leaves_no_partial_target(tmp_path, monkeypatch):
    io = LocalFileIO()
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 1000)
    real_fsync = os.fsync

    def boom(fd):
        raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        io.upload_file(str(src), str(tmp_path / "out" / "dst.bin"))
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert os.listdir(tmp_path / "out") == []


def test_upload_on_the_same_file_system_is_a_hard_link(tmp_path):
    io = LocalFileIO()
    src = tmp_path / "000012.sst"
    src.write_bytes(b"immutable" * 100)
    io.upload_file(str(src), str(tmp_path / "ckpt" / "files" / "1-abc-000012.sst"))
    dst = tmp_path / "ckpt" / "files" / "1-abc-000012.sst"
    assert dst.read_bytes() == src.read_bytes()
    assert os.stat(dst).st_ino == os.stat(src).st_ino  # no bytes moved
    src.unlink()  # the local file going away (a compaction) leaves the checkpoint's intact
    assert dst.read_bytes() == b"immutable" * 100
    assert os.listdir(tmp_path / "ckpt" / "files") == ["1-abc-000012.sst"]


@pytest.mark.parametrize("errno_", [errno.EXDEV, errno.EPERM])
def test_upload_copies_where_it_cannot_link(tmp_path, monkeypatch, errno_):
    io = LocalFileIO()
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload" * 100)

    def cannot_link(a, b, **kw):
        raise OSError(errno_, os.strerror(errno_))
    monkeypatch.setattr(os, "link", cannot_link)
    io.upload_file(str(src), str(tmp_path / "out" / "dst.bin"))
    dst = tmp_path / "out" / "dst.bin"
    assert dst.read_bytes() == src.read_bytes() and os.stat(dst).st_ino != os.stat(src).st_ino
    assert os.listdir(tmp_path / "out") == ["dst.bin"]
