"""A finished application leaves nothing behind: `SparkSession.stop()` in a driver that lives on stops
the store workers, and a `spark-submit` job ends by itself, as it does on Spark's own providers.
Each runs its own driver process (a fresh JVM), so the shared session of the other modules is not used.
"""
import ast
import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from conftest import selected_provider
from shutdown_job import worker_pids

import sparkstate
from sparkstate.config import PREFIX, PROVIDER_CLASS, PROVIDER_CLASS_KEY

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "shutdown_job.py")

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="checks sparkstate's workers")


def _input(workdir: str) -> dict[str, int]:
    os.makedirs(os.path.join(workdir, "in"))
    expected: dict[str, int] = {}
    for f in range(3):
        with open(os.path.join(workdir, "in", f"part-{f}.json"), "w") as out:
            for i in range(200):
                k = f"k{(i * 7 + f) % 37}"
                expected[k] = expected.get(k, 0) + 1
                out.write(json.dumps({"k": k, "v": i}) + "\n")
    return expected


def _env(tag: str) -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "SPARKSTATE_TEST_JOB": tag}


def _run(cmd: list[str], env: dict[str, str], timeout_s: float, workdir: str) -> tuple[int, str, float]:
    t0 = time.monotonic()
    with open(os.path.join(workdir, "driver.log"), "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            raise AssertionError(f"{' '.join(cmd[:2])}... did not exit within {timeout_s} s")
    return proc.returncode, out, time.monotonic() - t0


def spark_submit_command(workdir: str, *conf: str) -> list[str]:
    """`spark-submit` of the job with sparkstate configured the spark-submit way (`--jars`, `--conf`)."""
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    if not os.path.exists(spark_submit):
        import pyspark

        spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    settings = [f"{PROVIDER_CLASS_KEY}={PROVIDER_CLASS}", f"{PREFIX}pythonExec={sys.executable}",
                f"spark.pyspark.python={sys.executable}", *conf]
    return [spark_submit, "--master", "local[2]", "--jars", sparkstate.jar_path(),
            *sum((["--conf", c] for c in settings), []), JOB, workdir, "submit"]


def test_a_bad_setting_given_with_conf_fails_the_job_with_one_clean_message(tmp_path):
    workdir = str(tmp_path)
    _input(workdir)
    cmd = spark_submit_command(workdir, f"{PREFIX}bakend=heap")
    rc, out, _ = _run(cmd, _env(uuid.uuid4().hex), 240, workdir)
    log = open(os.path.join(workdir, "driver.log")).read()
    assert rc != 0
    expected = f"unknown setting '{PREFIX}bakend'; did you mean '{PREFIX}backend'?"
    lines = [ln for ln in log.splitlines() if "io.sparkstate.PythonStoreException:" in ln]
    assert lines and all(expected in ln for ln in lines), log[-3000:]
    assert "RuntimeError: ConfigError" not in log and "sparkstate/worker/" not in log, log[-3000:]


def _workers_printed(out: str, label: str) -> list[int]:
    line = next(ln for ln in out.splitlines() if ln.startswith(label))
    return ast.literal_eval(line[len(label):].strip())


def test_workers_are_gone_after_spark_session_stop(tmp_path):
    workdir = str(tmp_path)
    expected = _input(workdir)
    rc, out, _ = _run([sys.executable, JOB, workdir, "stop"], _env(uuid.uuid4().hex), 240, workdir)
    assert rc == 0, open(os.path.join(workdir, "driver.log")).read()[-3000:]
    assert json.load(open(os.path.join(workdir, "out-stop.json"))) == expected
    assert _workers_printed(out, "workers during the job:"), "the job ran without store workers"
    assert _workers_printed(out, "workers left:") == []


def test_a_spark_submit_job_ends_by_itself(tmp_path):
    workdir = str(tmp_path)
    expected = _input(workdir)
    cmd = spark_submit_command(workdir)
    tag = uuid.uuid4().hex
    rc, out, elapsed = _run(cmd, _env(tag), 240, workdir)
    assert rc == 0, open(os.path.join(workdir, "driver.log")).read()[-3000:]
    assert json.load(open(os.path.join(workdir, "out-submit.json"))) == expected
    assert _workers_printed(out, "workers during the job:"), "the job ran without store workers"
    assert elapsed < 120, f"spark-submit took {elapsed:.0f} s"
    deadline = time.monotonic() + 15
    while worker_pids(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_pids(tag) == [], "store workers outlived the spark-submit JVM"
