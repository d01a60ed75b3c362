"""Failures in the middle of a micro-batch: the retried task must give exactly the batch result.

The session runs `local[2,4]` so Spark retries failed tasks (plain `local[2]` does not).
"""
from __future__ import annotations

import os

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from conftest import selected_provider
from datagen import EVENT_SCHEMA, random_events
from spark_harness import BatchCollector, InputDir, assert_same_rows, committed_batches, run_available_now

pytestmark = [pytest.mark.spark_conf({"spark.master": "local[2,4]"})]


def _fail_once_after_the_state_commit(marker_dir: str):
    """mapInPandas body: drain the input (so the upstream state store commits), then fail once."""

    def fn(batches):
        import os as _os

        from pyspark import TaskContext

        pdfs = list(batches)  # the aggregation's store commits when its output iterator is drained
        ctx = TaskContext.get()
        armed = _os.path.exists(_os.path.join(marker_dir, "arm"))
        marker = _os.path.join(marker_dir, "failed")
        if armed and sum(len(p) for p in pdfs) and not _os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(f"partition={ctx.partitionId()} attempt={ctx.attemptNumber()}")
            raise RuntimeError("injected task failure after the state store commit")
        yield from pdfs

    return fn


def test_task_failure_after_state_commit_recommits_the_same_version(spark, tmp_path):
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint, markers = str(tmp_path / "ckpt"), str(tmp_path / "markers")
    os.makedirs(markers)
    files = random_events(seed=21, n_files=4, per_file=60, n_keys=15)
    sink = BatchCollector()
    schema = "k string, n long, total long"

    def writer():
        agg = source.stream().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        return sink.attach(agg.mapInPandas(_fail_once_after_the_state_commit(markers), schema)
                           .writeStream.outputMode("update"))

    source.add_all(files[:2])
    run_available_now(writer(), checkpoint)
    open(os.path.join(markers, "arm"), "w").close()
    source.add_all(files[2:])
    run_available_now(writer(), checkpoint)

    assert os.path.exists(os.path.join(markers, "failed")), "the failure was never injected"
    expected = source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
    assert_same_rows(sink.updated(["k"]), expected.collect(), min_rows=15)


def _counting_fn_that_kills_the_state_workers(marker_dir: str):
    """applyInPandasWithState body: keeps a running count; once armed, kills the store workers once."""

    def fn(key, pdfs, state: GroupState):
        import os as _os
        import signal as _signal

        def claimed() -> bool:
            """Only one call kills and records: two tasks run this at once, and the second would
            find no worker left and record an empty list over the first one's."""
            try:
                _os.close(_os.open(_os.path.join(marker_dir, "claim"), _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY))
                return True
            except FileExistsError:
                return False

        armed = _os.path.exists(_os.path.join(marker_dir, "arm"))
        marker = _os.path.join(marker_dir, "killed")
        if armed and not _os.path.exists(marker) and claimed():
            def ppid(pid):
                with open(f"/proc/{pid}/stat") as f:
                    return int(f.read().rsplit(")", 1)[1].split()[1])
            jvm = ppid(_os.getppid())  # this UDF worker -> pyspark daemon -> executor JVM
            killed = []
            for entry in _os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        cmd = f.read()
                    if b"sparkstate.worker" in cmd and ppid(int(entry)) == jvm:
                        _os.kill(int(entry), _signal.SIGKILL)
                        killed.append(entry)
                except OSError:
                    continue
            with open(marker, "w") as f:
                f.write(",".join(killed))
        n, total = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            n += len(pdf)
            total += int(pdf["v"].sum())
        state.update((n, total))
        yield pd.DataFrame({"k": [key[0]], "n": [n], "total": [total]})

    return fn


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="kills sparkstate's own worker processes")
def test_worker_killed_mid_batch_is_retried_on_a_fresh_worker(spark, tmp_path):
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint, markers = str(tmp_path / "ckpt"), str(tmp_path / "markers")
    os.makedirs(markers)
    files = random_events(seed=22, n_files=4, per_file=60, n_keys=15)
    sink = BatchCollector()

    def writer():
        return sink.attach(
            source.stream().groupBy("k").applyInPandasWithState(
                _counting_fn_that_kills_the_state_workers(markers), "k string, n long, total long",
                "n long, total long", "update", GroupStateTimeout.NoTimeout)
            .writeStream.outputMode("update"))

    source.add_all(files[:2])
    run_available_now(writer(), checkpoint)
    open(os.path.join(markers, "arm"), "w").close()
    source.add_all(files[2:])
    run_available_now(writer(), checkpoint)

    with open(os.path.join(markers, "killed")) as f:
        assert f.read(), "no sparkstate worker was found to kill"
    expected = source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
    assert_same_rows(sink.updated(["k"]), expected.collect(), min_rows=15)
    assert len(committed_batches(checkpoint)) >= 4
