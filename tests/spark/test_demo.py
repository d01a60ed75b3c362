"""The demo's own sequence: `sparkstate demo`, `sparkstate rescale`, `sparkstate demo` again. Its parquet
file sink keeps a batch log of its own (compacted every 2 batches here); the output must equal that of
the same two demo runs without the rescale. Each step is its own driver process, as a user runs them."""
import os
import subprocess
import sys

import pytest
from conftest import selected_provider
from spark_harness import assert_same_rows

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="rescaling is a sparkstate feature")]
SMALL = ["--batches", "3", "--rows-per-batch", "400", "--shuffle-partitions", "3",
         "--conf", "spark.sql.streaming.fileSink.log.compactInterval=2"]


def _run(args: list[str], workdir: str) -> None:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=600,
                          cwd=workdir)
    assert done.returncode == 0, f"{args[:3]}...: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def _demo(workdir: str) -> None:
    _run([os.path.join(REPO, "python", "demo.py"), "--workdir", workdir, *SMALL], workdir)


def test_demo_then_rescale_then_demo_gives_the_output_of_two_plain_runs(spark, tmp_path):
    rescaled, reference = str(tmp_path / "rescaled"), str(tmp_path / "reference")
    for workdir in (rescaled, reference):
        os.makedirs(workdir)
        _demo(workdir)
    _run(["-c", "import sys; from sparkstate.cli import main; sys.exit(main(sys.argv[1:]))", "rescale",
          "--checkpoint", os.path.join(rescaled, "checkpoint"), "--partitions", "5"], rescaled)
    for workdir in (rescaled, reference):
        _demo(workdir)
    for name in sorted(os.listdir(os.path.join(reference, "input"))):  # the same input in both
        with open(os.path.join(reference, "input", name)) as a, open(os.path.join(rescaled, "input", name)) as b:
            assert a.read() == b.read(), name
    out = [spark.read.parquet(os.path.join(w, "output", "sessions")).collect() for w in (rescaled, reference)]
    assert_same_rows(out[0], out[1], min_rows=10)
