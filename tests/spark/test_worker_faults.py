"""A worker that hangs, stalls or is cancelled never stalls a query, and a slow one is not killed.

Faults are injected into the workers through `pythonExec` (fault_plugin.py): a SIGSTOP in the middle of
a control call or of data calls, a slow commit, slow gets while the job is cancelled. Every query's
result is compared with the same computation in batch. The session runs `local[2,4]` so Spark retries a
failed task, and the heartbeat timeout is short so a hang is detected in seconds.
"""
from __future__ import annotations

import os
import threading
import time

import pytest

from conftest import selected_provider
from datagen import EVENT_SCHEMA, random_events
from fault_plugin import fault_python, fired
from spark_harness import PREFIX, AggregationCase, InputDir, run_available_now, session_conf

HEARTBEAT_MS = 2000

pytestmark = [
    pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's worker processes"),
    pytest.mark.spark_conf({"spark.master": "local[2,4]"}),
    pytest.mark.sparkstate_settings(workerHeartbeatTimeoutMs=HEARTBEAT_MS),
]

BACKENDS = ["rocksdb", "heap"]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_gone(pid: int, timeout_s: float = 10) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


def _machine_oom_kills() -> int:
    with open("/proc/vmstat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("oom_kill "))


def _running_tasks(spark) -> int:
    return sum(e.numRunningTasks() for e in spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos())


def _wait_no_running_tasks(spark, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _running_tasks(spark) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _running_tasks(spark) == 0


def _conf(backend: str, python: str) -> dict[str, str]:
    return {PREFIX + "backend": backend, PREFIX + "pythonExec": python}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", ["load", "get"])
def test_worker_stopped_mid_call_fails_the_task_and_the_retry_is_exact(spark, tmp_path, backend, call):
    """SIGSTOP inside a control call (load) or a data call (get) of the second run's stores: the watchdog
    kills the worker within the heartbeat timeout, the task is retried on a fresh worker."""
    job = AggregationCase(spark, tmp_path, seed=31, per_file=60, n_keys=15)
    job.source.add_all(job.files[0:2])
    job.run({PREFIX + "backend": backend})
    marker = str(tmp_path / "stop")
    rule = {"target": f"sparkstate.engine.store:Store.{call}", "when": "version is not None and version >= 2",
            "action": "sigstop", "times": 1, "marker": marker}
    started = time.monotonic()
    job.source.add_all(job.files[2:4])
    job.run(_conf(backend, fault_python(str(tmp_path), [rule])))
    elapsed = time.monotonic() - started
    stops = fired(marker)
    assert len(stops) == 1, f"the fault fired {len(stops)} times"
    assert _wait_gone(stops[0]["pid"]), f"the stopped worker {stops[0]['pid']} is still there"
    job.assert_matches_batch()
    assert elapsed < 90, f"the run took {elapsed:.0f} s: the hang was not cut short"


def test_stuck_worker_error_names_the_call_the_store_and_where_it_hung(spark, tmp_path):
    """A worker stuck in a commit on every attempt (alive, beating, no progress): the query fails, and
    its error says which call on which store, for how long, and the Python stack of the thread that hung
    (faulthandler on SIGUSR1). A noop sink: Spark 4.3 hangs a foreachBatch query whose error is long
    (StreamExecution.PROXY_ERROR overflows the stream thread's stack), see the README."""
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    source.add_all(random_events(seed=32, n_files=1, per_file=40, n_keys=10))
    rule = {"target": "sparkstate.engine.store:Store.commit", "when": "partition == 0",
            "action": "sleep", "seconds": 3600}
    conf = {PREFIX + "pythonExec": fault_python(str(tmp_path), [rule]), PREFIX + "workerStallTimeoutMs": "3000"}
    with session_conf(spark, conf):
        agg = source.stream().groupBy("k").count()
        with pytest.raises(Exception) as failure:
            run_available_now(agg.writeStream.outputMode("update").format("noop"), str(tmp_path / "ckpt"))
    message = str(failure.value)
    assert "stuck: it made no progress for" in message, message[:3000]
    assert "commit of store handle" in message, message[:3000]
    assert "partition=0" in message, message[:3000]
    assert "in flight for" in message, message[:3000]
    assert "in _fire" in message and "control.py" in message, \
        f"no stack of the hung thread in the error: {message[:3000]}"
    assert "out-of-memory" not in message, "sparkstate's own kill of a hung worker read as the kernel's"


def test_a_worker_killed_from_outside_points_at_memory(spark, tmp_path):
    """A worker SIGKILLed by something else than sparkstate, on every attempt, as the kernel's out-of-memory
    killer does: the query's error names the signal, what the kernel's OOM-kill counts say (here: no OOM kill,
    the fault plugin sent it) and the setting that gives the workers memory."""
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    source.add_all(random_events(seed=33, n_files=1, per_file=40, n_keys=10))
    rule = {"target": "sparkstate.engine.store:Store.commit", "when": "partition == 0", "action": "sigkill"}
    oom_kills_before = _machine_oom_kills()
    with session_conf(spark, {PREFIX + "pythonExec": fault_python(str(tmp_path), [rule])}):
        agg = source.stream().groupBy("k").count()
        with pytest.raises(Exception) as failure:
            run_available_now(agg.writeStream.outputMode("update").format("noop"), str(tmp_path / "ckpt"))
    message = str(failure.value)
    assert "killed by signal 9, SIGKILL" in message, message[:3000]
    assert "The worker was killed (SIGKILL)" in message, message[:3000]
    if _machine_oom_kills() == oom_kills_before:  # the fault plugin's kill, no real OOM kill meanwhile
        assert "counted no out-of-memory kill" in message, message[:3000]
    else:
        assert "killed for memory" in message or "memory limit killed it" in message, message[:3000]
    assert "spark.executor.memoryOverhead" in message, message[:3000]
    assert "spark.executor.pyspark.memory is PySpark's own workers' budget and does not cover" in message, \
        message[:3000]


@pytest.mark.parametrize("backend", BACKENDS)
def test_slow_but_steady_commit_is_not_killed(spark, tmp_path, backend):
    """A commit that takes longer than the heartbeat timeout while the worker keeps beating: no kill."""
    job = AggregationCase(spark, tmp_path, seed=33, per_file=60, n_keys=15)
    job.source.add_all(job.files[0:2])
    job.run({PREFIX + "backend": backend})
    marker = str(tmp_path / "slow")
    rule = {"target": "sparkstate.engine.store:Store.commit", "when": "partition == 1",
            "action": "sleep", "seconds": HEARTBEAT_MS / 1000 * 2, "times": 2, "marker": marker}
    job.source.add_all(job.files[2:4])
    job.run(_conf(backend, fault_python(str(tmp_path), [rule])))
    slow = fired(marker)
    assert len(slow) == 2
    assert len({f["pid"] for f in slow}) == 1, f"the slow worker was replaced: {slow}"
    assert not _gone(slow[0]["pid"]), "the slow worker was killed"
    job.assert_matches_batch()


@pytest.mark.parametrize("backend,transport", [("rocksdb", "shm"), ("heap", "shm"), ("rocksdb", "socket")])
def test_cancelled_job_keeps_its_workers(spark, tmp_path, backend, transport):
    """Tasks interrupted inside store calls (the job cancelled from another thread while every get is
    slow): the workers survive and serve the next run, results exact. Over shm the request in flight is
    completed; over the socket NIO closes the channel under the interrupted thread and the worker is
    drained before its next task."""
    job = AggregationCase(spark, tmp_path, seed=34, per_file=60, n_keys=15)
    job.source.add_all(job.files[0:2])
    job.run({PREFIX + "backend": backend})
    marker = str(tmp_path / "slow-get")
    rule = {"target": "sparkstate.engine.store:Store.get", "when": "version is not None and version >= 2",
            "action": "sleep", "seconds": 0.05, "marker": marker}
    python = fault_python(str(tmp_path), [rule])
    sc = spark.sparkContext

    def cancel_once_gets_run() -> None:
        deadline = time.time() + 60
        while time.time() < deadline and len(fired(marker)) < 3:
            time.sleep(0.05)
        sc.cancelAllJobs()

    canceller = threading.Thread(target=cancel_once_gets_run)
    canceller.start()
    job.source.add_all(job.files[2:3])
    with pytest.raises(Exception, match="cancel"):
        job.run({**_conf(backend, python), PREFIX + "transport": transport})
    canceller.join()
    before = {f["pid"] for f in fired(marker)}
    assert before, "no get was slowed"
    # The cancelled tasks return their workers once the slowed get in flight is answered; the next run
    # starting before that (a loaded machine) would find them busy and lease others.
    _wait_no_running_tasks(spark, 30)
    os.remove(marker + ".log")
    job.source.add_all(job.files[3:4])
    job.run({**_conf(backend, python), PREFIX + "transport": transport})
    after = {f["pid"] for f in fired(marker)}
    assert all(not _gone(pid) for pid in before), "a cancelled task's worker died"
    assert after & before, f"the next run used new workers {after} instead of {before}"
    job.assert_matches_batch()


def test_a_stopped_query_frees_the_task_threads_of_a_hung_worker(spark, tmp_path):
    """query.stop() while a task waits in a control call (py4j, which an interrupt cannot end) on a
    stopped worker: the task thread is freed within the heartbeat timeout (the watchdog kills the
    worker), so no executor slot stays taken."""
    job = AggregationCase(spark, tmp_path, seed=35)
    job.source.add_all(job.files)
    marker = str(tmp_path / "stop")
    rule = {"target": "sparkstate.engine.store:Store.load", "action": "sigstop", "times": 1, "marker": marker}
    with session_conf(spark, {PREFIX + "pythonExec": fault_python(str(tmp_path), [rule])}):
        query = job.writer().option("checkpointLocation", job.checkpoint).start()
        try:
            deadline = time.monotonic() + 60
            while not fired(marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert fired(marker), "no worker was stopped"
        finally:
            query.stop()
    assert _wait_no_running_tasks(spark, HEARTBEAT_MS / 1000 + 20), "a task thread is still blocked"
    assert _wait_gone(fired(marker)[0]["pid"])
