"""Store workers never outlive their JVM, even when it is killed with SIGKILL, and leave no segment file."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import selected_provider

from sparkstate_jobs import procfs

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's worker processes")

DRIVER = textwrap.dedent("""
    import os, sys, time
    import sparkstate
    from pyspark.sql import SparkSession, functions as F
    spark = sparkstate.configure(SparkSession.builder.master("local[2]")
                                 .config("spark.ui.enabled", "false")
                                 .config("spark.sql.shuffle.partitions", "2")).getOrCreate()
    os.makedirs(sys.argv[1] + "/in")
    with open(sys.argv[1] + "/in/0.json", "w") as f:
        f.write("\\n".join('{"k": %d}' % (i % 5) for i in range(50)))
    q = (spark.readStream.schema("k long").json(sys.argv[1] + "/in").groupBy("k").count()
         .writeStream.outputMode("update").format("noop")
         .option("checkpointLocation", sys.argv[1] + "/ckpt").trigger(availableNow=True).start())
    q.awaitTermination()
    jvm = spark.sparkContext._jvm.ProcessHandle.current().pid()
    print("JVM", jvm, flush=True)
    time.sleep(600)
""")


def _shm_mappings(pid: int) -> list[str]:
    with open(f"/proc/{pid}/maps") as f:
        return [line.strip() for line in f if "sparkstate-shm-" in line]


def _start_driver(workdir, env: dict) -> tuple[subprocess.Popen, int]:
    """A driver process that ran one batch and now idles with its workers live; returns it and its JVM's pid."""
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(workdir)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **env})
    for line in driver.stdout:
        if line.startswith("JVM "):
            return driver, int(line.split()[1])
    driver.kill()
    driver.wait()
    raise AssertionError("the driver did not start a query")


def test_a_killed_jvms_workers_exit_and_the_next_worker_start_removes_their_directories(tmp_path):
    local = tmp_path / "local"  # the application's scratch space, as a cluster manager gives it
    local.mkdir()
    root = local / f"sparkstate-w-{os.getuid()}"
    env = {"SPARK_LOCAL_DIRS": str(local)}
    first, jvm = _start_driver(tmp_path / "first", env)
    try:
        workers = [p for p in procfs.children(jvm) if procfs.is_store_worker(p)]
        assert workers, "no sparkstate worker was started"
        segments = [line for p in workers for line in _shm_mappings(p)]
        assert segments, "no worker mapped a shared-memory segment (the default transport is shm)"
        assert all(line.endswith("(deleted)") for line in segments), \
            f"a segment file outlived the attach: {segments}"  # nothing is left in /dev/shm after a crash
        left = sorted(os.listdir(root))
        assert left, f"no worker directory under the scratch space {local}"
        assert {"owner.lock", "stderr.log", "heartbeat"} <= set(os.listdir(root / left[0]))
        os.kill(jvm, signal.SIGKILL)
        deadline = time.time() + 20
        while time.time() < deadline and any(procfs.is_store_worker(p) for p in workers):
            time.sleep(0.2)
        assert not [p for p in workers if procfs.is_store_worker(p)], "workers outlived their killed JVM"
    finally:
        first.kill()
        first.wait()
    assert sorted(os.listdir(root)) == left, "a JVM killed with SIGKILL cannot remove its workers' directories"

    second, _ = _start_driver(tmp_path / "second", env)
    try:
        live = sorted(os.listdir(root))
        assert live, "the second driver's live workers have their directories"
        assert not set(live) & set(left), f"the killed JVM's directories {left} are still there: {live}"
    finally:
        second.kill()
        second.wait()
