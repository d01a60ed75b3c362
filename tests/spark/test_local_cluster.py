"""Separate executor JVMs: with `local-cluster[2,1,1024]` the store workers are spawned by executor
processes, not by the driver, and queries still match the batch results across a restart."""
import os

import pytest

from conftest import selected_provider
from test_operators import test_aggregation_update_mode, test_drop_duplicates  # noqa: F401

pytestmark = [pytest.mark.slow,
              pytest.mark.spark_conf({"spark.master": "local-cluster[2,1,1024]", "spark.executor.memory": "768m"}),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="checks sparkstate's worker processes")]


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_store_workers_run_under_executor_jvms(spark, tmp_path):
    test_aggregation_update_mode(spark, tmp_path)  # make sure stores were used in this session
    parents = {_ppid(int(p)) for p in os.listdir("/proc")
               if p.isdigit() and "sparkstate.worker" in _cmdline(int(p))}
    parents.discard(os.getpid())
    executor_parents = [p for p in parents if "CoarseGrainedExecutorBackend" in _cmdline(p)]
    assert executor_parents, f"no sparkstate worker is a child of an executor JVM (parents: {parents})"
