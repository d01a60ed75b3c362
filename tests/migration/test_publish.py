"""The migration's publish step without Spark (logs written by hand): the offset log entry of the migration's
batch is its claim on the batch, so nothing else is written before it. A file sink's entry written first
would make a batch that a restart on the source provider plans (after a crash) or that a query started
meanwhile runs skip its output."""
from __future__ import annotations

import json

import pytest

from sparkstate.config import PROVIDER_CLASS
from sparkstate.errors import MigrationError
from sparkstate.migration import runner
from sparkstate.migration.plan import MigrationPlan
from sparkstate.storage import fileio_for

from ..storage.instrumented import InjectedFault, InstrumentedFileIO

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def _checkpoint(root, batches: int) -> str:
    ckpt = root / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    for batch in range(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0,
                "conf": {"spark.sql.shuffle.partitions": "2",
                         "spark.sql.streaming.stateStore.providerClass": PROVIDER_CLASS}}
        (ckpt / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{{\"logOffset\":{batch}}}")
        (ckpt / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return str(ckpt)


def _sink(root, batches: int) -> str:
    log = root / "out" / "_spark_metadata"
    log.mkdir(parents=True)
    for batch in range(batches):
        (log / str(batch)).write_text('v1\n{"path":"file:/x/part-%d.parquet","size":1}' % batch)
    return str(root / "out")


def _plan(ckpt: str, last: int) -> MigrationPlan:
    return MigrationPlan(checkpoint=ckpt, source_class=PROVIDER_CLASS, target_class=HDFS, backend=None,
                         last_committed_batch=last, partitions=2, stores=())


def test_a_query_started_meanwhile_fails_the_publish_before_any_sink_entry(tmp_path):
    ckpt, sink = _checkpoint(tmp_path, 3), _sink(tmp_path, 3)
    (tmp_path / "ckpt" / "offsets" / "3").write_text((tmp_path / "ckpt" / "offsets" / "2").read_text())
    with pytest.raises(MigrationError, match="appeared while migrating"):
        runner._publish(_plan(ckpt, 2), fileio_for(ckpt), [sink], 10, [])
    assert not (tmp_path / "out" / "_spark_metadata" / "3").exists()  # the query's batch 3 writes its output


def test_a_crash_before_the_offset_entry_leaves_the_sink_log_as_it_was(tmp_path):
    ckpt, sink = _checkpoint(tmp_path, 3), _sink(tmp_path, 3)
    io = InstrumentedFileIO()
    io.fail("create_exclusive", "*/offsets/*")  # the process dies writing the offset log entry
    with pytest.raises(InjectedFault):
        runner._publish(_plan(ckpt, 2), io, [sink], 10, [])
    assert not (tmp_path / "out" / "_spark_metadata" / "3").exists()

    runner._publish(_plan(ckpt, 2), fileio_for(ckpt), [sink], 10, [])  # the re-run
    assert (tmp_path / "out" / "_spark_metadata" / "3").read_text() == "v1"
    assert HDFS in (tmp_path / "ckpt" / "offsets" / "3").read_text()
    assert (tmp_path / "ckpt" / "commits" / "3").exists()
