"""The in-process benchmarks still run against the engine as it is (tiny sizes; no figure is checked)."""
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "python", "bench")


@pytest.mark.parametrize("script,args,expect", [
    ("heap_table.py", ["--keys", "2000", "--ops", "500", "--repeats", "1"], "layout=packed"),
    ("heap_commit.py", ["--keys", "5000", "--written", "500", "--commits", "12"], "background full snapshot"),
    ("heap_scan.py", ["--keys", "2000", "--written", "200", "--repeats", "1"], "layout=dict"),
    ("rocksdb_gets.py", ["--keys", "3000", "--gets", "500", "--repeats", "1"], "mapped+uncompressed"),
    ("heap_restore.py", ["--keys", "3000", "--deltas", "2", "--written", "300", "--deletes", "30", "--runs", "1"],
     "medians"),
])
def test_benchmark_runs(script, args, expect):
    done = subprocess.run([sys.executable, os.path.join(BENCH, script), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert expect in done.stdout
