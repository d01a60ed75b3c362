"""A full local disk under the live RocksDB database: the commit fails with an error that names the
database, the setting that places it and what to do; nothing committed is lost, and the store commits
again once there is room.

The full disk is real to RocksDB: the next file numbers of the database are links to /dev/full, whose
every write fails with ENOSPC, so the flush of the commit hits it as it would on a full file system."""
from __future__ import annotations

import os
import re

import pytest

from sparkstate.engine import Store
from sparkstate.errors import LocalDiskError, rocksdb_disk_error

from ..conftest import commit_keys, contents, kv, make_spec

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


def _fill_next_files(db_dir: str, count: int = 40) -> list[str]:
    """Make the database's next `count` file numbers links to /dev/full; returns the links."""
    numbers = [int(m.group(1)) for m in map(re.compile(r"(\d+)\.(sst|log)$").match, os.listdir(db_dir)) if m]
    manifest = [int(n.split("-")[1]) for n in os.listdir(db_dir) if n.startswith("MANIFEST-")]
    start = max(numbers + manifest) + 1
    links = []
    for n in range(start, start + count):
        link = os.path.join(db_dir, f"{n:06d}.sst")
        os.symlink("/dev/full", link)
        links.append(link)
    return links


def test_a_full_disk_fails_the_commit_with_what_to_fix_and_keeps_the_committed_versions(tmp_path):
    spec = make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "0"), backend="rocksdb",
                     rocksdb_flush_every=1)  # every commit flushes, into the full disk
    store = Store(spec, str(tmp_path / "local"))
    try:
        store.load(0)
        store.apply_batch([kv(i) for i in range(100)])
        store.commit()
        store.load(1)
        store.apply_batch([kv(i, b"two") for i in range(50, 150)])
        links = _fill_next_files(store._live().db_dir)
        with pytest.raises(LocalDiskError) as err:
            store.commit()
        text = str(err.value)
        assert "cannot flush the store's RocksDB database in" in text and "localDir" in text
        assert "No space left on device [errno 28]" in text and "the file system is full" in text
        assert "committed versions are intact" in text and "RocksDB said: IO error" in text

        for link in links:  # room again
            if os.path.lexists(link):
                os.remove(link)
        store.abort()
        store.load(1)
        assert contents(store) == dict(kv(i) for i in range(100))
        store.apply_batch([kv(i, b"two") for i in range(50, 150)])
        assert store.commit().version == 2
    finally:
        store.close()
    fresh = Store(spec, str(tmp_path / "local-2"))
    try:
        fresh.load(2)
        assert contents(fresh) == {**dict(kv(i) for i in range(50)), **dict(kv(i, b"two") for i in range(50, 150))}
    finally:
        fresh.close()


def test_only_errors_a_user_can_fix_are_renamed():
    other = Exception("Corruption: block checksum mismatch")
    assert rocksdb_disk_error(other, "db", "flush") is other
    ro = rocksdb_disk_error(Exception("IO error: While open a file for appending: /x/1.sst: Read-only file system"),
                            "the database in /x", "open")
    assert isinstance(ro, LocalDiskError) and "cannot open the database in /x: Read-only file system" in str(ro)


def test_a_full_disk_while_restoring_names_the_database_directory(tmp_path, monkeypatch):
    """A write that fails with ENOSPC while a restore writes the database's own files (the error a full
    disk gives on write, which names no file) fails the load naming the directory, and leaves no
    half-written directory behind."""
    import builtins

    from sparkstate.engine.rocksdb import private_files

    spec = make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "0"), backend="rocksdb")
    commit_keys(spec, str(tmp_path / "local"), 100)

    def full_disk_open(path, mode="r", *args, **kwargs):
        if "w" in mode and os.path.basename(os.path.dirname(path)).startswith("db-"):
            raise OSError(28, os.strerror(28))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(private_files, "open", full_disk_open, raising=False)  # unpacking the private files
    fresh = Store(spec, str(tmp_path / "local-2"))
    try:
        with pytest.raises(LocalDiskError) as err:
            fresh.load(1)
        text = str(err.value)
        assert "cannot write the restored database into" in text and str(tmp_path / "local-2") in text
        assert "No space left on device [errno 28]" in text and "committed versions are intact" in text
        assert not [d for d in os.listdir(tmp_path / "local-2" / "inst-1") if d.startswith("db-")]
        monkeypatch.undo()
        fresh.load(1)
        assert contents(fresh) == dict(kv(i) for i in range(100))
    finally:
        fresh.close()
