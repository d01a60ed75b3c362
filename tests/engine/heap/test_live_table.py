"""Live tables: both layouts give the same answers, and their memory estimates match what Python allocates."""
import random
import tracemalloc

import pytest

from sparkstate.config import HEAP_LAYOUTS
from sparkstate.engine.heap.live_table import new_live_table, table_from_writes
from sparkstate.engine.heap.write_log import WriteLog

ABSENT = object()


@pytest.mark.parametrize("layout", HEAP_LAYOUTS)
def test_put_and_remove_return_the_previous_value(layout):
    t = new_live_table(layout, {b"a": b"1"})
    assert t.put(b"a", b"2", ABSENT) == b"1" and t.put(b"b", b"3", ABSENT) is ABSENT
    assert t.remove(b"a", ABSENT) == b"2" and t.remove(b"a", ABSENT) is ABSENT
    assert dict(t.items()) == {b"b": b"3"} and list(t.keys()) == [b"b"] and len(t) == 1
    assert t.get(b"b") == b"3" and t.get(b"a") is None


@pytest.mark.parametrize("layout", HEAP_LAYOUTS)
@pytest.mark.parametrize("sizes", ["fixed", "mixed"])
def test_memory_estimate_is_close_to_what_python_allocates(layout, sizes):
    rnd = random.Random(7)
    pairs = [(rnd.randbytes(20 if sizes == "fixed" else rnd.randrange(8, 40)),
              rnd.randbytes(24 if sizes == "fixed" else rnd.randrange(0, 60))) for _ in range(20_000)]
    tracemalloc.start()
    try:
        t = new_live_table(layout)
        for k, v in pairs:  # fresh objects owned by the table alone, as from the data channel
            t.put(bytes(bytearray(k)), bytes(bytearray(v)))
        for k, _ in pairs[::4]:
            t.put(bytes(bytearray(k)), b"w" * (24 if sizes == "fixed" else 5))
        for k, _ in pairs[1::4]:
            t.remove(k)
        allocated = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0.85 < t.memory_bytes() / allocated < 1.15, (t.memory_bytes(), allocated)


def test_unknown_layout_is_a_clear_error():
    with pytest.raises(ValueError, match="packed, dict"):
        new_live_table("btree")


@pytest.mark.parametrize("layout", HEAP_LAYOUTS)
def test_a_table_from_a_log_of_writes_holds_what_its_replay_leaves(layout):
    import pyarrow as pa  # noqa: PLC0415
    rnd = random.Random(3)
    rows = {rnd.randbytes(rnd.randrange(4, 30)): rnd.randbytes(rnd.randrange(0, 50)) for _ in range(5_000)}
    items = list(rows.items())
    batches = [(pa.array([k for k, _ in items[i:i + 999]], pa.binary()),
                pa.array([v for _, v in items[i:i + 999]], pa.binary())) for i in range(0, len(items), 999)]
    # a later delta: rewrites and deletes of earlier keys, a delete of a key never written
    later = [(k, None if i % 3 else b"new") for i, (k, _) in enumerate(items[:900])] + [(b"never", None)]
    batches.append((pa.array([k for k, _ in later], pa.binary()), pa.array([v for _, v in later], pa.binary())))
    for k, v in later:
        if v is None:
            rows.pop(k, None)
        else:
            rows[k] = v
    t = table_from_writes(layout, WriteLog.of(batches))
    assert len(t) == len(rows) and dict(t.items()) == rows
    assert all(t.get(k) == v for k, v in rows.items())
    assert len(table_from_writes(layout, WriteLog.of([]))) == 0


def _walk_all(table, max_rows):
    seen, position, slices = [], None, 0
    while True:
        rows, position = table.walk(position, max_rows)
        seen += rows
        slices += 1
        if position is None:
            return seen, slices


@pytest.mark.parametrize("layout", HEAP_LAYOUTS)
@pytest.mark.parametrize("sizes", ["fixed", "mixed"])
def test_a_walk_visits_every_entry_once_in_bounded_slices(layout, sizes):
    rnd = random.Random(3)
    data = {b"k%05d" % i: b"v" * (8 if sizes == "fixed" else rnd.randrange(0, 30)) for i in range(5000)}
    t = new_live_table(layout, data)
    seen, slices = _walk_all(t, 100)
    assert sorted(seen) == sorted(data.items()) and len(seen) == len(data)
    assert slices >= len(data) // 150  # slices of about 100 entries (packed: whole buckets, a few more)


@pytest.mark.parametrize("layout", HEAP_LAYOUTS)
def test_a_walk_that_removes_what_it_saw_reaches_every_entry_in_a_few_rounds(layout):
    # Packed: removals leave buckets in place, one round does it. Dict: a removal shifts the offsets of the
    # entries after it, so a round removing everything it sees passes over about half of them.
    t = new_live_table(layout, {b"k%05d" % i: b"v" for i in range(3000)})
    rounds = 0
    while len(t) and rounds < 20:
        position = None
        while True:
            rows, position = t.walk(position, 64)
            for k, _ in rows:
                t.remove(k)
            if position is None:
                break
        rounds += 1
    assert len(t) == 0 and rounds <= (1 if layout == "packed" else 12)
