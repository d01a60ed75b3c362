"""Heap backend: the delta journal (written while the batch runs, finished at commit)."""
import os

import pytest

from sparkstate.engine import arrow_files as hf
from sparkstate.engine.heap.live_table import table_from_writes
from sparkstate.engine.heap.write_log import WriteLog
from sparkstate.engine import journal
from sparkstate.errors import CorruptCheckpointError
from tests.storage.instrumented import InstrumentedFileIO

from ..conftest import contents, kv

pytestmark = pytest.mark.parametrize("backend", ["heap"])


def files(new_store) -> set[str]:
    d = new_store.checkpoint_dir / "files"
    return set(os.listdir(d)) if d.exists() else set()


def referenced(store, version) -> set[str]:
    return {r.remote for r in store.file_manager.read_manifest(version).shared_files}


def test_journal_is_written_during_the_batch_and_replays_in_order(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(1), kv(2), kv(3)])
    s.apply_batch([kv(1, b"w"), (kv(2)[0], None), kv(4)])
    s.apply_batch([kv(4, b"x"), (kv(5)[0], None), kv(2, b"back")])
    journals = files(new_store)
    assert len(journals) == 1 and next(iter(journals)).endswith("-delta-1.arrow")  # before the commit
    s.commit()
    assert files(new_store) == journals == referenced(s, 1)
    expected = dict([kv(1, b"w"), kv(2, b"back"), kv(3), kv(4, b"x")])
    s.load(1)
    assert contents(s) == expected
    fresh = new_store("inst-2")
    assert fresh.load(1).source == "checkpoint"
    assert contents(fresh) == expected


def test_one_row_appends_are_gathered_into_few_record_batches(new_store):
    """Joins and dedup write one row between reads: the journal must not frame every row on its own."""
    s = new_store()
    s.load(0)
    rows = 3 * hf.JOURNAL_FLUSH_ROWS + 17
    for i in range(rows):
        s.apply_batch([kv(i)])
    s.commit()
    (name,) = files(new_store)
    path = new_store.checkpoint_dir / "files" / name
    batches = list(hf.read(str(path), hf.KIND_DELTA, 1, name))
    assert [len(keys) for keys, _ in batches] == [hf.JOURNAL_FLUSH_ROWS] * 3 + [17]
    assert os.path.getsize(path) < 40 * rows  # keys and values are ~20 bytes; framing each row was ~470
    fresh = new_store("inst-2")
    fresh.load(1)
    assert contents(fresh) == dict(kv(i) for i in range(rows))


def test_aborted_or_rewound_journal_is_deleted_and_never_referenced(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(i) for i in range(10)])
    s.commit()
    committed = files(new_store)
    s.load(1)
    s.apply_batch([kv(i, b"aborted") for i in range(10)])
    assert len(files(new_store) - committed) == 1
    s.abort()
    assert s.load(1).source == "memory"          # rewound in memory: the partial journal is deleted
    assert files(new_store) == committed
    s.apply_batch([kv(i, b"retry") for i in range(3)])
    s.commit()
    new = files(new_store) - committed
    assert len(new) == 1 and new <= referenced(s, 2)
    s.load(2)
    s.apply_batch([kv(7, b"gone")])
    s.release()                                   # close: the unfinished journal goes too
    assert files(new_store) == committed | new
    fresh = new_store("inst-2")
    fresh.load(2)
    assert contents(fresh) == {**dict(kv(i) for i in range(10)), **dict(kv(i, b"retry") for i in range(3))}


def test_journal_failure_falls_back_to_the_delta_from_memory(new_store, monkeypatch):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(1)])
    calls = {"n": 0}
    real = journal.DeltaJournal.append

    def flaky(self, records):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full (test)")
        real(self, records)

    monkeypatch.setattr(journal.DeltaJournal, "append", flaky)
    s.apply_batch([kv(2), (kv(1)[0], None)])
    s.apply_batch([kv(3)])
    s.commit()
    assert len(files(new_store)) == 1             # the broken journal was deleted
    fresh = new_store("inst-2")
    fresh.load(1)
    assert contents(fresh) == dict([kv(2), kv(3)])


def test_staged_journal_on_other_storage_is_uploaded_at_commit(new_store, tmp_path):
    s = new_store(fileio=InstrumentedFileIO(in_place=False))  # remote storage: no writing in place
    s.load(0)
    s.apply_batch([kv(i) for i in range(100)])
    assert files(new_store) == set()              # staged locally until the commit
    s.commit()
    assert files(new_store) == referenced(s, 1)
    s.load(1)
    s.apply_batch([kv(5, b"x")])
    s.abort()
    s.load(1)
    s.apply_batch([kv(6, b"y")])
    s.commit()
    fresh = new_store("inst-2")
    fresh.load(2)
    assert contents(fresh) == {**dict(kv(i) for i in range(100)), **dict([kv(6, b"y")])}


def test_legacy_v1_delta_is_still_read_and_unknown_versions_are_refused(tmp_path, backend):
    p = tmp_path / "delta-3.arrow"
    p.write_bytes(hf.encode(hf.KIND_DELTA, 3, [(b"\0\0\0\1k", b"v"), (b"\0\0\0\1gone", None)], "lz4"))
    import pyarrow as pa
    full = [(pa.array([b"\0\0\0\1gone"]), pa.array([b"old"]))]
    log = WriteLog.of(full + list(hf.read_columns(str(p), hf.KIND_DELTA, 3, "legacy")))
    data = dict(table_from_writes("dict", log).items())
    assert data == {b"\0\0\0\1k": b"v"}
    with pytest.raises(CorruptCheckpointError, match="expected heap-delta of version 4"):
        list(hf.read_columns(str(p), hf.KIND_DELTA, 4, "legacy"))
    future = tmp_path / "future.arrow"
    with pa.OSFile(str(future), "wb") as sink, pa.ipc.new_stream(sink, hf.schema(hf.KIND_DELTA, 3, -1).with_metadata(
            {**hf.schema(hf.KIND_DELTA, 3, -1).metadata, b"sparkstate.formatVersion": b"4"})) as w:
        w.write_batch(hf._items_block([(b"\0\0\0\1k", b"1")]))
    with pytest.raises(CorruptCheckpointError, match="format version 4"):
        list(hf.read_columns(str(future), hf.KIND_DELTA, 3, "future"))


def test_a_delta_with_a_null_key_is_refused_naming_the_file(tmp_path, backend):
    import pyarrow as pa
    p = tmp_path / "delta-3.arrow"
    keys, values = pa.array([b"\0\0\0\1k", None]), pa.array([b"v", b"w"])
    batch = pa.RecordBatch.from_arrays([pa.array([1, 0], pa.int32()), keys, values],
                                       schema=hf.schema(hf.KIND_DELTA, 3, -1, hf.JOURNAL_FORMAT_VERSION))
    stream_schema = hf.schema(hf.KIND_DELTA, 3, -1, hf.JOURNAL_FORMAT_VERSION)
    with pa.OSFile(str(p), "wb") as sink, pa.ipc.new_stream(sink, stream_schema) as w:
        w.write_batch(batch)
    with pytest.raises(CorruptCheckpointError, match=r"s3://b/files/3-x-delta-3\.arrow is a delta with 1 null keys"):
        list(hf.read_columns(str(p), hf.KIND_DELTA, 3, "s3://b/files/3-x-delta-3.arrow"))
