"""Commits between flushes (`rocksdb.flushEveryVersions`): such a version is the last flushed SST set plus
the change logs since, which every reader of the version (a restore, a rewind, snapshot replay, the change
feed) replays. Each test checks the contents against what was written, loaded by a fresh instance."""
from __future__ import annotations

import pytest

from sparkstate.engine import Store
from sparkstate.engine.journal import DeltaJournal
from sparkstate.engine.rocksdb import backend as rocksdb_backend
from sparkstate.engine.rocksdb.snapshot import CommittedFiles
from sparkstate.errors import CorruptCheckpointError

from ..conftest import contents, kv, maintain, make_spec, settle
from .conftest import commit_versions_from

FLUSH_EVERY = 3


def _store(tmp_path, instance: str = "inst-1", **settings) -> Store:
    spec = make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "1"), instance,
                     **{"backend": "rocksdb", "rocksdb_flush_every": FLUSH_EVERY, **settings})
    return Store(spec, str(tmp_path / "local" / instance))


def _commit_versions(store: Store, versions: int, rows_per_version: int = 50) -> dict[int, dict[bytes, bytes]]:
    """Versions 1..`versions`, each overwriting some keys, adding new ones and removing one; returns the
    expected contents of each version."""
    store.load(0)
    return {0: {}, **commit_versions_from(store, 0, versions, {}, rows_per_version)}


def _fresh_contents(tmp_path, version: int, **settings) -> dict[bytes, bytes]:
    """Version `version` as a new instance of the store loads it from the checkpoint."""
    reader = _store(tmp_path, f"reader-{version}", **settings)
    try:
        reader.load(version)
        return contents(reader)
    finally:
        reader.close()


def test_versions_between_flushes_upload_their_change_log_only(tmp_path):
    store = _store(tmp_path)
    try:
        store.load(0)
        metrics = []
        for v in range(1, 8):
            store.apply_batch([kv(i, b"v%d" % v) for i in range(3000 if v == 1 else 50)])
            metrics.append(store.commit().metrics)
            store.load(v)
        fm = store.file_manager
        for v in range(1, 8):
            files = CommittedFiles.of(fm.read_manifest(v))
            # the first commit flushes (no SST files yet), then every third: 1, 4 and 7
            flushed = v % FLUSH_EVERY == 1
            last_flush = v - (v - 1) % FLUSH_EVERY
            assert [lv for lv, _ in files.logs] == list(range(last_flush + 1, v + 1)), v
            assert files.ssts
            assert (metrics[v - 1]["sparkstateFilesUploaded"] == 1) == (not flushed), (v, metrics[v - 1])
            assert (metrics[v - 1].get("sparkstateFlushMs", 0) == 0) or flushed
        assert CommittedFiles.of(fm.read_manifest(6)).ssts == CommittedFiles.of(fm.read_manifest(4)).ssts
    finally:
        store.close()


def test_by_default_a_commit_after_the_first_writes_its_change_log_and_flushes_after_twenty(tmp_path):
    store = Store(make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "1"), backend="rocksdb"),
                  str(tmp_path / "local"))  # rocksdb.flushEveryVersions as the user gets it
    try:
        expected = _commit_versions(store, 21, rows_per_version=20)
        fm = store.file_manager
        logs = {v: [lv for lv, _ in CommittedFiles.of(fm.read_manifest(v)).logs] for v in range(1, 22)}
        assert logs[1] == [] and logs[20] == list(range(2, 21)) and logs[21] == [], logs
    finally:
        store.close()
    assert _fresh_contents(tmp_path, 20, rocksdb_flush_every=20) == expected[20]


def _flushed_versions(store: Store, keys: int, last: int, rewritten: int, tag, check) -> list[int]:
    """Version 1 writes `keys` keys, versions 2..`last` rewrite the first `rewritten` with values `tag(v)`;
    `check(files)` sees each version's files. Returns the versions that flushed."""
    store.load(0)
    store.apply_batch([kv(i) for i in range(keys)])
    store.commit()
    flushes = []
    for v in range(2, last + 1):
        store.load(v - 1)
        store.apply_batch([kv(i, tag(v)) for i in range(rewritten)])
        store.commit()
        files = CommittedFiles.of(store.file_manager.read_manifest(v))
        check(files)
        if not files.logs:
            flushes.append(v)
    return flushes


def _newest_log(files: CommittedFiles) -> int:
    return max((r.size for _, r in files.logs), default=0)


def test_a_commit_flushes_early_once_its_logs_outweigh_half_the_ssts(tmp_path, monkeypatch):
    monkeypatch.setattr(rocksdb_backend, "LOG_BYTES_BEFORE_FLUSH", 0)  # the share alone decides

    def check(files: CommittedFiles) -> None:
        assert files.log_bytes <= 0.5 * files.sst_bytes + _newest_log(files)

    store = _store(tmp_path, rocksdb_flush_every=100)
    try:  # a fifth of the keys per version
        flushes = _flushed_versions(store, 2000, 11, 400, lambda v: b"w%d" % v, check)
        assert flushes and len(flushes) < 9, flushes  # neither every commit nor never
    finally:
        store.close()


def test_a_small_state_keeps_its_logs_up_to_a_few_mib_before_it_flushes(tmp_path, monkeypatch):
    """A batch that rewrites most of a small state: logs soon outweigh half the SST files, yet the
    commits stay logged until the logs reach LOG_BYTES_BEFORE_FLUSH (or flushEveryVersions)."""
    monkeypatch.setattr(rocksdb_backend, "LOG_BYTES_BEFORE_FLUSH", 40 << 10)

    def check(files: CommittedFiles) -> None:
        assert files.log_bytes <= (40 << 10) + _newest_log(files)
        assert not files.logs or files.log_bytes > 0.5 * files.sst_bytes or len(files.logs) < 3

    store = _store(tmp_path, rocksdb_flush_every=100)
    try:  # every key again in every version
        flushes = _flushed_versions(store, 300, 39, 300, lambda v: b"w%d-" % v + b"x" * 30, check)
        assert flushes and flushes[0] > 4, flushes  # logged well past half the SST bytes
    finally:
        store.close()
    expected = dict(kv(i, b"w39-" + b"x" * 30) for i in range(300))
    assert _fresh_contents(tmp_path, 39, rocksdb_flush_every=100) == expected


@pytest.mark.parametrize("versions", [1, 2, 3, 4, 5, 7])
def test_a_fresh_instance_loads_every_version(tmp_path, versions):
    writer = _store(tmp_path)
    try:
        expected = _commit_versions(writer, versions)
    finally:
        writer.close()
    for v in range(versions + 1):
        reader = _store(tmp_path, f"reader-{v}")
        try:
            assert reader.load(v).source in ("checkpoint", "empty")
            assert contents(reader) == expected[v], v
            assert reader.metrics().num_keys == len(expected[v])
        finally:
            reader.close()


def test_a_memtable_that_fills_between_flushes_is_still_one_version(tmp_path):
    """1 MiB memtables (the tests' setting) fill within one logged version: RocksDB flushes on its own,
    and the version is still the older SST set plus its logs; the next flush uploads the new files."""
    writer = _store(tmp_path)
    big = b"x" * 300
    try:
        writer.load(0)
        for v in range(1, 5):
            writer.apply_batch([(kv(i)[0], big + b"%d" % v) for i in range(v * 2000, v * 2000 + 6000)])
            writer.commit()
            writer.load(v)
        final = contents(writer)
    finally:
        writer.close()
    reader = _store(tmp_path, "reader")
    try:
        reader.load(4)
        assert contents(reader) == final and len(final) == 12000
    finally:
        reader.close()


def test_an_abort_rewinds_to_a_logged_version_without_downloading(tmp_path):
    store = _store(tmp_path)
    try:
        expected = _commit_versions(store, 2)  # version 2 is a log on version 1
        store.apply_batch([kv(i, b"aborted") for i in range(100)])
        store.abort()
        calls = []
        fileio = store.file_manager.fileio
        original = fileio.download_file
        fileio.download_file = lambda *a: (calls.append(a), original(*a))[1]
        assert store.load(2).source in ("memory", "rewind", "local")
        assert contents(store) == expected[2]
        assert calls == []
    finally:
        store.close()


def test_a_version_whose_change_log_failed_is_flushed(tmp_path, monkeypatch):
    store = _store(tmp_path)
    try:
        store.load(0)
        store.apply_batch([kv(i) for i in range(100)])
        store.commit()
        store.load(1)
        monkeypatch.setattr(DeltaJournal, "append", lambda self, records: (_ for _ in ()).throw(OSError("disk full")))
        store.apply_batch([kv(i, b"second") for i in range(50)])
        store.commit()
        files = CommittedFiles.of(store.file_manager.read_manifest(2))
        assert files.logs == () and files.ssts
    finally:
        store.close()
    monkeypatch.undo()
    expected = {**dict(kv(i) for i in range(100)), **dict(kv(i, b"second") for i in range(50))}
    assert _fresh_contents(tmp_path, 2) == expected


@pytest.mark.parametrize("damage,message", [("flipped byte", "is corrupt"), ("missing", "is missing")])
def test_a_damaged_change_log_is_named_on_load_and_the_flushed_version_still_loads(tmp_path, damage, message):
    writer = _store(tmp_path)
    try:
        expected = _commit_versions(writer, 2)
    finally:
        writer.close()
    (log_version, ref) = CommittedFiles.of(writer.file_manager.read_manifest(2)).logs[-1]
    assert log_version == 2
    path = tmp_path / "ckpt" / "state" / "0" / "1" / "sparkstate" / "files" / ref.remote
    if damage == "missing":
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    reader = _store(tmp_path, "reader")
    try:
        with pytest.raises(CorruptCheckpointError, match=f"{ref.remote}.* {message}"):
            reader.load(2)
        reader.load(1)  # the failed load left nothing behind that the flushed version would read
        assert contents(reader) == expected[1]
    finally:
        reader.close()


def test_a_store_that_flushes_every_commit_opens_and_continues_a_logged_version(tmp_path):
    """Turning the setting off (or down) on a running query: the versions written with it still load."""
    writer = _store(tmp_path)
    try:
        expected = _commit_versions(writer, 2)
    finally:
        writer.close()
    assert CommittedFiles.of(writer.file_manager.read_manifest(2)).logs
    every = _store(tmp_path, "every-commit", rocksdb_flush_every=1)
    try:
        every.load(2)
        assert contents(every) == expected[2]
        every.apply_batch([kv(7, b"later")])
        every.commit()
        files = CommittedFiles.of(every.file_manager.read_manifest(3))
        assert files.logs == () and files.ssts
    finally:
        every.close()
    reader = _store(tmp_path, "reader", rocksdb_flush_every=1)
    try:
        reader.load(3)
        assert contents(reader) == {**expected[2], kv(7, b"later")[0]: kv(7, b"later")[1]}
    finally:
        reader.close()


def test_change_logs_are_written_with_their_own_compression_and_read_back_alike(tmp_path, monkeypatch):
    """rocksdb.changeLogCompression reaches the change log's writer (not heap.compression), and every codec
    reads back as the same writes."""
    import sparkstate.engine.arrow_files as hf

    codecs = []
    writer_class = hf.JournalWriter
    monkeypatch.setattr(hf, "JournalWriter", lambda f, v, compression: (codecs.append(compression),
                                                                        writer_class(f, v, compression))[1])
    read = {}
    for codec in ("zstd", "lz4", "none"):
        store = _store(tmp_path / codec, rocksdb_change_log_compression=codec, heap_compression="lz4")
        try:
            _commit_versions(store, 3)
            read[codec] = [(c.version, c.rows) for c in store.changes(1, 3)]
        finally:
            store.close()
        assert set(codecs) == {codec}, codecs
        codecs.clear()
    assert read["zstd"] == read["lz4"] == read["none"] and len(read["zstd"]) == 3


def test_the_default_change_log_codec_is_zstd():
    from sparkstate.config import Settings

    assert Settings().rocksdb_change_log_compression == "zstd"


# ---- the SST set of an idle logged version, written in maintenance --------------------------------------

def test_maintenance_writes_an_idle_logged_versions_sst_set_for_the_next_commit(tmp_path):
    store = _store(tmp_path, rocksdb_flush_every=4)
    try:
        expected = _commit_versions(store, 2)  # 1 flushed, 2 logged
        maintain(store)  # one change log: half of the 4 versions a flush waits for are not there yet
        assert store._backend._sst_sets.peek_result() is None
        expected.update(commit_versions_from(store, 2, 3))  # 3 logged
        fm = store.file_manager
        assert [v for v, _ in CommittedFiles.of(fm.read_manifest(3)).logs] == [2, 3]
        maintain(store)
        assert [v for v, _ in CommittedFiles.of(fm.read_manifest(3)).logs] == [2, 3]  # no manifest written
        store.apply_batch([kv(1000, b"v4")])
        metrics = store.commit().metrics
        files = CommittedFiles.of(fm.read_manifest(4))
        assert [v for v, _ in files.logs] == [4]  # the SST set of 3, and 4's own change log
        assert metrics["sparkstateFilesUploaded"] >= 2 and metrics["sparkstateFlushMs"] == 0
        expected[4] = {**expected[3], **dict([kv(1000, b"v4")])}
    finally:
        store.close()
    for v in (2, 3, 4):  # the versions before the SST set still open from their own manifests
        assert _fresh_contents(tmp_path, v, rocksdb_flush_every=4) == expected[v], v


def _written_then_reopened(tmp_path, versions: int) -> tuple[dict[int, dict[bytes, bytes]], Store]:
    """Versions 1..`versions` (1 flushed, the rest logged), then a fresh instance that loads the last one."""
    writer = _store(tmp_path, rocksdb_flush_every=6)
    try:
        expected = _commit_versions(writer, versions)
    finally:
        writer.close()
    reader = _store(tmp_path, "after-restart", rocksdb_flush_every=6)
    reader.load(versions)
    return expected, reader


def _checkpoint_files(tmp_path) -> set[str]:
    return {str(p) for p in (tmp_path / "ckpt").rglob("*") if p.is_file()}


def test_a_store_opened_by_replaying_logs_writes_that_versions_sst_set_before_its_first_write(tmp_path):
    expected, store = _written_then_reopened(tmp_path, 4)  # the load replays 3 change logs
    fm = store.file_manager
    try:
        settle(store)
        assert store._backend._sst_sets.peek_result() is None  # nothing before a write
        store.apply_batch([kv(9000, b"v5")])
        settle(store)
        assert store._backend._sst_sets.peek_result().version == 4
        assert [v for v, _ in CommittedFiles.of(fm.read_manifest(4)).logs] == [2, 3, 4]  # no manifest written
        store.commit()
        expected[5] = {**expected[4], **dict([kv(9000, b"v5")])}
        files = CommittedFiles.of(fm.read_manifest(5))
        assert [v for v, _ in files.logs] == [5]  # 4's SST set, and 5's own change log
        assert set(files.ssts) > set(CommittedFiles.of(fm.read_manifest(1)).ssts)  # with the replay's file
    finally:
        store.close()
    for v in (4, 5):
        assert _fresh_contents(tmp_path, v, rocksdb_flush_every=6) == expected[v], v


def test_a_reader_that_opens_by_replaying_logs_uploads_nothing(tmp_path):
    expected, store = _written_then_reopened(tmp_path, 4)
    try:
        before = _checkpoint_files(tmp_path)
        assert contents(store) == expected[4]
        store.abort()
        store.load(4)
        settle(store)
        assert store._backend._sst_sets.peek_result() is None
        assert _checkpoint_files(tmp_path) == before
    finally:
        store.close()


def test_an_sst_set_after_a_replay_that_cannot_start_leaves_the_write_and_commit_whole(tmp_path, monkeypatch):
    from sparkstate.engine.rocksdb import snapshot

    def full_disk(self, version):
        raise OSError(28, "No space left on device")

    expected, store = _written_then_reopened(tmp_path, 4)
    monkeypatch.setattr(snapshot.BackgroundSstSet, "prepare_snapshot", full_disk)
    try:
        store.apply_batch([kv(9100, b"v5")])
        store.commit()
        expected[5] = {**expected[4], **dict([kv(9100, b"v5")])}
        assert [v for v, _ in CommittedFiles.of(store.file_manager.read_manifest(5)).logs] == [2, 3, 4, 5]
    finally:
        store.close()
    assert _fresh_contents(tmp_path, 5, rocksdb_flush_every=6) == expected[5]


def test_a_store_that_replays_one_log_leaves_the_sst_set_to_maintenance(tmp_path):
    _, store = _written_then_reopened(tmp_path, 2)  # 1 flushed, 2 logged
    try:
        store.apply_batch([kv(7000, b"v3")])
        settle(store)
        assert store._backend._sst_sets.peek_result() is None
        store.commit()
        assert [v for v, _ in CommittedFiles.of(store.file_manager.read_manifest(3)).logs] == [2, 3]
    finally:
        store.close()


def test_maintenance_leaves_a_store_with_writes_since_its_version_alone(tmp_path):
    store = _store(tmp_path, rocksdb_flush_every=4)
    try:
        _commit_versions(store, 3)
        store.apply_batch([kv(5000, b"pending")])
        maintain(store)
        assert store._backend._sst_sets.peek_result() is None
        store.commit()
        assert [v for v, _ in CommittedFiles.of(store.file_manager.read_manifest(4)).logs] == [2, 3, 4]
    finally:
        store.close()


def test_an_sst_set_that_arrives_after_the_next_commit_is_built_on_by_the_one_after(tmp_path, monkeypatch):
    """The SST set of 4 is still uploading when 5 commits (logged on 4's files); when it lands, 6 builds on
    it and the change logs of 5 and 6."""
    import threading

    from sparkstate.engine.rocksdb import snapshot

    release = threading.Event()
    upload = snapshot.BackgroundSstSet.upload_snapshot

    def slow_upload(self, res):
        assert release.wait(30)
        return upload(self, res)

    monkeypatch.setattr(snapshot.BackgroundSstSet, "upload_snapshot", slow_upload)
    store = _store(tmp_path, rocksdb_flush_every=6)
    try:
        expected = _commit_versions(store, 4)
        store.maintenance_snapshot()  # the SST set of 4, held back
        for v in (5, 6):
            store.apply_batch([kv(8000 + v, b"late")])
            store.commit()
            expected[v] = {**expected[v - 1], **dict([kv(8000 + v, b"late")])}
            release.set()
            settle(store)
            store.load(v)
        fm = store.file_manager
        assert [v for v, _ in CommittedFiles.of(fm.read_manifest(5)).logs] == [2, 3, 4, 5]
        files = CommittedFiles.of(fm.read_manifest(6))
        assert [v for v, _ in files.logs] == [5, 6]
        assert files.pack.remote.startswith("4-")  # the SST set of 4
    finally:
        release.set()
        store.close()
    for v in (5, 6):
        assert _fresh_contents(tmp_path, v) == expected[v], v


def test_an_sst_set_of_the_database_before_a_rewind_is_not_built_on(tmp_path):
    """A rewind rebuilds the database from the checkpoint's files: an SST set taken from the database
    before it names that database's files, which the rebuilt one may hold other files under."""
    store = _store(tmp_path, rocksdb_flush_every=6)
    try:
        expected = _commit_versions(store, 4)
        store.maintenance_snapshot()  # the SST set of 4
        settle(store)
        store.apply_batch([kv(9000, b"aborted")])
        store.abort()
        assert store.load(4).source == "memory"  # rewound: a database rebuilt from 4's files
        assert store._backend._sst_sets.peek_result().version == 4
        store.apply_batch([kv(8005, b"late")])
        store.commit()
        expected[5] = {**expected[4], **dict([kv(8005, b"late")])}
        files = CommittedFiles.of(store.file_manager.read_manifest(5))
        assert [v for v, _ in files.logs] == [2, 3, 4, 5]
    finally:
        store.close()
    assert _fresh_contents(tmp_path, 5) == expected[5]
