"""A batch re-executed after a crash keeps the state of its re-run, not of the killed attempt.

The crash is the one between the state commits and Spark's commit log: every store committed version
N+1 of batch N, then the driver died before `commits/N` was written. It is reproduced exactly by running
batch N and deleting `commits/N`. On restart Spark re-runs batch N; if the input of that re-run differs
(a filter added to the query, which Spark allows between restarts, or a non-deterministic function), the
state the re-run commits is the one that counts. Spark's HDFS provider, run through the same sequence in
the same session, gives the reference result.
"""
from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from conftest import selected_provider
from datagen import EVENT_SCHEMA, random_events
from spark_harness import PREFIX, BatchCollector, InputDir, assert_same_rows, run_available_now, session_conf

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="compares sparkstate with HDFS")

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


def _forget_last_commit(checkpoint: str) -> int:
    """Delete the newest commit-log entry (and its checksum): the state of that batch stays committed."""
    commits = os.path.join(checkpoint, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        path = os.path.join(commits, name)
        if os.path.exists(path):
            os.remove(path)
    return last


class ChangedRerun:
    """The crash-then-changed sequence on one provider; returns what the sink received."""

    def __init__(self, spark, tmp_path, name: str, files, changed_query) -> None:
        self.spark = spark
        self.source = InputDir(spark, str(tmp_path / name / "in"), EVENT_SCHEMA)
        self.checkpoint = str(tmp_path / name / "ckpt")
        self.files = files
        self.changed_query = changed_query
        self.sink = BatchCollector()

    def _run(self, change: bool, conf: dict[str, str]) -> None:
        with session_conf(self.spark, conf):
            counts = self.changed_query(self.source.stream(), change)
            run_available_now(self.sink.attach(counts.writeStream.outputMode("update")), self.checkpoint)

    def run(self, conf: dict[str, str], before_rerun=None) -> BatchCollector:
        self.source.add_all(self.files[:3])
        self._run(False, conf)
        forgotten = _forget_last_commit(self.checkpoint)
        assert forgotten == 2
        if before_rerun is not None:
            before_rerun()
        self.source.add_all(self.files[3:])
        self._run(True, conf)
        return self.sink


def _with_added_filter(stream, change: bool):
    if change:
        stream = stream.where(F.col("v") % 3 != 0)
    return stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))


def _generation_udf(path: str):
    """A non-deterministic function: adds the generation written in `path` when it runs."""

    def plus_generation(v):
        with open(path) as f:
            return v + int(f.read())

    from pyspark.sql.types import LongType

    return F.udf(plus_generation, LongType()).asNondeterministic()


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_rerun_with_an_added_filter_replaces_the_killed_attempts_state(spark, tmp_path, backend):
    files = random_events(seed=91, n_files=5, per_file=80, n_keys=40)
    reference = ChangedRerun(spark, tmp_path, "hdfs", files, _with_added_filter).run({PROVIDER_KEY: HDFS})
    ours = ChangedRerun(spark, tmp_path, backend, files, _with_added_filter).run({PREFIX + "backend": backend})
    assert_same_rows(ours.updated(["k"]), reference.updated(["k"]), min_rows=40)


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_rerun_of_a_non_deterministic_function_keeps_the_rerun_state(spark, tmp_path, backend):
    generation = str(tmp_path / "generation")

    def query(stream, _change):
        shifted = stream.select("k", _generation_udf(generation)("v").alias("w"))
        return shifted.groupBy("k").agg(F.sum("w").alias("total"))

    def next_generation():
        with open(generation, "w") as f:
            f.write("1000")

    results = {}
    for name, conf in (("hdfs", {PROVIDER_KEY: HDFS}), (backend, {PREFIX + "backend": backend})):
        with open(generation, "w") as f:
            f.write("0")
        files = random_events(seed=92, n_files=5, per_file=80, n_keys=40)
        results[name] = ChangedRerun(spark, tmp_path, name, files, query).run(conf, next_generation)
    assert_same_rows(results[backend].updated(["k"]), results["hdfs"].updated(["k"]), min_rows=40)
