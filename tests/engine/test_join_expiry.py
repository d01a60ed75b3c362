"""A join side's two stores expire a key together: the count store by its stamps, the values store by
deleting the rows no visible count covers (engine/join_expiry.py)."""
from __future__ import annotations

import dataclasses
import json
import struct

import pytest

from sparkstate.engine import Store
from sparkstate.engine.join_expiry import IndexedKeys
from sparkstate.engine.ttl import STAMP_BYTES, StampedBackend

from .conftest import contents, make_spec, settle
from .test_ttl import T0, TTL, FakeClock

KG = b"\x00\x00\x00\x07"


def unsafe_row(columns: list[tuple[str, object]]) -> bytes:
    """Spark's UnsafeRow of `columns` ((type, value); None is null), written the way its writer does."""
    n = len(columns)
    bits, fixed = (n + 63) // 64 * 8, (n + 63) // 64 * 8 + 8 * n
    nulls, slots, tail = 0, b"", b""
    for i, (kind, value) in enumerate(columns):
        if value is None:
            nulls |= 1 << i
            slots += bytes(8)
        elif kind == "long":
            slots += struct.pack("<q", value)
        elif kind == "integer":
            slots += struct.pack("<i", value) + bytes(4)
        else:  # string
            data = value.encode()
            slots += ((fixed + len(tail)) << 32 | len(data)).to_bytes(8, "little")
            tail += data + bytes(-len(data) % 8)
    return nulls.to_bytes(bits, "little") + slots + tail


def schema(types: list[str]) -> str:
    return json.dumps({"type": "struct", "fields": [{"name": f"c{i}", "type": t, "nullable": True, "metadata": {}}
                                                    for i, t in enumerate(types)]})


@pytest.mark.parametrize("columns", [
    [("string", "alpha")],
    [("integer", 7), ("string", "a longer string of bytes"), ("string", None), ("long", -3)],
    [("string", None), ("integer", None)],
    [("string", "x" * i) for i in range(63)] + [("long", 9)],   # 64 key columns: the index needs a 2nd word
    [("long", i) for i in range(70)],
])
def test_a_values_key_splits_into_its_count_key_and_index(columns):
    keys = IndexedKeys(schema([kind for kind, _ in columns] + ["long"]))
    for index in (0, 1, 12345):
        assert keys.split(KG + unsafe_row(columns + [("long", index)])) == (KG + unsafe_row(columns), index)


def test_bytes_that_are_no_such_row_are_not_split():
    keys = IndexedKeys(schema(["string", "long"]))
    assert keys.split(KG + b"\x00" * 8) is None
    row = bytearray(unsafe_row([("string", "abc"), ("long", 0)]))
    row[8:16] = ((500 << 32) | 3).to_bytes(8, "little")  # an offset past the row
    assert keys.split(KG + bytes(row)) is None


def test_a_schema_without_a_long_index_last_is_refused():
    with pytest.raises(ValueError, match="not a join"):
        IndexedKeys(schema(["string", "string"]))


# ---- the two stores of one join side -------------------------------------------------------------------

def count_key(k: str) -> bytes:
    return KG + unsafe_row([("string", k)])


def values_key(k: str, index: int) -> bytes:
    return KG + unsafe_row([("string", k), ("long", index)])


def count_value(n: int) -> bytes:
    return unsafe_row([("long", n)])


@pytest.fixture
def join_side(tmp_path, backend, monkeypatch):
    """(clock, count store, values store) of the left side of operator 3, partition 1, with a ttl."""
    clock = FakeClock(monkeypatch)
    stores: list[Store] = []
    root = str(tmp_path / "ckpt")

    def partners(spec, name):
        return [s for s in stores if s.spec.store_name == name and s.spec.same_partition(spec)]

    for name, key_types in (("left-keyToNumValues", ["string"]), ("left-keyWithIndexToValue", ["string", "long"])):
        spec = make_spec(f"file:{root}/state/3/1/{name}", backend=backend, ttl_ms=TTL)
        spec = dataclasses.replace(spec, operator_id=3, store_name=name, key_schema_json=schema(key_types))
        stores.append(Store(spec, str(tmp_path / "local" / name), partners=partners))
    yield clock, stores[0], stores[1]
    for s in stores:
        s.close()


def side_batch(clock, counts: Store, values: Store, version: int, rows: dict[str, list[bytes]],
               commit_at: int, values_first: bool = False) -> tuple[int, int]:
    """One batch of a join side as Spark runs it: read each key's count, append its new rows after it;
    commit both stores (in either order). Returns the keys each store deleted."""
    counts.load(version)
    values.load(version)
    for k, new in rows.items():
        old = counts.get(count_key(k))
        n = 0 if old is None else struct.unpack_from("<q", old, 8)[0]
        values.apply_batch([(values_key(k, n + i), v) for i, v in enumerate(new)])
        counts.apply_batch([(count_key(k), count_value(n + len(new)))])
    clock.at(commit_at)
    order = (values, counts) if values_first else (counts, values)
    deleted = {id(s): s.commit().metrics["sparkstateTtlExpiredKeys"] for s in order}
    settle(counts)
    settle(values)
    return deleted[id(counts)], deleted[id(values)]


@pytest.mark.parametrize("values_first", [False, True], ids=["counts-first", "values-first"])
def test_an_expired_key_loses_its_count_and_its_rows_together(join_side, values_first):
    clock, counts, values = join_side
    assert side_batch(clock, counts, values, 0, {"a": [b"a0", b"a1"], "b": [b"b0"]}, T0 + 1, values_first) == (0, 0)
    # Batch 1 runs at T0 + 1 (version 1's commit): nothing is expired; b gets a second row.
    assert side_batch(clock, counts, values, 1, {"b": [b"b1"]}, T0 + TTL + 1, values_first) == (0, 0)
    # Batch 2 runs at T0 + TTL + 1: a (written at T0) is expired and comes back with one row; b (written at
    # T0 + 1) is alive. a's old second row is past its new count: an orphan, deleted.
    assert side_batch(clock, counts, values, 2, {"a": [b"a-new"]}, T0 + 2 * TTL + 2, values_first) == (0, 1)
    values.load(3)
    assert contents(values) == {values_key("a", 0): b"a-new", values_key("b", 0): b"b0", values_key("b", 1): b"b1"}
    # Batch 3 runs at T0 + 2 TTL + 2: b (last written at T0 + 1) and a (at T0 + TTL + 1) are both expired.
    assert side_batch(clock, counts, values, 3, {}, T0 + 2 * TTL + 3, values_first) == (2, 3)
    counts.load(4)
    values.load(4)
    assert contents(counts) == {} and contents(values) == {}


def test_the_values_store_carries_no_stamps(join_side):
    clock, counts, values = join_side
    side_batch(clock, counts, values, 0, {"a": [b"a0"]}, T0 + 1)
    values.load(1)
    counts.load(1)
    assert not isinstance(values._backend, StampedBackend) and values._backend.get(values_key("a", 0)) == b"a0"
    assert len(counts._backend.inner.get(count_key("a"))) == STAMP_BYTES + len(count_value(1))


def test_without_its_count_store_open_the_values_store_deletes_nothing(join_side, caplog):
    clock, counts, values = join_side
    side_batch(clock, counts, values, 0, {"a": [b"a0", b"a1"]}, T0 + TTL + 1)
    counts.release()  # not in this worker any more
    values.load(1)
    clock.at(T0 + 2 * TTL)
    assert values.commit().metrics["sparkstateTtlExpiredKeys"] == 0
    assert "found no open left-keyToNumValues" in caplog.text
    settle(values)
    values.load(2)
    assert len(contents(values)) == 2


def test_a_count_store_at_another_version_is_not_asked(join_side):
    clock, counts, values = join_side
    side_batch(clock, counts, values, 0, {"a": [b"a0"]}, T0 + 1)
    side_batch(clock, counts, values, 1, {"a": [b"a1"]}, T0 + TTL + 2)
    counts.load(1)  # the values store commits version 3 from 2, the count store holds 1
    values.load(2)
    clock.at(T0 + 3 * TTL)
    assert values.commit().metrics["sparkstateTtlExpiredKeys"] == 0


def test_partners_share_the_query_operator_and_partition(tmp_path):
    def spec(root: str, op: int, part: int, name: str):
        base = make_spec(f"file:{root}/state/{op}/{part}/{name}")
        return dataclasses.replace(base, operator_id=op, partition_id=part, store_name=name)

    values = spec("/q1", 3, 1, "left-keyWithIndexToValue")
    assert values.same_partition(spec("/q1", 3, 1, "left-keyToNumValues"))
    assert not values.same_partition(spec("/q1", 3, 2, "left-keyToNumValues"))
    assert not values.same_partition(spec("/q1", 4, 1, "left-keyToNumValues"))
    assert not values.same_partition(spec("/q2", 3, 1, "left-keyToNumValues"))
