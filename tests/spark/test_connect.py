"""A Spark Connect server started as a user would (`sbin/start-connect-server.sh --properties-file` with
the file `sparkstate conf-docs --spark-defaults` prints) and a Connect client in this process: stateful
streaming queries sent through Connect run on sparkstate and match their batch computation across a
stop and restart, and `sparkstate.rescale` given the Connect session refuses at once.

The client needs PySpark's Connect libraries (grpcio, grpcio-status, googleapis-common-protos,
zstandard: the test extras); the server needs the spark-connect jar, which pyspark ships.
"""
from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pyspark
import pytest
import test_operators as operators
from conftest import BASE_CONF, selected_provider
from pyspark.sql import SparkSession

import sparkstate
from sparkstate.errors import ClassicSessionRequired
from sparkstate_jobs import procfs

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tests.storage.s3_server import free_ports

VARIANTS = ("rocksdb",)
PROVIDER = "io.sparkstate.PythonStateStoreProvider"
SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate behind Spark Connect")]


class ConnectServer:
    """`start-connect-server.sh --wait` (in the foreground, no pid file) on a free port, local[2], with
    sparkstate's properties file; `stop()` SIGKILLs it and every process below it (the store workers)."""

    def __init__(self, base: str) -> None:
        self.base = base
        (self.port,) = free_ports(1)
        self.log = os.path.join(base, "server.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> ConnectServer:
        properties = os.path.join(self.base, "sparkstate.conf")
        with open(properties, "w") as f:
            subprocess.run([sys.executable, "-m", "sparkstate.cli", "conf-docs", "--spark-defaults"], stdout=f,
                           check=True, timeout=120)
        conf = {**BASE_CONF, "spark.master": "local[2]", "spark.connect.grpc.binding.port": str(self.port)}
        conf.pop("spark.driver.memory")  # a spark-submit option below
        args = [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]
        env = {**os.environ, "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": self.base, "SPARK_PID_DIR": self.base}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [os.path.join(SPARK_HOME, "sbin", "start-connect-server.sh"), "--wait", "--properties-file",
                 properties, "--driver-memory", "1g", *args],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Connect server exited with {self.proc.returncode}; see {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Connect server did not listen within {timeout}s; see {self.log}")
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is None:
            return
        for pid in [self.proc.pid, *procfs.descendants(self.proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server():
    started = ConnectServer(tempfile.mkdtemp(prefix="sparkstate-connect-"))
    try:
        yield started.start()
    finally:
        started.stop()


@pytest.fixture(scope="module")
def spark(server):
    """The module's session: a Connect client of the server (the operator tests take it as `spark`)."""
    saved = {k: os.environ.get(k) for k in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    deadline = time.monotonic() + 120
    while True:  # the port opens a moment before the server answers
        try:
            session = SparkSession.builder.remote(f"sc://localhost:{server.port}").getOrCreate()
            session.range(1).collect()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    try:
        yield session
    finally:
        session.stop()
        # Creating a Connect session marks this process as a Connect client (pyspark.sql.functions then
        # builds Connect columns); later modules build classic sessions.
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_the_session_is_a_connect_client(spark):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(spark, ConnectSession)
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass") == PROVIDER


# Queries of test_operators.py sent through Connect: each runs, stops, restarts on the same checkpoint
# and is compared with the batch computation (file sinks: a foreachBatch function would run in the
# server's Python, which cannot import the tests' helpers).
test_windowed_count_append_mode_with_watermark = operators.test_windowed_count_append_mode_with_watermark
test_drop_duplicates = operators.test_drop_duplicates
test_stream_stream_inner_join = operators.test_stream_stream_inner_join


def test_the_state_is_sparkstates_and_rescale_refuses_the_connect_session(spark, tmp_path):
    operators.test_drop_duplicates(spark, tmp_path, "rocksdb")
    checkpoint = str(tmp_path / "checkpoint")
    stores = glob.glob(os.path.join(checkpoint, "state", "0", "*", "sparkstate", "manifests"))
    assert len(stores) == 3, stores  # one per shuffle partition, in sparkstate's layout
    last_offsets = max(glob.glob(os.path.join(checkpoint, "offsets", "[0-9]*")), key=lambda p: int(os.path.basename(p)))
    with open(last_offsets) as f:
        assert f'"spark.sql.streaming.stateStore.providerClass":"{PROVIDER}"' in f.read()

    def listing() -> list[tuple[str, int]]:
        return sorted((os.path.join(d, n), os.path.getsize(os.path.join(d, n)))
                      for d, _, names in os.walk(checkpoint) for n in names)

    before = listing()
    t0 = time.monotonic()
    with pytest.raises(ClassicSessionRequired) as refused:
        sparkstate.rescale(spark, checkpoint, 4)
    assert time.monotonic() - t0 < 5
    message = str(refused.value)
    assert "needs a classic SparkSession" in message and "Spark Connect" in message
    assert listing() == before
