"""The demo's own sequence: `sparkstate demo`, `sparkstate rescale`, `sparkstate demo` again. Its parquet
file sink keeps a batch log of its own (compacted every 2 batches here); the output must equal that of
the same two demo runs without the rescale. Each step is its own driver process, as a user runs them."""
import os
import subprocess
import sys

import pytest
from conftest import selected_provider
from fault_plugin import fault_python, fired
from spark_harness import PREFIX, assert_same_rows

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="rescaling is a sparkstate feature")]
SMALL = ["--batches", "3", "--rows-per-batch", "400", "--shuffle-partitions", "3",
         "--conf", "spark.sql.streaming.fileSink.log.compactInterval=2"]


def _run(args: list[str], workdir: str, expect: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=600,
                          cwd=workdir)
    assert done.returncode == expect, f"{args[:3]}...: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _demo(workdir: str, *extra: str, expect: int = 0) -> subprocess.CompletedProcess:
    return _run([os.path.join(REPO, "python", "demo.py"), "--workdir", workdir, *SMALL, *extra], workdir, expect)


def _sessions(spark, workdir: str):
    return spark.read.parquet(os.path.join(workdir, "output", "sessions")).collect()


def _with_faults(workdir: str, rule: dict) -> list[str]:
    """--conf for a demo whose workers run `rule` (fault_plugin.py), with hangs detected within 2 s."""
    return ["--conf", f"{PREFIX}pythonExec={fault_python(workdir, [rule])}",
            "--conf", f"{PREFIX}workerHeartbeatTimeoutMs=2000"]


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


def test_a_worker_that_hangs_mid_run_costs_a_retried_task_not_the_demo(spark, tmp_path):
    """One state worker stops (SIGSTOP) in a commit of the third batch; the executor kills it, Spark tries
    the task again on a fresh worker, and the run ends as a run without the fault does, output included."""
    faulty, reference = str(tmp_path / "faulty"), str(tmp_path / "reference")
    for workdir in (faulty, reference):
        os.makedirs(workdir)
    marker = os.path.join(faulty, "hang")
    rule = {"target": "sparkstate.engine.store:Store.commit", "when": "version == 2 and partition == 1",
            "action": "sigstop", "times": 1, "marker": marker}
    _demo(faulty, *_with_faults(faulty, rule))
    _demo(reference)
    assert [f["action"] for f in fired(marker)] == ["sigstop"]
    assert_same_rows(_sessions(spark, faulty), _sessions(spark, reference), min_rows=10)


def test_a_query_that_fails_ends_the_demo_with_a_short_message(tmp_path):
    """Every attempt of a task fails: the demo says why in a few lines, with no trace, and how to resume."""
    workdir = str(tmp_path / "failing")
    os.makedirs(workdir)
    rule = {"target": "sparkstate.engine.store:Store.commit", "when": "version == 2", "action": "raise"}
    done = _demo(workdir, *_with_faults(workdir, rule), expect=1)
    err = done.stderr
    assert "sparkstate demo: the query failed:" in err and "injected failure at" in err, err[-3000:]
    assert "run the same command again to resume" in err and "Traceback" not in err, err[-3000:]
