"""PackedTable: the same answers as a dict through inserts, splits, resizes, removes and compaction."""
import random
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkstate.engine.heap import packed_table
from sparkstate.engine.heap.packed_table import LOAD, PackedTable
from sparkstate.engine.heap.write_log import WriteLog

ABSENT = object()

keys = st.binary(min_size=0, max_size=12)
values = st.binary(min_size=0, max_size=40)
ops = st.lists(st.tuples(st.sampled_from(["put", "put", "put", "remove", "get"]), keys, values), max_size=300)
# Fixed sizes, as with the UnsafeRows of an aggregation: the table stays in its uniform layout.
uniform_keys = st.binary(min_size=6, max_size=6)
uniform_values = st.binary(min_size=9, max_size=9)
uniform_ops = st.lists(st.tuples(st.sampled_from(["put", "put", "put", "remove", "get"]), uniform_keys,
                                 uniform_values), max_size=400)


def check_same(table: PackedTable, model: dict) -> None:
    assert len(table) == len(model)
    assert dict(table.items()) == model
    assert sorted(table.keys()) == sorted(model)
    for k, v in model.items():
        assert table.get(k) == v and type(table.get(k)) is bytes


def run_ops(table: PackedTable, model: dict, operations) -> None:
    for op, k, v in operations:
        if op == "put":
            assert table.put(k, v, ABSENT) == model.get(k, ABSENT)
            model[k] = v
        elif op == "remove":
            assert table.remove(k, ABSENT) == model.pop(k, ABSENT)
        else:
            assert table.get(k, ABSENT) == model.get(k, ABSENT)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.dictionaries(keys, values, max_size=80), operations=ops)
def test_matches_a_dict(initial, operations):
    table, model = PackedTable(initial), dict(initial)
    check_same(table, model)
    run_ops(table, model, operations)
    check_same(table, model)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.dictionaries(uniform_keys, uniform_values, max_size=80), operations=uniform_ops)
def test_uniform_layout_matches_a_dict(initial, operations):
    table, model = PackedTable(initial), dict(initial)
    run_ops(table, model, operations)
    assert table.uniform
    check_same(table, model)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first_key=uniform_keys, first=uniform_ops, then=ops)
def test_a_write_of_another_size_switches_to_the_general_layout(first_key, first, then):
    table, model = PackedTable(), {}
    run_ops(table, model, [("put", first_key, b"v" * 9)] + first)  # the first write fixes the sizes
    assert table.uniform
    run_ops(table, model, then)
    assert table.uniform == all(len(k) == 6 and len(v) == 9 for op, k, v in then if op == "put")
    check_same(table, model)


@pytest.mark.parametrize("sizes", ["uniform", "general"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.data())
def test_matches_a_dict_when_every_key_collides(sizes, operations):
    # One hash for every key: one bucket (splits move nothing), equal fingerprints; only the key
    # comparison tells entries apart.
    original = packed_table._hash
    packed_table._hash = lambda k: 0x5A5A5A5A_00000001
    try:
        table, model = PackedTable(), {}
        run_ops(table, model, operations.draw(uniform_ops if sizes == "uniform" else ops))
        check_same(table, model)
    finally:
        packed_table._hash = original


def test_grows_by_splitting_and_keeps_every_entry():
    rnd = random.Random(5)
    table, model = PackedTable(), {}
    for i in range(20_000):
        k = rnd.randbytes(rnd.choice((4, 20, 33)))
        v = rnd.randbytes(rnd.choice((0, 8, 24)))
        assert table.put(k, v, ABSENT) == model.get(k, ABSENT)
        model[k] = v
    assert table.num_buckets >= len(model) // LOAD  # split as it grew: about LOAD entries per bucket
    check_same(table, model)
    for k in list(model)[::3]:  # resize values (append + garbage), then remove a third
        assert table.put(k, b"longer value " + k) == model[k]
        model[k] = b"longer value " + k
    for k in list(model)[1::3]:
        assert table.remove(k) == model.pop(k)
    check_same(table, model)
    # Garbage stays bounded: a bucket is compacted once its garbage outweighs its live records.
    assert table.packed_bytes < 2 * PackedTable(model).packed_bytes + 64 * table.num_buckets


def test_garbage_is_compacted():
    table = PackedTable()
    table.put(b"k", b"v" * 10)
    for n in range(1, 200):
        table.put(b"k", b"v" * (10 + n % 7))  # a new size each time: appended, the old one garbage
    assert table.packed_bytes < 16 + 1 + 16 + 2 * 64  # compacted once garbage outweighs live data
    assert table.get(b"k") == b"v" * (10 + 199 % 7)


@pytest.mark.parametrize("value_size", [8, 24, 200, None])
def test_memory_estimate_is_close_to_what_python_allocates(value_size):
    rnd = random.Random(value_size)
    data = {rnd.randbytes(20): rnd.randbytes(value_size or rnd.randrange(40)) for _ in range(30_000)}
    for build in ("bulk", "puts"):
        tracemalloc.start()
        try:
            if build == "bulk":
                table = PackedTable(data)
            else:
                table = PackedTable()
                for k, v in data.items():
                    table.put(k, v)
            allocated = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert table.uniform == (value_size is not None)
        assert 0.85 < table.memory_bytes() / allocated < 1.15, (build, table.memory_bytes(), allocated)
        del table


def _columns(model: dict, chunk: int):
    """`model` as Arrow (keys, values) chunks of `chunk` rows, every other chunk a slice of a larger array,
    every third one large binary."""
    import pyarrow as pa  # noqa: PLC0415
    items = list(model.items())
    keys, values = [], []
    for i in range(0, len(items), chunk):
        part = items[i:i + chunk]
        k = pa.array([b"pad"] + [k for k, _ in part], pa.binary())
        v = pa.array([b"pad"] + [v for _, v in part], pa.binary())
        sliced, large = (i // chunk) % 2, (i // chunk) % 3 == 2
        kind = pa.large_binary() if large else pa.binary()
        keys.append(k.cast(kind).slice(1) if sliced else pa.array([k for k, _ in part], kind))
        values.append(v.cast(kind).slice(1) if sliced else pa.array([v for _, v in part], kind))
    return keys, values


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.one_of(st.dictionaries(keys, values, max_size=200),
                         st.dictionaries(uniform_keys, uniform_values, max_size=200)),
       chunk=st.integers(1, 64), operations=ops)
def test_a_table_built_from_columns_matches_a_dict_and_takes_writes(initial, chunk, operations):
    table, model = PackedTable.from_writes(WriteLog.of(zip(*_columns(initial, chunk)))), dict(initial)
    uniform = bool(initial) and len({len(k) for k in initial}) == 1 and len({len(v) for v in initial.values()}) == 1 \
        and len(next(iter(initial))) > 0
    assert table.uniform == (uniform or not initial)
    check_same(table, model)
    assert table.packed_bytes == PackedTable(initial).packed_bytes  # the same buckets as the dict-fed build
    run_ops(table, model, operations)
    check_same(table, model)


def test_a_table_built_from_columns_keeps_every_entry_of_a_large_state():
    rnd = random.Random(11)
    model = {rnd.randbytes(rnd.choice((12, 20, 21))): rnd.randbytes(rnd.choice((0, 24, 40))) for _ in range(50_000)}
    table = PackedTable.from_writes(WriteLog.of(zip(*_columns(model, 7_000))))
    assert table.num_buckets == PackedTable(model).num_buckets
    check_same(table, model)


def _log_of(writes: list[tuple[bytes, bytes | None]], chunk: int):
    import pyarrow as pa  # noqa: PLC0415
    return WriteLog.of((pa.array([k for k, _ in writes[i:i + chunk]], pa.binary()),
                        pa.array([v for _, v in writes[i:i + chunk]], pa.binary()))
                       for i in range(0, len(writes), chunk))


def _replayed(writes: list[tuple[bytes, bytes | None]]) -> dict[bytes, bytes]:
    model: dict[bytes, bytes] = {}
    for k, v in writes:
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    return model


write_logs = st.lists(st.tuples(st.sampled_from([b"k%d" % i for i in range(40)] + [b"", b"longer-key-0"]),
                                st.one_of(st.none(), st.sampled_from([b"", b"v1", b"v2", b"value-3"]))),
                      max_size=300)
uniform_logs = st.lists(st.tuples(st.sampled_from([b"k%02d" % i for i in range(60)]),
                                  st.one_of(st.none(), st.sampled_from([b"v1", b"v2", b"v3"]))), max_size=300)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=st.one_of(write_logs, uniform_logs), chunk=st.integers(1, 64), colliding=st.booleans(),
       piece_rows=st.sampled_from([1, 7, 1 << 18]))
def test_a_table_built_from_a_log_of_writes_holds_each_keys_last_write(writes, chunk, colliding, piece_rows):
    # Colliding: every key has one hash, so equal hashes hold different keys (the clash path). Small pieces:
    # the buckets are packed over many pieces.
    original, original_piece = packed_table._hash, packed_table._PIECE_ROWS
    packed_table._PIECE_ROWS = piece_rows
    if colliding:
        packed_table._hash = lambda k: 0x5A5A5A5A_00000001
    try:
        table, model = PackedTable.from_writes(_log_of(writes, chunk)), _replayed(writes)
        check_same(table, model)
        assert table.packed_bytes == PackedTable(model).packed_bytes
        run_ops(table, model, [("put", b"k1", b"v9"), ("remove", b"k2", None)])
        check_same(table, model)
    finally:
        packed_table._hash, packed_table._PIECE_ROWS = original, original_piece


def test_a_large_log_with_rewrites_and_deletes_replays_like_a_dict(monkeypatch):
    monkeypatch.setattr(packed_table, "_PIECE_ROWS", 10_000)   # packed over several pieces
    rnd = random.Random(12)
    keys = [rnd.randbytes(20) for _ in range(60_000)]
    writes = [(k, rnd.randbytes(24)) for k in keys]
    for _ in range(3):   # deltas: rewrites, deletes, new keys, in pieces across the buckets
        writes += [(rnd.choice(keys), None if rnd.random() < 0.2 else rnd.randbytes(24)) for _ in range(40_000)]
        writes += [(rnd.randbytes(20), rnd.randbytes(24)) for _ in range(5_000)]
    model = _replayed(writes)
    table = PackedTable.from_writes(_log_of(writes, 9_000))
    assert table.uniform and table.num_buckets == PackedTable(model).num_buckets
    check_same(table, model)
    mixed = writes + [(b"short", b"v")]   # one write of other sizes: the general layout
    table = PackedTable.from_writes(_log_of(mixed, 9_000))
    assert not table.uniform
    check_same(table, _replayed(mixed))
