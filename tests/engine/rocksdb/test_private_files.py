"""The private files of a RocksDB SST set (MANIFEST-*, CURRENT, ...) as one shared file of the set
(engine/rocksdb/private_files.py): every version built on the set names it instead of embedding the files;
a restore unpacks it; a checkpoint whose manifests embed them (format v3) still opens and continues."""
from __future__ import annotations

import io
import json
import os
import tarfile
import zlib
from dataclasses import replace

import pytest

from sparkstate.checkpoint import CheckpointFileManager, Manifest, PrivateFile, SharedFileRef
from sparkstate.engine.rocksdb.private_files import PACK_NAME, unpack_private_files, pack_private_files
from sparkstate.errors import CorruptCheckpointError

from ..conftest import contents, maintain
from .conftest import commit_versions_from

FLUSH_EVERY = 4


def _fresh_contents(open_store, version: int) -> dict[bytes, bytes]:
    """Version `version` as a new instance of the store loads it from the checkpoint."""
    reader, _ = open_store(rocksdb_flush_every=FLUSH_EVERY)
    reader.load(version)
    return contents(reader)


def _pack(manifest: Manifest) -> SharedFileRef | None:
    packs = [ref for ref in manifest.shared_files if ref.local == PACK_NAME]
    assert len(packs) <= 1
    return packs[0] if packs else None


def _unpacked(fm: CheckpointFileManager, pack: SharedFileRef) -> tuple[PrivateFile, ...]:
    with tarfile.open(fileobj=io.BytesIO(fm.fileio.read_bytes(fm.file_path(pack.remote)))) as tar:
        return tuple(PrivateFile(m.name, tar.extractfile(m).read()) for m in tar.getmembers())


def test_versions_between_flushes_name_their_sets_pack_and_embed_nothing(open_store):
    store, _ = open_store(rocksdb_flush_every=FLUSH_EVERY)
    try:
        store.load(0)
        expected = commit_versions_from(store, 0, 3, {})  # 1 flushed, 2 and 3 logged
        fm = store.file_manager
        manifests = [fm.read_manifest(v) for v in (1, 2, 3)]
    finally:
        store.close()
    packs = {_pack(m) for m in manifests}
    assert len(packs) == 1 and None not in packs, packs
    assert all(m.private_files == () for m in manifests)
    # what naming the pack saves at every logged commit: the same manifest with the files embedded
    pack = packs.pop()
    raw = manifests[2].to_bytes()
    embedded = replace(manifests[2], shared_files=tuple(r for r in manifests[2].shared_files if r != pack),
                       private_files=_unpacked(fm, pack)).to_bytes()
    assert len(raw) < 0.75 * len(embedded), (len(raw), len(embedded))
    for v in (1, 2, 3):
        assert _fresh_contents(open_store, v) == expected[v], v


def test_an_sst_set_written_in_maintenance_has_its_own_pack(open_store):
    store, _ = open_store(rocksdb_flush_every=FLUSH_EVERY)
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        expected = commit_versions_from(store, 0, 3, live)
        maintain(store)  # two logs wait: half of FLUSH_EVERY
        expected.update(commit_versions_from(store, 3, 4, live))
        fm = store.file_manager
        first, fourth = _pack(fm.read_manifest(1)), _pack(fm.read_manifest(4))
    finally:
        store.close()
    assert first is not None and fourth is not None and first != fourth
    assert fourth.remote.startswith("3-")  # the SST set of version 3
    assert _fresh_contents(open_store, 4) == expected[4]


def test_a_pack_outlives_the_version_that_wrote_it_while_a_retained_version_names_it(open_store):
    store, _ = open_store(rocksdb_flush_every=FLUSH_EVERY, retain=2)
    try:
        store.load(0)
        expected = commit_versions_from(store, 0, 3, {})
        store.maintenance_cleanup()  # retains 2 and 3; 1 wrote the pack both name
        fm = store.file_manager
        assert fm.versions() == [2, 3]
        assert _pack(fm.read_manifest(3)).remote in {i.name for i in fm.fileio.list_info(fm.files_dir)}
    finally:
        store.close()
    assert _fresh_contents(open_store, 3) == expected[3]


def _rewrite_as_format_v3(fm: CheckpointFileManager, version: int) -> None:
    """Version `version`'s manifest as a format v3 writer wrote it: private files embedded, no pack."""
    m = fm.read_manifest(version)
    pack = _pack(m)
    assert pack is not None
    old = replace(m, shared_files=tuple(r for r in m.shared_files if r != pack), private_files=_unpacked(fm, pack))
    body = zlib.compress(json.dumps({**old._body(), "formatVersion": 3}, sort_keys=True,
                                    separators=(",", ":")).encode())
    raw = b"SPARKSTATE-MANIFEST v3 crc32=%08x len=%d\n" % (zlib.crc32(body), len(body)) + body
    fm.fileio.write_bytes_atomic(fm.manifest_path(version), raw)


def test_a_checkpoint_whose_manifests_embed_the_private_files_opens_and_continues(open_store):
    store, _ = open_store(rocksdb_flush_every=FLUSH_EVERY)
    try:
        store.load(0)
        live: dict[bytes, bytes] = {}
        expected = commit_versions_from(store, 0, 3, live)
    finally:
        store.close()
    fm = CheckpointFileManager(store.spec.checkpoint_location)
    packs = {_pack(fm.read_manifest(v)).remote for v in (1, 2, 3)}
    for v in (1, 2, 3):
        _rewrite_as_format_v3(fm, v)
    fm.fileio.delete_many(fm.file_path(r) for r in packs)  # nothing of the pack is left to read

    store, _ = open_store(rocksdb_flush_every=FLUSH_EVERY)
    try:
        store.load(3)
        assert contents(store) == expected[3]
        expected.update(commit_versions_from(store, 3, 5, live))  # 4 logged on the embedded files, 5 flushed
        fourth, fifth = fm.read_manifest(4), fm.read_manifest(5)
    finally:
        store.close()
    assert _pack(fourth) is None and {p.name for p in fourth.private_files} >= {"CURRENT"}
    assert _pack(fifth) is not None and fifth.private_files == ()
    for v in (4, 5):
        assert _fresh_contents(open_store, v) == expected[v], v


def test_a_pack_is_unpacked_into_the_database_directory(tmp_path):
    src, db = tmp_path / "src", tmp_path / "db"
    src.mkdir(), db.mkdir()
    (src / "CURRENT").write_bytes(b"MANIFEST-000005\n")
    (src / "000004.log").write_bytes(b"")
    unpack_private_files(str(src / pack_private_files(str(src), ["CURRENT", "000004.log"])), str(db), "files/x")
    assert sorted(os.listdir(db)) == ["000004.log", "CURRENT"]
    assert (db / "CURRENT").read_bytes() == b"MANIFEST-000005\n"


def _tar_gz(members: list[tarfile.TarInfo]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(b"x" * m.size) if m.isfile() else None)
    return out.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, 1 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize("raw", [
    b"not a gzip file",
    _tar_gz([_member("../CURRENT")]),
    _tar_gz([_member("sub/CURRENT")]),
    _tar_gz([_member("CURRENT", tarfile.SYMTYPE)]),
], ids=["not-gzip", "parent-path", "sub-path", "symlink"])
def test_a_pack_that_is_not_plain_database_files_is_refused_naming_it(tmp_path, raw):
    path, db = tmp_path / "pack", tmp_path / "db"
    db.mkdir()
    path.write_bytes(raw)
    with pytest.raises(CorruptCheckpointError, match="files/3-abc-private-files.tar.gz"):
        unpack_private_files(str(path), str(db), "files/3-abc-private-files.tar.gz")
    assert not (tmp_path / "CURRENT").exists() and os.listdir(db) == []


def test_a_store_that_flushes_at_every_commit_embeds_its_private_files(open_store):
    store, _ = open_store(rocksdb_flush_every=1)
    store.load(0)
    commit_versions_from(store, 0, 2, {})
    manifests = [store.file_manager.read_manifest(v) for v in (1, 2)]
    assert all(_pack(m) is None and {p.name for p in m.private_files} >= {"CURRENT"} for m in manifests)
