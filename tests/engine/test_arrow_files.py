"""Arrow state files: the block format (3) written for deltas and full snapshots, and formats 1 and 2 read."""
import struct

import numpy as np
import pyarrow as pa
import pytest

from sparkstate.engine import arrow_files as hf
from sparkstate.engine.arrow_columns import binary_column
from sparkstate.errors import CorruptCheckpointError


def aggregation_rows(n: int, seed: int = 1) -> list[tuple[bytes, bytes]]:
    """Rows shaped like a streaming aggregation's: a random key group + an UnsafeRow of one long key, and
    an UnsafeRow of two small longs (count, sum)."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(-2**31, 2**31, n)
    keys = rng.choice(1_000_000, n, replace=False)
    counts = rng.integers(1, 6, n)
    return [(struct.pack(">i", int(g)) + bytes(8) + struct.pack("<q", int(k)),
             bytes(8) + struct.pack("<qq", int(c), int(c) * 500 + int(k) % 300))
            for g, k, c in zip(groups, keys, counts)]


MIXED = [(b"\0\0\0\1" + b"k" * (i % 5), None if i % 7 == 0 else b"v" * (i % 3)) for i in range(200)]
REMOVES_OF_ONE_WIDTH = [(b"\0\0\0\1%04d" % i, None if i % 5 == 0 else b"%08d" % i) for i in range(300)]
CASES = {"mixed lengths": MIXED, "one width with removes": REMOVES_OF_ONE_WIDTH,
         "aggregation": aggregation_rows(5000), "empty": [], "one row": [(b"\0\0\0\1k", b"v")],
         "empty key and value": [(b"", b""), (b"", b"")], "only removes": [(b"\0\0\0\1a", None), (b"\0\0\0\1b", None)],
         "more rows than a block": aggregation_rows(hf.BATCH_ROWS + 3)}
FORMATS = [(hf.KIND_DELTA, "1"), (hf.KIND_DELTA, "2"), (hf.KIND_DELTA, "3"), (hf.KIND_FULL, "1"), (hf.KIND_FULL, "3")]


def read_rows(path, kind, version=5) -> list[tuple[bytes, bytes | None]]:
    return [(k, v) for keys, values in hf.read(str(path), kind, version, "test") for k, v in zip(keys, values)]


@pytest.mark.parametrize("kind,fmt", FORMATS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("codec", ["zstd", "lz4", "none"])
def test_every_readable_format_round_trips(tmp_path, kind, fmt, case, codec):
    rows = CASES[case]
    if kind == hf.KIND_FULL and any(v is None for _, v in rows):
        rows = [(k, v) for k, v in rows if v is not None]
    path = tmp_path / "f.arrow"
    path.write_bytes(hf.encode(kind, 5, rows, codec, fmt))
    assert read_rows(path, kind) == rows


def test_one_width_columns_are_stored_byte_transposed():
    rows = [(b"ab" + bytes([i]), b"xyz" + bytes([i, i])) for i in range(4)] + [(b"cd\x09", None)]
    block = hf._items_block(rows)
    assert block.num_rows == 1 and block.column("rows")[0].as_py() == 5
    assert block.column("keys")[0].as_py() == b"aaaac" + b"bbbbd" + bytes([0, 1, 2, 3, 9])
    assert block.column("values")[0].as_py() == b"xxxx" + b"yyyy" + b"zzzz" + bytes([0, 1, 2, 3]) * 2
    assert np.frombuffer(block.column("value_lengths")[0].as_py(), "<i4").tolist() == [5, 5, 5, 5, -1]
    mixed = hf._items_block([(b"a", b"xy"), (b"bc", b"z")])
    assert mixed.column("keys")[0].as_py() == b"abc" and mixed.column("values")[0].as_py() == b"xyz"


def test_arrow_columns_and_python_rows_make_the_same_block():
    """The full snapshot writes blocks from Arrow columns (sliced, with nulls), the journal from rows."""
    rows = REMOVES_OF_ONE_WIDTH + MIXED
    keys, values = binary_column([k for k, _ in rows]), binary_column([v for _, v in rows])
    for start, length in [(0, len(rows)), (7, 150), (290, 20)]:
        chunk = rows[start:start + length]
        from_arrays = hf._arrays_block(keys.slice(start, length), values.slice(start, length))
        assert from_arrays.equals(hf._items_block(chunk))


def test_blocks_of_aggregation_rows_take_under_half_the_row_format():
    """What the block format is for: fixed-width UnsafeRows with a random key group, as an aggregation
    writes them. 45,000 such rows measured 1.40 MB in format 2 and 0.45 MB in blocks (lz4; zstd 0.94 and 0.42 MB)."""
    rows = aggregation_rows(20_000)
    for codec in ("lz4", "zstd"):
        rowwise = len(hf.encode(hf.KIND_DELTA, 1, rows, codec, hf.JOURNAL_FORMAT_VERSION))
        blocks = len(hf.encode(hf.KIND_DELTA, 1, rows, codec, hf.BLOCK_FORMAT_VERSION))
        assert blocks < rowwise / 2, (codec, blocks, rowwise)
        assert blocks < 11 * len(rows), (codec, blocks)  # 4 random key-group bytes + ~3 of key + ~2 of value


def _write_block_stream(path, batch, version=5):
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, hf.schema(hf.KIND_DELTA, version, -1)) as w:
        w.write_batch(batch)


def test_a_block_whose_lengths_do_not_match_its_bytes_is_refused_naming_the_file(tmp_path):
    good = hf._items_block([(b"\0\0\0\1a", b"x"), (b"\0\0\0\1b", b"y")])
    cols = good.columns
    short = pa.array([b"\0\0\0\1a\0\0\0"], pa.binary())  # 9 bytes of keys for lengths 5 + 5
    bad = pa.RecordBatch.from_arrays([cols[0], cols[1], short, cols[3], cols[4]], schema=good.schema)
    path = tmp_path / "delta-5.arrow"
    _write_block_stream(path, bad)
    with pytest.raises(CorruptCheckpointError, match=r"files/5-x-delta-5\.arrow has a damaged block: keys"):
        list(hf.read(str(path), hf.KIND_DELTA, 5, "files/5-x-delta-5.arrow"))
    wrong_count = pa.RecordBatch.from_arrays([pa.array([3], pa.int32())] + cols[1:], schema=good.schema)
    _write_block_stream(path, wrong_count)
    with pytest.raises(CorruptCheckpointError, match="damaged block: keys: 8 bytes of lengths for 3 rows"):
        read_rows(path, hf.KIND_DELTA)


def test_format_3_needs_its_columns_and_its_container(tmp_path):
    rowwise = tmp_path / "rows.arrow"
    batch = hf._batch([(b"\0\0\0\1a", b"x")])
    with pa.OSFile(str(rowwise), "wb") as sink, pa.ipc.new_stream(sink, batch.schema.with_metadata(
            hf.schema(hf.KIND_DELTA, 5, -1).metadata)) as w:
        w.write_batch(batch)
    with pytest.raises(CorruptCheckpointError, match="format version 3 but not its columns"):
        read_rows(rowwise, hf.KIND_DELTA)
    as_file = tmp_path / "delta-as-file.arrow"
    with pa.OSFile(str(as_file), "wb") as sink, pa.ipc.new_file(sink, hf.schema(hf.KIND_DELTA, 5, -1)) as w:
        w.write_batch(hf._items_block([(b"\0\0\0\1a", b"x")]))
    with pytest.raises(CorruptCheckpointError, match="heap-delta format version 3 must be an Arrow IPC stream"):
        read_rows(as_file, hf.KIND_DELTA)
    full_as_stream = tmp_path / "full-as-stream.arrow"
    with pa.OSFile(str(full_as_stream), "wb") as sink, pa.ipc.new_stream(sink, hf.schema(hf.KIND_FULL, 5, -1)) as w:
        w.write_batch(hf._items_block([(b"\0\0\0\1a", b"x")]))
    with pytest.raises(CorruptCheckpointError, match="heap-full format version 3 must be an Arrow IPC file"):
        read_rows(full_as_stream, hf.KIND_FULL)


def test_a_full_snapshot_block_with_a_removed_value_is_refused(tmp_path):
    path = tmp_path / "full-5.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, hf.schema(hf.KIND_FULL, 5, -1)) as w:
        w.write_batch(hf._items_block([(b"\0\0\0\1a", b"x"), (b"\0\0\0\1b", None)]))
    with pytest.raises(CorruptCheckpointError, match="is a full snapshot with 0 null keys and 1 null values"):
        read_rows(path, hf.KIND_FULL)


def test_streaming_writer_splits_large_column_batches_into_blocks(tmp_path):
    rows = aggregation_rows(hf.BATCH_ROWS + 10)
    keys, values = binary_column([k for k, _ in rows]), binary_column([v for _, v in rows])
    path = tmp_path / "full-5.arrow"
    with open(path, "wb") as f:
        w = hf.StreamingWriter(f, hf.KIND_FULL, 5, "zstd")
        w.write_arrays(keys.slice(3), values.slice(3))
        w.close()
    assert w.rows == len(rows) - 3
    assert [len(k) for k, _ in hf.read_columns(str(path), hf.KIND_FULL, 5, "test")] == [hf.BATCH_ROWS, 7]
    assert read_rows(path, hf.KIND_FULL) == rows[3:]
