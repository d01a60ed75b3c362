"""A Spark upgrade keeps state: a query run on Spark 3.5 with sparkstate continues exactly on this Spark
(4.x) with sparkstate, both backends. The first half runs in the interpreter named by
SPARKSTATE_UPGRADE_FROM_PYTHON (an environment with pyspark 3.5 and sparkstate; scripts/
test-spark-versions.sh sets it); without it the test is skipped."""
from __future__ import annotations

import os
import subprocess

import pytest
from pyspark.sql import functions as F
from spark_harness import AggregationCase, assert_same_rows

import sparkstate
from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF

FROM_PYTHON = os.environ.get("SPARKSTATE_UPGRADE_FROM_PYTHON")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not FROM_PYTHON, reason="SPARKSTATE_UPGRADE_FROM_PYTHON names no Spark 3.5 env")]
HERE = os.path.dirname(os.path.abspath(__file__))

FIRST_HALF = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
import sparkstate, pyspark
assert pyspark.__version__.startswith("3.5"), pyspark.__version__
from pyspark.sql import SparkSession
from conftest import BASE_CONF
from pyspark.sql import functions as F
from spark_harness import AggregationCase, assert_same_rows
builder = SparkSession.builder
for k, v in BASE_CONF.items():
    builder = builder.config(k, v)
spark = sparkstate.configure(builder, backend={backend!r}).getOrCreate()
case = AggregationCase(spark, Path({tmp!r}), seed=97, n_files=4)
case.source.add_all(case.files[:2])
case.run()
case.assert_matches_batch()
spark.stop()
"""


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_a_query_started_on_spark_3_5_continues_here(spark, tmp_path, backend):
    code = FIRST_HALF.format(here=HERE, backend=backend, tmp=str(tmp_path))
    first = subprocess.run([FROM_PYTHON, "-c", code], capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    case = AggregationCase(spark, tmp_path, seed=97, n_files=4)  # the same files, made the same way
    case.source.files.extend(case.files[:2])  # written by the first half
    case.source.add_all(case.files[2:])
    case.run({PROVIDER_CLASS_CONF: sparkstate.PROVIDER_CLASS,
              "spark.sql.streaming.stateStore.sparkstate.backend": backend})
    # Every key this half updated carries its totals over all four files: the state of the first two
    # came through the upgrade.
    updated = case.sink.updated(["k"])
    keys = {row["k"] for row in updated}
    expected = (case.source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
                .where(F.col("k").isin(list(keys))))
    assert_same_rows(updated, expected.collect(), min_rows=len(keys))
    assert len(keys) > case.n_keys // 2
