"""The change feed and snapshot replay: the writes each version recorded equal the difference of consecutive
versions, and a version replayed from a snapshot equals the version loaded from its own files."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from sparkstate.errors import ChangeFeedError

from .conftest import apply_writes, contents, kv, maintain

VERSIONS = 8


def _history(store, seed: int = 1) -> dict[int, dict[bytes, bytes]]:
    """Commit versions 1..VERSIONS of puts, overwrites with new values and removes (version 4 writes
    nothing); returns every version's contents as loaded from the checkpoint."""
    rng = random.Random(seed)
    store.load(0)
    live: dict[bytes, bytes] = {}
    for v in range(1, VERSIONS + 1):
        writes: list[tuple[bytes, bytes | None]] = []
        if v != 4:
            for i in rng.sample(range(60), 25):
                key, value = kv(i, tag=b"v%d" % v)
                if key in live and rng.random() < 0.4:
                    writes.append((key, b"first-write"))  # written twice: the last write counts
                    writes.append((key, None))
                else:
                    writes.append((key, value))
        store.apply_batch(writes)
        apply_writes(live, writes)
        assert store.commit().version == v
        store.load(v)
        maintain(store)
    return {v: _load(store, v) for v in range(VERSIONS + 1)}


def _load(store, version: int) -> dict[bytes, bytes]:
    store.load(version)
    return contents(store)


def _diff(before: dict[bytes, bytes], after: dict[bytes, bytes]) -> dict[bytes, bytes | None]:
    changed: dict[bytes, bytes | None] = {k: v for k, v in after.items() if before.get(k) != v}
    changed.update({k: None for k in before if k not in after})
    return changed


def test_each_versions_changes_are_the_difference_of_consecutive_versions(new_store):
    store = new_store(heap_snapshot_every=3, rocksdb_change_log=True)
    versions = _history(store)
    feed = list(new_store("reader").changes(1, VERSIONS))  # another instance: reads the checkpoint only
    assert [c.version for c in feed] == list(range(1, VERSIONS + 1))
    for c in feed:
        assert len({k for k, _ in c.rows}) == len(c.rows)  # one row per key: its last write
        rows = dict(c.rows)
        # a key written then removed in one batch that did not exist before is a remove of nothing
        expected = _diff(versions[c.version - 1], versions[c.version])
        assert {k: v for k, v in rows.items() if not (v is None and k not in versions[c.version - 1])} == expected
    assert feed[3].rows == []  # version 4 wrote nothing


def test_versions_retention_removed_are_refused_with_what_is_kept(new_store):
    store = new_store(retain=3, rocksdb_change_log=True)
    _history(store)
    store.maintenance_cleanup()
    with pytest.raises(ChangeFeedError, match=r"version 5 \(batch 4\).*changes of batches 1\.\.7.*not in the checkpoint.*versions 6\.\.8"):
        list(store.changes(2, 8))
    assert [c.version for c in store.changes(7, 8)] == [7, 8]


@pytest.mark.parametrize("backend", ["rocksdb"])
def test_rocksdb_without_its_change_log_says_so(new_store):
    store = new_store(rocksdb_change_log=False, rocksdb_flush_every=1)  # between flushes every version keeps one
    store.load(0)
    store.apply_batch([kv(1)])
    store.commit()
    assert store.file_manager.read_manifest(1).change_log is None
    with pytest.raises(ChangeFeedError, match=r"version 1 \(batch 0\).*keeps no change log.*changeLog=true"):
        list(store.changes(1, 1))


@pytest.mark.parametrize("backend", ["rocksdb"])
def test_the_change_log_error_names_the_batches_that_can_be_read(new_store):
    """Versions 1-3 without a change log, 4-5 with one (the setting turned on for a restart): a feed over
    1..5 names version 3 and the batches after it, which then read; a feed over 1..3 says none can."""
    first = new_store(rocksdb_change_log=False, rocksdb_flush_every=1)
    for v in range(3):
        first.load(v)
        first.apply_batch([kv(v)])
        first.commit()
    first.close()
    second = new_store("inst-2", rocksdb_change_log=True)
    for v in range(3, 5):
        second.load(v)
        second.apply_batch([kv(v)])
        second.commit()
    with pytest.raises(ChangeFeedError, match=r"version 3 \(batch 2\).*keeps no change log.*changeStartBatchId >= 3"):
        list(second.changes(1, 5))
    assert [(c.version, c.rows) for c in second.changes(4, 5)] == [(4, [kv(3)]), (5, [kv(4)])]
    with pytest.raises(ChangeFeedError, match=r"version 3 \(batch 2\).*None of batches 0\.\.2 keeps one after it"):
        list(second.changes(1, 3))


def test_replay_from_a_snapshot_equals_the_versions_own_files(new_store):
    store = new_store(heap_snapshot_every=2, rocksdb_change_log=True)
    versions = _history(store)
    fulls = {v for v in range(1, VERSIONS + 1)
             for ref in store.file_manager.read_manifest(VERSIONS).shared_files if ref.local == f"full-{v}.arrow"}
    starts = range(1, VERSIONS + 1) if new_store.backend == "rocksdb" else sorted(fulls)
    assert starts, "the heap backend wrote no full snapshot"
    replayer = new_store("replayer", rocksdb_change_log=True)
    for start in starts:
        assert replayer.replay(start, VERSIONS).version == VERSIONS
        assert contents(replayer) == versions[VERSIONS]
    # a commit after a replay is an ordinary version; its writes are not a batch's, so it keeps no change log
    replayer.replay(starts[0], VERSIONS)
    replayer.apply_batch([kv(1000)])
    assert replayer.commit().version == VERSIONS + 1
    assert _load(new_store("check"), VERSIONS + 1) == {**versions[VERSIONS], kv(1000)[0]: kv(1000)[1]}
    with pytest.raises(ChangeFeedError, match="keeps no change log"):
        list(replayer.changes(VERSIONS + 1, VERSIONS + 1))


@pytest.mark.parametrize("backend", ["heap"])
def test_heap_replay_from_a_version_without_a_full_snapshot_names_the_ones_kept(new_store):
    store = new_store(heap_snapshot_every=3)
    _history(store)
    kept = sorted(int(ref.local[5:-6]) for ref in store.file_manager.read_manifest(VERSIONS).shared_files
                  if ref.local.startswith("full-"))
    missing = next(v for v in range(1, VERSIONS + 1) if v not in kept)
    with pytest.raises(ChangeFeedError, match=rf"no full snapshot of version {missing} .*retained full snapshots: "
                                              rf".*{kept[-1]} \(batch {kept[-1] - 1}\)"):
        new_store("replayer").replay(missing, VERSIONS)


def _arrow_formats(store, version: int) -> set[str]:
    """The format versions of the Arrow files (deltas, change logs, full snapshots) of a version's manifest."""
    found = set()
    manifest = store.file_manager.read_manifest(version)
    for ref in manifest.shared_files + ((manifest.change_log,) if manifest.change_log else ()):
        if ref.local.endswith(".arrow"):
            path = store.file_manager.file_path(ref.remote).removeprefix("file:")
            with open(path, "rb") as f:
                is_file = f.read(6) == b"ARROW1"
            src = pa.memory_map(path)
            schema = (pa.ipc.open_file(src) if is_file else pa.ipc.open_stream(src)).schema
            found.add(schema.metadata[b"sparkstate.formatVersion"].decode())
    return found


@pytest.fixture
def row_formats(monkeypatch):
    """Make the writers of engine/arrow_files.py write formats 1 and 2 (one Arrow row per state row), as
    earlier sparkstate releases did, until `restore()` is called."""
    from sparkstate.engine import arrow_files as hf

    real_schema = hf.schema

    def old_schema(kind, version, rows, format_version=None):
        return real_schema(kind, version, rows,
                           hf.JOURNAL_FORMAT_VERSION if kind == hf.KIND_DELTA else hf.ROWS_FORMAT_VERSION)

    def old_arrays(keys, values):
        return pa.RecordBatch.from_arrays([hf._key_groups(keys), keys, values], schema=pa.schema(hf._FIELDS))

    monkeypatch.setattr(hf, "schema", old_schema)
    monkeypatch.setattr(hf, "_items_block", hf._batch)
    monkeypatch.setattr(hf, "_arrays_block", old_arrays)
    return monkeypatch.undo


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_checkpoint_of_row_format_files_is_read_and_continued_in_blocks(new_store, row_formats):
    """Versions 1..8 in formats 1 and 2, 9..16 in blocks: restores, the change feed across both and a replay
    from a full snapshot of each format agree with the versions' contents."""
    store = new_store(heap_snapshot_every=3, rocksdb_change_log=True)
    old = _history(store, seed=2)
    row_formats()
    store.load(VERSIONS)
    live = dict(old[VERSIONS])
    rng = random.Random(3)
    for v in range(VERSIONS + 1, 2 * VERSIONS + 1):
        writes = [(kv(i, b"n%d" % v)[0], None if rng.random() < 0.3 else kv(i, b"n%d" % v)[1])
                  for i in rng.sample(range(60), 20)]
        store.apply_batch(writes)
        apply_writes(live, writes)
        store.commit()
        store.load(v)
        maintain(store)
        assert _load(new_store(f"fresh-{v}", heap_snapshot_every=3), v) == live
    assert _arrow_formats(store, VERSIONS) == ({"1", "2"} if new_store.backend == "heap" else {"2"})
    assert _arrow_formats(store, 2 * VERSIONS) >= {"3"}
    feed = {c.version: dict(c.rows) for c in new_store("reader").changes(VERSIONS - 2, VERSIONS + 2)}
    assert set(feed) == set(range(VERSIONS - 2, VERSIONS + 3))
    assert {k: v for k, v in feed[VERSIONS].items() if not (v is None and k not in old[VERSIONS - 1])} == \
        _diff(old[VERSIONS - 1], old[VERSIONS])
    if new_store.backend == "heap":
        fulls = sorted(int(ref.local[5:-6]) for v in (VERSIONS, 2 * VERSIONS)
                       for ref in store.file_manager.read_manifest(v).shared_files if ref.local.startswith("full-"))
        assert fulls[0] <= VERSIONS < fulls[-1]  # one full snapshot in rows, one in blocks
        for start in fulls:
            replayer = new_store(f"replayer-{start}")
            replayer.replay(start, 2 * VERSIONS)
            assert contents(replayer) == live
