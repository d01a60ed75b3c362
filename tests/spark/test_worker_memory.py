"""The store workers' resident memory reaches the query's progress (`sparkstateWorkerRssBytes`): the
workers live beside the executor JVM, where a cluster manager counts their memory in the container."""
from __future__ import annotations

import os

import pytest

from conftest import selected_provider
from spark_harness import PREFIX, AggregationCase, run_available_now_progress, session_conf

from sparkstate_jobs import procfs

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's worker processes")

METRIC = "sparkstateWorkerRssBytes"


def _workers_rss(spark) -> int:
    jvm = spark.sparkContext._jvm.ProcessHandle.current().pid()
    total = 0
    for pid in procfs.descendants(jvm):
        if procfs.is_store_worker(pid):
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_each_batch_reports_the_workers_resident_memory(spark, tmp_path, backend):
    case = AggregationCase(spark, tmp_path, seed=61)
    case.source.add_all(case.files)
    with session_conf(spark, {PREFIX + "backend": backend}):
        progress = run_available_now_progress(case.writer(), case.checkpoint)
    reported = [sum(op["customMetrics"][METRIC] for op in p["stateOperators"]) for p in progress
                if p["stateOperators"]]
    assert reported, "no batch with state"
    live = _workers_rss(spark)
    # A Python process with pyspark's and sparkstate's modules loaded holds tens of MB; the stores' shares
    # of their workers' memory cannot add up to more than all workers hold (with room for growth between).
    assert all(20 << 20 < r <= 1.5 * live for r in reported), \
        f"reported {[r >> 20 for r in reported]} MiB per batch, the live workers hold {live >> 20} MiB"
    case.assert_matches_batch()
