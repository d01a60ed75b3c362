"""python/bench/checkpoint_bytes.py: file kinds, per-version sums, Arrow columns and HDFS provider files."""
import dataclasses
import os
import struct
import subprocess
import sys

from sparkstate.config import Settings
from sparkstate.engine import Store, StoreSpec

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "python", "bench")
sys.path.insert(0, BENCH)
import checkpoint_bytes as cb  # noqa: E402


def _hdfs_file(path, records, raw_block: bool) -> int:
    """An HDFS provider file as lz4-java's LZ4BlockOutputStream writes it; returns the raw byte count."""
    import pyarrow as pa
    raw = b"".join(struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in records)
    raw += struct.pack(">i", -1)
    block = raw if raw_block else pa.Codec("lz4_raw").compress(raw).to_pybytes()
    token = (0x10 if raw_block else 0x20) | 0x0A
    with open(path, "wb") as f:
        f.write(b"LZ4Block" + bytes([token]) + struct.pack("<iii", len(block), len(raw), 0) + block)
        f.write(b"LZ4Block" + bytes([0x10 | 0x0A]) + struct.pack("<iii", 0, 0, 0))
    return len(raw)


def test_a_heap_store_and_hdfs_files_are_broken_down(tmp_path):
    store_dir = tmp_path / "ckpt" / "state" / "0" / "0"
    spec = StoreSpec.standalone("file:" + str(store_dir), dataclasses.replace(Settings(), backend="heap",
                                                                              heap_snapshot_every=2,
                                                                              heap_snapshot_min_delta_percent=0))
    s = Store(spec, str(tmp_path / "local"))
    s.load(0)
    for v in range(1, 4):
        s.apply_batch([(b"\0\0\0\1" + i.to_bytes(16, "little"), bytes(8) + (i * v).to_bytes(16, "little"))
                       for i in range(1000)])
        s.commit()
        s.load(v)
    s._backend.wait_for_background(60)
    s.release()
    hdfs = tmp_path / "ckpt" / "state" / "0" / "1"
    hdfs.mkdir()
    raw1 = _hdfs_file(hdfs / "1.delta", [(b"k%d" % i, b"v") for i in range(50)], raw_block=True)
    raw2 = _hdfs_file(hdfs / "2.delta", [(b"k%d" % i, b"w" * 10) for i in range(70)], raw_block=False)
    (hdfs / ".1.delta.crc").write_bytes(b"crc")

    kinds = cb.scan(str(tmp_path / "ckpt" / "state"))
    deltas = kinds["sparkstate arrow delta"]
    assert deltas["files"] == 3 and deltas["versions"] == 3 and deltas["rows"] == 3000
    assert set(deltas["columns"]) == {"rows", "key_lengths", "keys", "value_lengths", "values"}
    assert deltas["formats"] == ["heap-delta v3"] and deltas["codecs"] == [Settings().heap_compression]
    stored = sum(c[0] for c in deltas["columns"].values())
    assert stored + deltas["framing"] >= deltas["bytes"] - 64 * deltas["files"]  # padding only
    assert kinds["sparkstate manifest"]["files"] == 3
    assert kinds["hdfs delta"]["rows"] == 120 and kinds["hdfs delta"]["raw"] == raw1 + raw2
    assert kinds["hdfs delta"]["versions"] == 2 and kinds["crc"]["files"] == 1

    out = subprocess.run([sys.executable, os.path.join(BENCH, "checkpoint_bytes.py"), str(tmp_path / "ckpt")],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| hdfs delta | 2 |" in out.stdout and "| keys |" in out.stdout
