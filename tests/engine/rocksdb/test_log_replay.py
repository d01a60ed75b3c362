"""Change logs replayed as one ingested SST file plus deletes: the database ends as if every logged write
had been applied in order."""
from __future__ import annotations

import dataclasses
import os
import random

import pyarrow as pa
import pytest
import rocksdict

from sparkstate.config import Settings
from sparkstate.engine.rocksdb.log_replay import last_writes, replay_file_options, replay_logs, stable_key_order
from sparkstate.engine.rocksdb.options import make_options


def _columns(writes: list[tuple[bytes, bytes | None]], batch_rows: int) -> list[tuple[pa.Array, pa.Array]]:
    return [(pa.array([k for k, _ in writes[i:i + batch_rows]], pa.binary()),
             pa.array([v for _, v in writes[i:i + batch_rows]], pa.binary()))
            for i in range(0, len(writes), batch_rows)]


def _db(path) -> rocksdict.Rdict:
    return rocksdict.Rdict(str(path), make_options(Settings(), None))


def _all(db: rocksdict.Rdict) -> list[tuple[bytes, bytes]]:
    it = db.iter()
    it.seek_to_first()
    out = []
    while it.valid():
        out.append((it.key(), it.value()))
        it.next()
    return out


def test_each_key_keeps_its_last_write_in_byte_order():
    writes = [(b"b", b"1"), (b"a", b"1"), (b"b", None), (b"a\x00", b"x"), (b"\xff", b"hi"), (b"b", b"3"),
              (b"a", None), (b"", b"empty key")]
    keys, values = last_writes(_columns(writes, 3))
    assert list(zip(keys.to_pylist(), values.to_pylist())) == [
        (b"", b"empty key"), (b"a", None), (b"a\x00", b"x"), (b"b", b"3"), (b"\xff", b"hi")]


def test_no_logs_write_nothing(tmp_path):
    keys, values = last_writes([])
    assert len(keys) == len(values) == 0
    db = _db(tmp_path / "db")
    db[b"k"] = b"v"
    assert replay_logs(db, make_options(Settings(), None), [], str(tmp_path / "r.sst")) == 0
    assert _all(db) == [(b"k", b"v")]
    db.close()


@pytest.mark.parametrize("width", [1, 3, 8, 9, 16, 20])
def test_keys_of_one_width_sort_by_their_bytes_and_equal_keys_keep_their_order(width):
    rnd = random.Random(width)
    pool = [rnd.randbytes(width) for _ in range(50)] + [b"\x00" * width, b"\xff" * width]
    keys = [rnd.choice(pool) for _ in range(3000)]
    column = pa.array([b"-" * width] * 7 + keys, pa.binary()).slice(7)  # an offset into the buffers, too
    assert stable_key_order(column).to_pylist() == sorted(range(len(keys)), key=keys.__getitem__)


def test_keys_of_varied_widths_sort_by_their_bytes_and_equal_keys_keep_their_order():
    rnd = random.Random(5)
    pool = [rnd.randbytes(rnd.choice([3, 5])) for _ in range(40)] + [b"", b"\x00"]
    keys = [rnd.choice(pool) for _ in range(2000)]
    assert stable_key_order(pa.array(keys, pa.binary())).to_pylist() == sorted(range(len(keys)),
                                                                               key=keys.__getitem__)


@pytest.mark.parametrize("seed,width", [(1, None), (2, None), (3, None), (4, 12)])
def test_the_database_ends_as_the_writes_applied_in_order(tmp_path, seed, width):
    rnd = random.Random(seed)

    def key() -> bytes:  # varied lengths and bytes, so byte order and prefixes matter; or one width
        if width is not None:
            return bytes([rnd.randrange(4)]) + bytes(width - 2) + bytes([rnd.randrange(256)])  # 1,024 keys
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 6)))

    db = _db(tmp_path / "db")
    expected: dict[bytes, bytes] = {}
    for _ in range(2000):
        k, v = key(), rnd.randbytes(rnd.randrange(0, 20))
        db[k] = v
        expected[k] = v
    db.flush(wait=True)  # the base lives in SST files, as a restored SST set does
    writes: list[tuple[bytes, bytes | None]] = []
    for _ in range(5000):
        k = key()
        v = None if rnd.random() < 0.3 else rnd.randbytes(rnd.randrange(0, 20))
        writes.append((k, v))
        if v is None:
            expected.pop(k, None)
        else:
            expected[k] = v
    sst = tmp_path / "replay.sst"
    replay_logs(db, make_options(Settings(), None), _columns(writes, 700), str(sst))
    assert _all(db) == sorted(expected.items())
    assert not os.path.exists(sst)
    db.close()
    reopened = _db(tmp_path / "db")  # the ingested file is part of the database
    assert _all(reopened) == sorted(expected.items())
    reopened.close()


def test_only_deletes_need_no_sst_file(tmp_path):
    db = _db(tmp_path / "db")
    db[b"a"], db[b"b"] = b"1", b"2"
    replay_logs(db, make_options(Settings(), None), _columns([(b"a", None), (b"zz", None)], 10),
                str(tmp_path / "r.sst"))
    assert _all(db) == [(b"b", b"2")]
    assert not os.path.exists(tmp_path / "r.sst")
    db.close()



def _file_size(tmp_path, options: rocksdict.Options, name: str) -> int:
    writer = rocksdict.SstFileWriter(options=options)
    writer.open(str(tmp_path / name))
    for i in range(5000):
        writer[b"key-%06d" % i] = b"value-%d" % (i * 7919 % 1000)
    writer.finish()
    return os.path.getsize(tmp_path / name)


@pytest.mark.parametrize("codec, written", [("zstd", "lz4"), ("lz4", "lz4"), ("none", "none")])
def test_the_replay_file_trades_zstd_for_lz4_and_keeps_other_codecs(tmp_path, codec, written):
    def options(c: str) -> rocksdict.Options:
        return make_options(dataclasses.replace(Settings(), rocksdb_compression=c), None)

    sizes = {c: _file_size(tmp_path, options(c), c + ".sst") for c in ("zstd", "lz4", "none")}
    assert len(set(sizes.values())) == 3  # the codecs tell apart by the file's size
    replay = replay_file_options(dataclasses.replace(Settings(), rocksdb_compression=codec))
    assert _file_size(tmp_path, replay, "replay.sst") == sizes[written]
