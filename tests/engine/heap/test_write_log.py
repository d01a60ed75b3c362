import numpy as np
import pyarrow as pa
import pytest

from sparkstate.engine import arrow_columns
from sparkstate.engine.heap.packed_table import PackedTable
from sparkstate.engine.heap.write_log import WriteLog, last_writes, radix_order


def test_a_log_with_null_keys_or_missing_values_is_refused():
    with pytest.raises(ValueError, match="null keys"):
        WriteLog.of([(pa.array([b"a", None]), pa.array([b"1", b"2"], pa.large_binary()))])
    with pytest.raises(ValueError, match="1 keys with 2 values"):
        WriteLog.of(zip([pa.array([b"a"])], [pa.array([b"1", b"2"])]))


def test_last_writes_keeps_each_keys_last_row_and_drops_deletes():
    log = WriteLog.of([(pa.array([b"a", b"b", b"a", b"c"]), pa.array([b"1", b"2", b"3", b"4"])),
                       (pa.array([b"b", b"c", b"d"]), pa.array([None, b"5", None]))])
    assert sorted(last_writes(log, log.hashes(hash)).tolist()) == [2, 5]   # a=3, c=5; b and d deleted


def test_last_writes_tells_keys_with_one_hash_apart():
    log = WriteLog.of([(pa.array([b"x", b"y", b"x", b"z", b"y"]), pa.array([b"1", b"2", b"3", None, b"5"]))])
    hashes = np.array([-7, -7, -7, 4, -7], np.int64)   # x and y clash; negative: read as unsigned
    assert sorted(last_writes(log, hashes).tolist()) == [2, 4]


@pytest.mark.parametrize("binary_bytes", [0, 1 << 40])
def test_a_log_is_one_binary_column_each_or_large_binary_past_the_limit(monkeypatch, binary_bytes):
    monkeypatch.setattr(arrow_columns, "MAX_BINARY_BYTES", binary_bytes)
    log = WriteLog.of([(pa.array([b"a", b"b"]), pa.array([b"1", None])),
                       (pa.array([b"c"], pa.large_binary()), pa.array([b"3"], pa.large_binary()))])
    kind = pa.large_binary() if binary_bytes == 0 else pa.binary()
    assert log.keys.type == log.values.type == kind
    assert log.keys.to_pylist() == [b"a", b"b", b"c"] and log.values.to_pylist() == [b"1", None, b"3"]
    table = PackedTable.from_writes(log)
    assert dict(table.items()) == {b"a": b"1", b"c": b"3"}


def test_an_empty_log_keeps_nothing():
    log = WriteLog.of([])
    assert len(log) == 0 and len(last_writes(log, log.hashes(hash))) == 0


def test_radix_order_sorts_64_bit_hashes_as_unsigned_and_stably():
    rng = np.random.default_rng(7)
    values = rng.integers(-2 ** 63, 2 ** 63 - 1, 50_000, dtype=np.int64)
    values[100:200] = values[5]   # a run of equals keeps row order
    order = radix_order(values, 64)
    assert (np.diff(values.view(np.uint64)[order].astype(object)) >= 0).all()
    equal = order[values[order] == values[5]]
    assert (np.diff(equal) > 0).all()


@pytest.mark.parametrize("num_buckets", [1, 5, 2 ** 16, 2 ** 16 + 1, 2 ** 20, 2 ** 33])
def test_radix_order_groups_rows_by_bucket_whatever_the_bucket_count(num_buckets):
    rng = np.random.default_rng(num_buckets)
    buckets = rng.integers(0, num_buckets, 100_000, dtype=np.int64)
    buckets[:3] = [0, num_buckets - 1, num_buckets - 1]   # both ends of the range
    order = radix_order(buckets, max(num_buckets - 1, 1).bit_length())
    assert sorted(order.tolist()) == list(range(len(buckets)))   # a permutation
    assert (np.diff(buckets[order]) >= 0).all()
