"""Heap backend: sync deltas vs background full snapshots, chains, memory cap, crash during a write."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from sparkstate.engine import Store
from sparkstate.engine.arrow_files import parse_local_name
from sparkstate.errors import CheckpointError
from tests.storage.instrumented import InstrumentedFileIO

from ..conftest import contents, kv, maintain, make_spec, settle

pytestmark = pytest.mark.parametrize("backend", ["heap"])


def chain(store: Store, version: int) -> list[tuple[str, int]]:
    return [parse_local_name(r.local) for r in store.file_manager.read_manifest(version).shared_files]


def test_full_snapshot_in_background_becomes_the_chain_base(new_store):
    s = new_store(heap_snapshot_every=3)
    s.load(0)
    for v in range(1, 8):
        s.apply_batch([kv(i, b"%d-" % v) for i in range(v * 10)])
        m = s.commit().metrics
        assert m["sparkstateFilesUploaded"] >= 1 and m["sparkstateBytesUploaded"] > 0
        s.load(v)
        maintain(s)
    # full-3 written by the maintenance after commit 3, used from commit 4; full-6 from commit 7
    assert chain(s, 3) == [("heap-delta", 1), ("heap-delta", 2), ("heap-delta", 3)]
    assert chain(s, 5) == [("heap-full", 3), ("heap-delta", 4), ("heap-delta", 5)]
    assert chain(s, 7) == [("heap-full", 6), ("heap-delta", 7)]
    assert s.metrics().custom["sparkstateUploadMs"] >= 0
    for v in (3, 5, 7):
        fresh = new_store(f"check-{v}")
        assert fresh.load(v).source == "checkpoint"
        assert contents(fresh) == dict(kv(i, b"%d-" % v) for i in range(v * 10))


def test_a_full_snapshot_waits_for_deltas_of_its_bytes_or_four_times_the_count(new_store):
    s = new_store(heap_snapshot_every=2, heap_snapshot_min_delta_percent=100)
    s.load(0)
    expected: dict[bytes, bytes] = {}
    rnd = random.Random(7)  # values that do not compress: a file's bytes follow its rows

    def commit(v: int, rows: range) -> None:
        writes = [kv(i, rnd.randbytes(16)) for i in rows]
        expected.update(writes)
        s.apply_batch(writes)
        s.commit()
        s.load(v)
        maintain(s)

    commit(1, range(2000))
    commit(2, range(2000, 2001))
    assert chain(s, 2) == [("heap-delta", 1), ("heap-delta", 2)]  # no full snapshot yet: the count decides
    # full-2 is the base from commit 3; deltas of one key each stay far below its bytes, so it stays the
    # base until four times heap.snapshotEveryVersions deltas follow it
    for v in range(3, 11):
        commit(v, range(3000 + v, 3001 + v))
        assert chain(s, v) == [("heap-full", 2)] + [("heap-delta", u) for u in range(3, v + 1)]
    commit(11, range(3011, 3012))
    assert chain(s, 11) == [("heap-full", 10), ("heap-delta", 11)]
    # a delta as large as the full snapshot: two deltas suffice again
    commit(12, range(4000))
    commit(13, range(4000, 4001))
    assert chain(s, 13) == [("heap-full", 12), ("heap-delta", 13)]
    fresh = new_store("check")
    assert fresh.load(13).source == "checkpoint"
    assert contents(fresh) == expected


def test_without_maintenance_a_commit_starts_a_full_snapshot_only_when_four_times_the_count_wait(new_store):
    s = new_store(heap_snapshot_every=2)
    s.load(0)
    for v in range(1, 9):  # commit 8 starts full-8 itself: eight deltas, overdue
        s.apply_batch([kv(i, b"%d" % v) for i in range(100)])
        s.commit()
        s.load(v)
        settle(s)
    assert [k for k, _ in chain(s, 8)] == ["heap-delta"] * 8  # due from 2 on, but maintenance starts those
    s.apply_batch([kv(0, b"9")])
    s.commit()
    assert chain(s, 9) == [("heap-full", 8), ("heap-delta", 9)]


def test_empty_commit_writes_no_delta(new_store):
    s = new_store()
    s.load(0)
    s.apply_batch([kv(1)])
    s.commit()
    s.load(1)
    assert s.commit().metrics["sparkstateFilesUploaded"] == 0
    assert chain(s, 2) == [("heap-delta", 1)]
    fresh = new_store("inst-2")
    fresh.load(2)
    assert contents(fresh) == dict([kv(1)])


def test_versions_in_memory_are_capped(new_store):
    s = new_store(heap_max_versions_in_memory=2)
    s.load(0)
    for v in range(1, 5):
        s.apply_batch([kv(v)])
        s.commit()
        s.load(v)
    assert s.load(3).source == "memory"            # retained: rolled back in place
    assert contents(s) == dict(kv(i) for i in range(1, 4))
    assert s.load(1).source == "checkpoint"        # evicted
    assert contents(s) == dict([kv(1)])


def test_failed_background_snapshot_leaves_every_version_loadable(new_store):
    io = InstrumentedFileIO()
    io.fail("open_write", "*full-*")
    s = new_store(fileio=io, heap_snapshot_every=1)
    s.load(0)
    for v in range(1, 4):
        s.apply_batch([kv(i) for i in range(v * 5)])
        s.commit()
        s.load(v)
        maintain(s)
    assert isinstance(s._backend.runner.last_error, OSError)
    assert [k for k, _ in chain(s, 3)] == ["heap-delta"] * 3
    io.heal()
    maintain(s)
    s.apply_batch([kv(100)])
    s.commit()
    assert chain(s, 4) == [("heap-full", 3), ("heap-delta", 4)]
    fresh = new_store("inst-2")
    fresh.load(4)
    assert contents(fresh) == dict([kv(i) for i in range(15)] + [kv(100)])


def test_commit_does_not_wait_for_the_background_snapshot(new_store):
    """A full snapshot blocked in its upload does not block the following commits."""
    gate = threading.Event()
    io = InstrumentedFileIO()
    io.delay("open_write", "*full-*", gate=gate)
    s = new_store(fileio=io, heap_snapshot_every=1)
    s.load(0)
    s.apply_batch([kv(i) for i in range(50)])
    s.commit()
    s.maintenance_snapshot()           # starts the background snapshot of version 1, which blocks
    for v in range(2, 6):
        s.load(v - 1)
        s.apply_batch([kv(i, b"w") for i in range(v)] + [(kv(40 + v)[0], None)])
        assert s.commit().version == v
    assert s._backend.runner.busy
    assert s.load(5).source == "memory"
    gate.set()
    settle(s)
    s.apply_batch([kv(999)])
    s.commit()
    assert chain(s, 6)[0] == ("heap-full", 1)
    fresh = new_store("inst-2")
    fresh.load(6)
    s.load(6)
    assert contents(fresh) == contents(s)


def test_retry_rolls_back_while_a_background_snapshot_reads_a_later_version(new_store):
    io = InstrumentedFileIO()
    io.delay("open_write", "*full-*", seconds=0.5)
    s = new_store(fileio=io, heap_snapshot_every=2)
    s.load(0)
    s.apply_batch([kv(1)])
    s.commit()
    s.load(1)
    s.apply_batch([kv(2)])
    s.commit()
    s.maintenance_snapshot()             # full snapshot of 2 starts in the background
    assert s._backend.runner.busy
    assert s.load(1).source == "memory"  # waits for it, then rolls back
    assert contents(s) == dict([kv(1)])


def test_wrong_backend_checkpoint_is_a_clear_error(backend, tmp_path):
    ckpt = f"file:{tmp_path}/ckpt"
    r = Store(make_spec(ckpt, "a", backend="rocksdb"), str(tmp_path / "l1"))
    r.load(0)
    r.apply_batch([kv(1)])
    r.commit()
    r.close()
    h = Store(make_spec(ckpt, "b", backend="heap"), str(tmp_path / "l2"))
    h.load(1)  # read with the backend that wrote it
    with pytest.raises(CheckpointError, match="written by the 'rocksdb' backend"):
        h.commit()
    h.close()


CRASHING_WRITER = textwrap.dedent("""
    import sys, threading
    from sparkstate.engine import Store
    from tests.engine.conftest import make_spec
    from tests.storage.instrumented import InstrumentedFileIO

    class Announce(threading.Event):  # a gate that says when a background write reaches it
        def wait(self, timeout=None):
            print("SNAPSHOT-IN-FLIGHT", flush=True)
            return super().wait(600)  # killed here, mid background write

    io = InstrumentedFileIO()
    io.delay("open_write", "*full-*", gate=Announce())
    ckpt, local = sys.argv[1], sys.argv[2]
    s = Store(make_spec(ckpt, "victim", backend="heap", heap_snapshot_every=2), local, fileio=io)
    s.load(0)
    for v in range(1, 5):
        s.apply_batch([(b"\\0\\0\\0\\1k%d" % i, b"%d" % (v * 1000 + i)) for i in range(v * 20)]
                      + [(b"\\0\\0\\0\\1k0", None)])
        s.commit()
        s.load(v)
        s.maintenance_snapshot()
    print("COMMITTED 4", flush=True)
    threading.Event().wait(600)
""")


def test_worker_killed_during_background_write_recovers_every_committed_version(backend, tmp_path):
    ckpt = f"file:{tmp_path}/ckpt"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_WRITER, ckpt, str(tmp_path / "local")],
                            stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        lines = []
        while "COMMITTED 4" not in lines:
            line = proc.stdout.readline()
            assert line, f"writer died early: {lines}"
            lines.append(line.strip())
        assert "SNAPSHOT-IN-FLIGHT" in lines
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    for v in range(1, 5):
        s = Store(make_spec(ckpt, f"recover-{v}", backend="heap"), str(tmp_path / "local2"))
        assert s.load(v).source == "checkpoint"
        assert contents(s) == {b"\0\0\0\1k%d" % i: b"%d" % (v * 1000 + i) for i in range(1, v * 20)}
        s.close()
    # and the query continues from the last version
    s = Store(make_spec(ckpt, "next", backend="heap"), str(tmp_path / "local3"))
    s.load(4)
    s.apply_batch([(b"\0\0\0\1after", b"crash")])
    assert s.commit().version == 5
    s.close()


@pytest.mark.parametrize("layout", ["packed", "dict"])
def test_scan_cursor_chunks_by_rows_and_bytes_over_a_frozen_view(backend, layout):
    from sparkstate.engine.heap.cursors import HeapScanCursor
    from sparkstate.engine.heap.versioned_map import VersionedMap

    m = VersionedMap({b"k%02d" % i: b"v" * 10 for i in range(30)}, prefix_index=False, layout=layout)
    cursor = HeapScanCursor(m, b"k1", None)  # an unindexed prefix: k10..k19
    m.apply([(b"k11", None), (b"k12", b"w" * 10), (b"k1x", b"new")])  # after open: not seen
    got = []
    rows, done = cursor.next_chunk(3, 1 << 20)
    assert len(rows) == 3 and not done
    got += rows
    rows, done = cursor.next_chunk(100, 1)  # a byte limit below one row still returns one row
    assert len(rows) == 1 and not done
    got += rows
    rows, done = cursor.next_chunk(100, 25)  # 13 bytes a row: the row reaching 25 bytes is the last
    assert len(rows) == 2 and not done
    got += rows
    rows, done = cursor.next_chunk(100, 1 << 20)
    got += rows
    assert done and cursor.closed and len(got) == 10
    assert got == [(b"k%02d" % i, b"v" * 10) for i in range(10, 20)]  # byte order, the view at open
    with pytest.raises(Exception, match="closed"):
        cursor.next_chunk(1, 1)
