"""VersionedMap: copy-on-write views, rollback, prefix index, accounting; on both live layouts."""
import gc
import random
import tracemalloc

import pyarrow as pa
import pytest

from sparkstate.config import HEAP_LAYOUTS
from sparkstate.engine.heap.versioned_map import ABSENT, VersionedMap, scan_prefix_length


@pytest.fixture(params=HEAP_LAYOUTS)
def layout(request) -> str:
    return request.param


def point_reads(m: VersionedMap, view, keys) -> dict:
    keys = list(keys)
    rows, pos = m.read_chunk(view, keys, 0, 1 << 30, 1 << 60)
    assert pos == len(keys)
    return dict(rows)


def view_dict(m: VersionedMap, view, prefix=b"") -> dict:
    """`view`'s rows with `prefix` through the columnar scan, checked against point reads of every key
    the map knows (live or in an image: a superset of any view's keys), and of the prefix index."""
    keys, values = m.view_columns(view, prefix)
    out = dict(zip(keys.to_pylist(), values.to_pylist()))
    assert list(out) == sorted(out) and len(out) == len(keys)  # sorted, no key twice
    universe = set(m._live.keys()) | {k for v in m._chain for k in v.before.keys()}
    assert out == point_reads(m, view, (k for k in universe if k.startswith(prefix)))
    if m.indexes_prefix(prefix):
        assert out == point_reads(m, view, m.view_keys(view, prefix))
    return out


def test_freeze_is_o1_and_views_never_see_later_writes(layout):
    m = VersionedMap({b"a": b"1", b"b": b"2"}, prefix_index=False, layout=layout)
    v1 = m.freeze(1)
    assert not v1.before  # nothing copied at freeze
    m.apply([(b"a", b"10"), (b"c", b"3"), (b"b", None), (b"a", b"11")])
    assert v1.before.first_values() == {b"a": b"1", b"c": ABSENT, b"b": b"2"}  # first write of each key
    v2 = m.freeze(2)
    m.apply([(b"c", None), (b"d", b"4")])
    assert view_dict(m, v1) == {b"a": b"1", b"b": b"2"}
    assert view_dict(m, v2) == {b"a": b"11", b"c": b"3"}
    assert m.changes_since(v2) == [(b"c", None), (b"d", b"4")]
    assert sorted(m.changes_since(v1)) == [(b"a", b"11"), (b"b", None), (b"d", b"4")]


def test_drop_merges_into_older_view_and_rollback_restores(layout):
    m = VersionedMap({b"a": b"1"}, prefix_index=False, layout=layout)
    v1 = m.freeze(1)
    m.apply([(b"a", b"2")])
    v2 = m.freeze(2)
    m.apply([(b"a", b"3"), (b"b", b"x")])
    cursor_view = m.freeze(None, pin=True)
    m.apply([(b"b", None)])
    m.unpin(cursor_view)             # reader-only view: dropped, its image merged into v2's
    assert m.chain_length() == 2
    assert view_dict(m, v2) == {b"a": b"2"} and view_dict(m, v1) == {b"a": b"1"}
    m.retire(v2)                      # a middle view: merged into v1
    assert view_dict(m, v1) == {b"a": b"1"}
    m.rollback_to(v1)
    assert m.get(b"a") == b"1" and m.get(b"b") is None and len(m) == 1 and m.chain_length() == 1


def test_pinned_view_stays_until_unpinned(layout):
    m = VersionedMap({}, prefix_index=False, layout=layout)
    v1 = m.freeze(1)
    m.pin(v1)
    m.apply([(b"k", b"v")])
    m.retire(v1)
    assert m.chain_length() == 1 and view_dict(m, v1) == {}
    m.unpin(v1)
    assert m.chain_length() == 0


def test_prefix_index_scans_only_the_prefix(layout):
    def key(kg: int, prefix: bytes, rest: bytes) -> bytes:
        return kg.to_bytes(4, "big") + len(prefix).to_bytes(4, "big") + prefix + rest

    m = VersionedMap({key(1, b"p", b"1"): b"a", key(1, b"q", b"1"): b"b"}, prefix_index=True, layout=layout)
    scan = key(1, b"p", b"")
    assert scan_prefix_length(scan) == len(scan)
    view = m.freeze(None, pin=True)
    m.apply([(key(1, b"p", b"2"), b"c"), (key(1, b"p", b"1"), None)])
    assert view_dict(m, view, scan) == {key(1, b"p", b"1"): b"a"}
    m.unpin(view)
    now = m.freeze(None, pin=True)
    assert view_dict(m, now, scan) == {key(1, b"p", b"2"): b"c"}
    assert sorted(m._index) == sorted([key(1, b"p", b""), key(1, b"q", b"")])


def test_memory_estimate_tracks_payload(layout):
    m = VersionedMap({}, prefix_index=False, layout=layout)
    empty = m.memory_used_bytes()
    assert empty < 200
    m.apply([(b"k%05d" % i, b"x" * 100) for i in range(1000)])
    one = m.memory_used_bytes()
    assert 1000 * 106 < one < 1000 * 400
    m.apply([(b"k%05d" % i, None) for i in range(500)])
    assert m.memory_used_bytes() < one * 0.75  # packed: some removed records wait for compaction


def view_batches_dict(m: VersionedMap, view, rows: int = 7) -> dict:
    out, n = {}, 0
    for keys, values in m.view_batches(view, rows):
        assert 0 < len(keys) <= rows and len(keys) == len(values)
        out.update(zip(keys.to_pylist(), values.to_pylist()))
        n += len(keys)
    assert n == len(out)  # no key twice
    return out


@pytest.mark.parametrize("value_format", [b"v%d", b"v%04d"])  # mixed sizes; one size (uniform packed)
def test_view_batches_equal_reading_the_view_row_by_row(layout, value_format):
    import random
    rnd = random.Random(11)
    m = VersionedMap({b"k%03d" % i: value_format % i for i in range(60)}, prefix_index=False, layout=layout)
    views = []
    for version in range(1, 6):
        views.append(m.freeze(version))
        batch = []
        for _ in range(40):
            k = b"k%03d" % rnd.randrange(90)
            batch.append((k, None if rnd.random() < 0.3 else value_format % rnd.randrange(1000)))
        m.apply(batch)
    m.retire(views[1])  # merged into views[0]'s image
    for view in (views[0], views[2], views[4]):
        assert view_batches_dict(m, view) == view_dict(m, view)


def _traced(build):
    """(the result of build(), bytes it left allocated): Python's heap by tracemalloc, Arrow's pool by
    its own count."""
    pa.array([b"x"], pa.binary())  # Arrow's first use allocates for good; not the images'
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0] + pa.total_allocated_bytes()
        out = build()
        gc.collect()
        return out, tracemalloc.get_traced_memory()[0] + pa.total_allocated_bytes() - start
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("reader_view", [False, True], ids=["version-log", "cursor-dict"])
def test_memory_estimate_matches_what_the_map_allocates(layout, reader_view):
    rnd = random.Random(3)
    keys = [rnd.randbytes(26) for _ in range(12_000)]
    values = [rnd.randbytes(16) for _ in keys]

    def build():
        # fresh key and value objects, as the worker decodes them: a state of 6,000 keys, then half
        # of it removed and as many new keys written after a view
        m = VersionedMap({bytes(bytearray(k)): bytes(bytearray(v)) for k, v in zip(keys[:6_000], values)},
                         prefix_index=False, layout=layout)
        view = m.freeze(None if reader_view else 1, pin=reader_view)
        m.apply([(bytes(bytearray(k)), None) for k in keys[:3_000]]
                + [(bytes(bytearray(k)), bytes(bytearray(v))) for k, v in zip(keys[6_000:9_000], values)])
        if not reader_view:
            m.freeze(2)  # seals version 1's log
        return m, view
    (m, view), allocated = _traced(build)
    assert view.before.is_log is not reader_view and len(view.before) == 6_000
    estimated = m.memory_used_bytes()
    assert 0.85 * allocated <= estimated <= 1.15 * allocated, (estimated, allocated)
