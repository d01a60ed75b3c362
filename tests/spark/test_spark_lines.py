"""What each Spark line serves, run on the line of the installed pyspark (scripts/test-spark-versions.sh
runs this module in one environment per line; CI runs it on the newest): the migration between sparkstate
and the line's own providers, or its refusal by name where the line lacks it, and the file-only tools on
the line's checkpoints."""
from __future__ import annotations

import os
import subprocess
import sys

import pyspark
import pytest
from conftest import BUILTIN_PROVIDERS, selected_provider
from spark_harness import AggregationCase

import sparkstate
from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF, SparkLogs
from sparkstate.spark_lines import spark_line
from sparkstate.storage import fileio_for

# slow: the CI suite covers the newest line's migrations and tools in test_migrate.py and the CLI tests;
# scripts/test-spark-versions.sh runs this module on every line.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="needs the sparkstate jar")]

LINE = spark_line(pyspark.__version__)
PROVIDERS = {**BUILTIN_PROVIDERS, "sparkstate": sparkstate.PROVIDER_CLASS}
# Spark's providers start a store empty at a version (what the copy into them needs) from 4.2 on.
INTO_SPARK_ROCKSDB = LINE >= "4.2"


def _pinned(checkpoint: str) -> str:
    logs = SparkLogs(fileio_for(checkpoint), checkpoint)
    return logs.read_offset(logs.offset_batches()[-1]).conf[PROVIDER_CLASS_CONF]


def _run_on(case: AggregationCase, provider: str) -> None:
    case.run({PROVIDER_CLASS_CONF: PROVIDERS[provider]})


@pytest.mark.parametrize("source,target", [("hdfs", "sparkstate"), ("sparkstate", "hdfs"),
                                           ("sparkstate", "rocksdb"), ("rocksdb", "sparkstate")])
def test_migrate_between_sparkstate_and_the_lines_providers(spark, tmp_path, source, target):
    case = AggregationCase(spark, tmp_path, seed=83, n_files=4)
    case.source.add_all(case.files[:2])
    _run_on(case, source)
    if target == "rocksdb" and not INTO_SPARK_ROCKSDB:
        with pytest.raises(Exception, match=r"loadEmpty.*4\.2"):
            sparkstate.migrate(spark, case.checkpoint, target)
        assert _pinned(case.checkpoint) == PROVIDERS[source]
        return
    summary = sparkstate.migrate(spark, case.checkpoint, target)
    assert summary.rows == case.n_keys and _pinned(case.checkpoint) == PROVIDERS[target]
    case.source.add_all(case.files[2:])
    _run_on(case, source)  # the checkpoint keeps the provider it was migrated to
    case.assert_matches_batch()


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_rescale_on_the_line(spark, tmp_path, backend):
    case = AggregationCase(spark, tmp_path, seed=107, n_files=4)
    case.source.add_all(case.files[:2])
    conf = {PROVIDER_CLASS_CONF: PROVIDERS["sparkstate"], "spark.sql.streaming.stateStore.sparkstate.backend": backend}
    case.run(conf)
    sparkstate.rescale(spark, case.checkpoint, 5)
    case.source.add_all(case.files[2:])
    case.run(conf)
    case.assert_matches_batch()


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_tools_read_the_lines_checkpoints(spark, tmp_path, backend):
    case = AggregationCase(spark, tmp_path, seed=89, n_files=3)
    for i in range(3):
        case.source.add_all(case.files[i:i + 1])
        case.run({PROVIDER_CLASS_CONF: PROVIDERS["sparkstate"], "spark.sql.streaming.stateStore.sparkstate.backend": backend})
    for command in ("inspect", "verify", "gc", "verify"):
        done = subprocess.run([sys.executable, "-m", "sparkstate.cli", command, "--checkpoint", case.checkpoint],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"sparkstate {command}: {done.stdout}{done.stderr}"
    case.assert_matches_batch()


def test_checkpoint_format_v2_is_refused_where_the_line_lacks_it(spark, tmp_path):
    """Spark 3.5 has no checkpoint format v2: a query asking for it is refused by name, not run without it."""
    case = AggregationCase(spark, tmp_path, seed=101, n_files=2)
    case.source.add_all(case.files)
    conf = {PROVIDER_CLASS_CONF: PROVIDERS["sparkstate"],
            "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}
    if LINE == "3.5":
        assert "checkpoint format v2 needs Spark 4.0 or later" in case.failure_of_run(conf)
    else:
        case.run(conf)
        case.assert_matches_batch()


WRONG_JAR_JOB = """
import sys
sys.path.insert(0, {here!r})
from pathlib import Path
import sparkstate
from pyspark.sql import SparkSession
from conftest import BASE_CONF
from spark_harness import AggregationCase
builder = SparkSession.builder
for k, v in BASE_CONF.items():
    builder = builder.config(k, v)
builder = sparkstate.configure(builder).config("spark.jars", sparkstate.jar_path({other!r}))
spark = builder.config("spark.task.maxFailures", "1").getOrCreate()
case = AggregationCase(spark, Path({tmp!r}), seed=103, n_files=1)
case.source.add_all(case.files)
print(case.failure_of_run())
spark.stop()
"""


def test_the_jar_of_another_line_refuses_to_start_naming_both_versions(tmp_path):
    # Every pairing but one loads the provider class, which checks. The exception: a 4.x jar in Spark 3.5,
    # whose JVM cannot load the class at all, because it implements an interface Spark 3.5 lacks
    # (SupportsFineGrainedReplay); the docs say so.
    other = "4.3.0" if LINE == "3.5" else "3.5.9"
    code = WRONG_JAR_JOB.format(here=os.path.dirname(os.path.abspath(__file__)), other=other, tmp=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout + done.stderr  # the query's error, and the executor's log of the failed task
    if LINE == "3.5":
        assert "SupportsFineGrainedReplay" in said
    else:
        assert (f"this sparkstate jar is built for Spark {spark_line(other)} but this JVM runs Spark "
                f"{pyspark.__version__}") in said
