"""Separate executor JVMs (`local-cluster[2,1,1024]`): the store workers are spawned by executor
processes, queries match the batch results across a restart, and losing an executor mid-query (killed,
or crashed by native code in its embedded interpreter) costs a retry, never a wrong result."""
import os
import signal
import tempfile
import threading
import time

import pytest
from conftest import selected_provider
from fault_plugin import fault_python, fired
from spark_harness import PREFIX, AggregationCase
from test_operators import test_aggregation_update_mode, test_drop_duplicates  # noqa: F401

from sparkstate_jobs import procfs

VARIANTS = ("rocksdb",)  # the operator tests imported below run on one backend here
HERE = os.path.dirname(os.path.abspath(__file__))
# Faults for executors' embedded interpreters: fault_site/sitecustomize.py reads this file when it exists.
FAULTS_FILE = os.path.join(tempfile.gettempdir(), f"sparkstate-test-faults-{os.getpid()}.json")

pytestmark = [pytest.mark.slow,
              pytest.mark.spark_conf({
                  "spark.master": "local-cluster[2,1,1024]", "spark.executor.memory": "768m",
                  "spark.executorEnv.PYTHONPATH": os.path.join(HERE, "fault_site"),
                  "spark.executorEnv.SPARKSTATE_FAULTS_FILE": FAULTS_FILE,
                  "spark.executor.extraJavaOptions": f"-XX:ErrorFile={tempfile.gettempdir()}/sparkstate-hs_err_%p.log"}),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="checks sparkstate's worker processes")]


def _cmdline(pid: int) -> str:
    return procfs.cmdline(pid).replace(b"\0", b" ").decode(errors="replace")


def test_store_workers_run_under_executor_jvms(spark, tmp_path):
    test_aggregation_update_mode(spark, tmp_path, "rocksdb")  # make sure stores were used in this session
    parents = {procfs.parent_of(p) for p in procfs.pids() if procfs.is_store_worker(p)}
    parents.discard(os.getpid())
    app = spark.sparkContext.applicationId  # executors of this session only, not of another run's
    executor_parents = [p for p in parents
                        if "CoarseGrainedExecutorBackend" in _cmdline(p) and f"--app-id {app}" in _cmdline(p)]
    assert executor_parents, f"no sparkstate worker is a child of an executor JVM of {app} (parents: {parents})"


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_executor_killed_mid_query_gives_exact_results(spark, tmp_path, backend):
    """SIGKILL of the executor JVM whose worker is serving a get of the second run: Spark loses the
    executor, reruns its tasks elsewhere, and the stores are restored from the checkpoint."""
    case = AggregationCase(spark, tmp_path, seed=81)
    case.source.add_all(case.files[:2])
    case.run({PREFIX + "backend": backend})
    marker = str(tmp_path / "get")
    rule = {"target": "sparkstate.engine.store:Store.get", "when": "version is not None and version >= 2",
            "action": "sleep", "seconds": 1.0, "times": 1, "marker": marker}
    killed: list[int] = []

    def kill_the_executor() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not fired(marker):
            time.sleep(0.05)
        if fired(marker):
            executor = procfs.parent_of(fired(marker)[0]["pid"])
            assert "CoarseGrainedExecutorBackend" in _cmdline(executor)
            assert f"--app-id {spark.sparkContext.applicationId}" in _cmdline(executor)
            os.kill(executor, signal.SIGKILL)
            killed.append(executor)

    killer = threading.Thread(target=kill_the_executor)
    killer.start()
    case.source.add_all(case.files[2:])
    case.run({PREFIX + "backend": backend, PREFIX + "pythonExec": fault_python(str(tmp_path), [rule])})
    killer.join()
    assert killed, "no executor was killed"
    case.assert_matches_batch()


def test_native_crash_in_an_embedded_worker_costs_the_executor_not_the_result(spark, tmp_path):
    """transport=embedded: os.abort() in the executor's own interpreter (a crash in native code) takes
    the executor JVM down; Spark reschedules its tasks and the results are exact."""
    marker = str(tmp_path / "abort")
    rule = {"target": "sparkstate.engine.store:Store.get", "when": "version is not None and version >= 2",
            "action": "abort", "times": 1, "marker": marker}
    with open(FAULTS_FILE, "w") as f:
        f.write(__import__("json").dumps([rule]))
    try:
        case = AggregationCase(spark, tmp_path, seed=82)
        case.source.add_all(case.files)
        case.run({PREFIX + "transport": "embedded"})
    finally:
        os.remove(FAULTS_FILE)
    crashes = fired(marker)
    assert len(crashes) == 1, f"expected one crash, saw {crashes}"
    crashed = crashes[0]["pid"]  # embedded: the executor JVM itself
    assert not os.path.exists(f"/proc/{crashed}") or "CoarseGrained" not in _cmdline(crashed)
    case.assert_matches_batch()
    error_file = os.path.join(tempfile.gettempdir(), f"sparkstate-hs_err_{crashed}.log")
    if os.path.exists(error_file):  # the JVM's crash report
        os.remove(error_file)
