"""Operator correctness with state on S3 (a real SeaweedFS server on free loopback ports), plus the
server stopped in the middle of a batch.

Spark's own files (offsets, commits, sink) stay on local disk: this Spark has no S3 connector. The
state goes to `stateLocation = s3://<bucket>/state`, reached through the `spark.hadoop.fs.s3a.*` keys a
user would set (the shim forwards the Hadoop conf's `fs.s3a.*` entries).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import pytest
from conftest import selected_provider
from datagen import EVENT_SCHEMA, random_events
from pyspark.sql import functions as F
from spark_harness import (
    PREFIX,
    AggregationCase,
    BatchCollector,
    InputDir,
    assert_same_rows,
    committed_batches,
    run_available_now,
    session_conf,
)
from test_operators import (  # noqa: F401
    test_aggregation_update_mode,
    test_apply_in_pandas_with_state_event_time_timeout,
    test_stream_stream_inner_join,
)

import sparkstate
from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tests.storage.s3_server import SeaweedServer, serving, spark_state_on_s3_marks  # noqa: E402

BUCKET = "sparkstate-state"
_DIR = tempfile.mkdtemp(prefix="sparkstate-s3-spark-")
SERVER = SeaweedServer(_DIR)  # ports chosen now, so the session conf below can name the endpoint

pytestmark = spark_state_on_s3_marks(SERVER, BUCKET, selected_provider())
VARIANTS = ("rocksdb", "heap")


@pytest.fixture(scope="module", autouse=True)
def s3_server():
    """Started before the module's SparkSession (autouse fixtures of a scope come first)."""
    yield from serving(SERVER, BUCKET)


def _keys(prefix: str) -> list[str]:
    client = SERVER.client()
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", ())]
    return out


def test_state_lives_on_s3_not_in_the_checkpoint(spark, tmp_path, variant):
    test_aggregation_update_mode(spark, tmp_path, variant)
    manifests = [k for k in _keys("state/") if "/sparkstate/manifests/" in k]
    assert manifests, "no manifest on S3"
    local = [os.path.join(d, n) for d, _, ns in os.walk(tmp_path / "checkpoint") for n in ns]
    assert not any("/sparkstate/" in p for p in local)


def _kill_server_on_sentinel(pid_file: str):
    """mapInPandas body on the map side of the state stage: the first time it sees the sentinel row it
    SIGKILLs the S3 server (pid from `pid_file`, then removed), so the state stage that follows finds
    its stores loaded in memory and fails in its commit's uploads."""

    def fn(batches):
        import os as _os
        import signal as _signal

        for pdf in batches:
            if (pdf["id"] == "kill-switch").any() and _os.path.exists(pid_file):
                with open(pid_file) as f:
                    pid = int(f.read())
                _os.remove(pid_file)
                _os.killpg(pid, _signal.SIGKILL)
            yield pdf

    return fn


def test_server_stopped_mid_commit_then_restart_is_exact(spark, tmp_path, variant):
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint, pid_file = str(tmp_path / "ckpt"), str(tmp_path / "server.pid")
    files = random_events(seed=33, n_files=5, per_file=60, n_keys=15)
    files[3] = files[3] + [{**files[3][0], "id": "kill-switch"}]
    sink = BatchCollector()

    def writer():
        events = source.stream().mapInPandas(_kill_server_on_sentinel(pid_file), source.stream().schema)
        agg = events.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        return sink.attach(agg.writeStream.outputMode("update"))

    source.add_all(files[:2])
    run_available_now(writer(), checkpoint)
    first = committed_batches(checkpoint)
    with open(pid_file, "w") as f:
        f.write(str(SERVER.proc.pid))
    source.add_all(files[2:4])  # one batch per file: file 2 commits, file 3 kills the server
    t0 = time.monotonic()
    with pytest.raises(Exception, match=r"(?s)cannot commit.*StorageError: S3 (upload|conditional PUT) of s3://"):
        run_available_now(writer(), checkpoint, timeout_s=120)
    failed_after = time.monotonic() - t0
    assert not os.path.exists(pid_file), "the server was not killed"
    assert len(committed_batches(checkpoint)) == len(first) + 1  # file 2's batch only
    SERVER.stop()  # reap the killed process
    SERVER.start()
    source.add_all(files[4:])
    run_available_now(writer(), checkpoint)
    assert committed_batches(checkpoint)[-1] > first[-1] + 1
    expected = source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")).collect()
    assert_same_rows(sink.updated(["k"]), expected, min_rows=15)
    assert failed_after < 90


def test_heap_state_files_are_on_s3(spark, tmp_path, s3_server):
    with session_conf(spark, {PREFIX + "backend": "heap"}):
        test_aggregation_update_mode(spark, tmp_path, "heap")
    keys = [o["Key"] for page in s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", ())]
    assert any(k.endswith(".manifest") for k in keys) and any(".arrow" in k or "delta" in k for k in keys), keys[:20]
    assert not any("sparkstate" in dirs for _, dirs, _ in os.walk(str(tmp_path / "checkpoint" / "state")))


def test_rescale_and_migrate_reach_state_on_s3_through_the_s3a_keys(spark, tmp_path):
    """The module's session reaches the S3 server through `spark.hadoop.fs.s3a.*` only: a rescale and a
    migration out and back in, run from that session, reach the state with the same keys."""
    case = AggregationCase(spark, tmp_path, seed=81, n_files=4)
    case.source.add_all(case.files[:1])
    case.run()
    sparkstate.rescale(spark, case.checkpoint, 5)
    case.source.add_all(case.files[1:2])
    case.run()
    sparkstate.migrate(spark, case.checkpoint, "rocksdb")
    case.source.add_all(case.files[2:3])
    case.run({PROVIDER_CLASS_CONF: "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"})
    sparkstate.migrate(spark, case.checkpoint, "sparkstate", backend="heap")
    case.source.add_all(case.files[3:])
    case.run({PREFIX + "backend": "heap"})
    case.assert_matches_batch()
    assert [k for k in _keys("state/") if "/sparkstate/manifests/" in k]
