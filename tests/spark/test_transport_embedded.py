"""transport=embedded: the stores run in the executor JVM's own CPython (through Jep).

Parity: the same queries give the batch results. This module is the only one that embeds Python, and
its first test runs before any embedded worker exists (one JVM embeds one interpreter, for good).
"""
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import selected_provider
from spark_harness import PREFIX, AggregationCase, checkpoint_loads_per_batch

import sparkstate

pytestmark = [pytest.mark.sparkstate_settings(transport="embedded"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]


def test_interpreter_without_jep_gets_an_error_saying_how_to_install_it(spark, tmp_path):
    # An interpreter that answers the shim's probe like a Python without Jep would.
    fake = tmp_path / "python-without-jep"
    fake.write_text('#!/bin/sh\necho \'{"jep": null, "path": [], "version": "3.11", "executable": "x"}\'\n')
    fake.chmod(0o755)
    case = AggregationCase(spark, tmp_path, seed=36)
    case.source.add_all(case.files)
    message = case.failure_of_run({PREFIX + "pythonExec": str(fake)})
    assert "pip install jep" in message and PREFIX + "transport=shm" in message


def test_a_store_stays_live_whichever_task_thread_runs_its_partition(spark, tmp_path):
    # 8 partitions on local[2]: a partition's next task often runs on the other task thread, and so
    # through the other embedded worker. Its store must be reused live there, not restored.
    case = AggregationCase(spark, tmp_path, seed=41, n_files=6)
    case.source.add_all(case.files)
    loads = checkpoint_loads_per_batch(spark, case.writer(), case.checkpoint,
                                       {"spark.sql.shuffle.partitions": "8"})
    assert len(loads) >= 6
    assert loads[1:] == [0] * (len(loads) - 1), f"stores restored from the checkpoint per batch: {loads}"
    case.assert_matches_batch()


_ANOTHER_BUILD_JOB = """
import sys
import sparkstate
from pyspark.sql import SparkSession

workdir, jar = sys.argv[1], sys.argv[2]
builder = sparkstate.configure(SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                               .config("spark.sql.shuffle.partitions", "1"), transport="embedded")
spark = builder.config("spark.jars", jar).getOrCreate()
spark.sparkContext.setLogLevel("OFF")
counts = spark.readStream.schema("k string").json(workdir + "/in").groupBy("k").count()
query = (counts.writeStream.outputMode("update").format("noop").option("checkpointLocation", workdir + "/ckpt")
         .trigger(availableNow=True).start())
try:
    query.awaitTermination()
    print("RAN")
except Exception as e:
    print("FAILED:", str(e)[:4000])
"""


def test_an_embedded_interpreter_with_another_build_of_sparkstate_is_refused(tmp_path):
    """As for worker processes (test_bad_input.py), an embedded worker whose sparkstate is another build than
    the executor's jar is refused, naming the interpreter, its package and what to set. Here the jar is
    the other build (a copy whose build id differs): which sparkstate an embedded interpreter imports
    depends on how the embedded CPython orders its path, and the jar does not. In a driver of its own,
    since a JVM embeds one interpreter for good."""
    jar = tmp_path / "another-build.jar"
    with zipfile.ZipFile(sparkstate.jar_path()) as src, zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            dst.writestr(item, b"0123456789abcdef" if item.filename == "io/sparkstate/build-id" else data)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part.json").write_text('{"k": "a"}\n{"k": "b"}\n')
    job = subprocess.run([sys.executable, "-c", _ANOTHER_BUILD_JOB, str(tmp_path), str(jar)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert "FAILED:" in job.stdout, job.stdout[-2000:] + job.stderr[-3000:]
    message = job.stdout
    assert "runs another build of sparkstate" in message and "jar (0123456789abcdef)" in message, message[-3000:]
    assert "/sparkstate" in message and "pythonExec" in message, message[-3000:]  # the worker's package


VARIANTS = ("rocksdb",)  # the operator tests imported below run embedded, on RocksDB

from test_operators import test_aggregation_update_mode, test_session_window_append_mode, test_stream_stream_inner_join  # noqa: E402,F401
