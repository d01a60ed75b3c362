import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from sparkstate.engine import arrow_columns
from sparkstate.engine.arrow_columns import binary_column, bools, int_column, validity


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
@pytest.mark.parametrize("items", [[], [b""], [b"a", b"", b"xyz"], [None], [b"a", None, b"", None, b"bc"]])
def test_binary_column_is_what_pa_array_makes(kind, items):
    column = binary_column(items, kind)
    assert column.equals(pa.array(items, kind))
    column.validate(full=True)


def test_a_binary_column_past_32_bit_offsets_is_refused(monkeypatch):
    monkeypatch.setattr(arrow_columns, "MAX_BINARY_BYTES", 3)
    with pytest.raises(ValueError, match="use large_binary"):
        binary_column([b"ab", b"cd"])
    assert binary_column([b"ab", b"cd"], pa.large_binary()).to_pylist() == [b"ab", b"cd"]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_column_shares_a_numpy_arrays_values(dtype):
    values = np.arange(-3, 7, dtype=dtype)[::2]   # not contiguous: copied first
    assert int_column(values).to_pylist() == values.tolist()


def test_validity_and_bools_read_bitmaps_at_any_offset():
    column = pa.array([b"a", None, b"b", None, None, b"c"] * 3, pa.binary()).slice(5, 9)
    assert validity(column).tolist() == [v is not None for v in column.to_pylist()]
    assert validity(pa.array([b"a", b"b"])).tolist() == [True, True]
    flags = pa.array([True, False, True, True, False] * 5).slice(3, 17)
    assert bools(flags).tolist() == flags.to_pylist()
    with pytest.raises(ValueError, match="nulls"):
        bools(pa.array([True, None]))


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_stores_whole_life_never_imports_pandas(tmp_path, backend):
    # pa.array and friends import pandas (0.4 s in each worker): a worker process runs every store operation,
    # restores included (a chain with deletes and a full snapshot), without it. Run apart: pytest's own
    # process has pandas loaded.
    extra = "rocksdb_change_log=True" if backend == "rocksdb" else ""
    script = textwrap.dedent(f"""
        import dataclasses, sys
        from sparkstate.engine import Store
        from tests.engine.conftest import make_spec
        spec = make_spec("file:{tmp_path}/ckpt", backend="{backend}", heap_snapshot_every=2, {extra})
        s = Store(spec, "{tmp_path}/local-a")
        for v in range(5):
            s.load(v)
            s.apply_batch([(b"\\0\\0\\0\\1k%03d" % ((i * 7 + v) % 300), b"v%d" % v) for i in range(200)])
            s.apply_batch([(b"\\0\\0\\0\\1k%03d" % i, None) for i in range(v, 300, 11)])
            list(s.scan(b"\\0\\0\\0\\1k1", 50, 1 << 20))
            s.commit()
            s.maintenance_snapshot()
        s.close()
        fresh = Store(dataclasses.replace(spec, instance_id="b"), "{tmp_path}/local-b")
        fresh.load(5)
        assert len(list(fresh.scan(b"", 1000, 1 << 20))) > 0
        list(fresh.changes(1, 5))
        fresh.close()
        print("pandas" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
