"""Spark's checkpoint format v2 (`stateStore.checkpointFormatVersion=2`): every state commit has a unique id
that the driver records in its commit log, and a load takes exactly the recorded attempt.

The operator matrix (imported from test_operators.py) runs here again, in this module's v2 session, across
a stop and restart, compared with the same computation in batch, and so do tests of Spark's state data
source (change feed, snapshot replay: test_change_feed.py, whose fixture keeps RocksDB change logs here)
and `sparkstate rescale` (test_rescale.py). Then the faults v2 exists for: a task
retried after its store committed, and a batch re-executed after a driver crash mid-commit with a
non-deterministic function, with a late publish of the killed attempt on top, compared with Spark's own
RocksDB provider on format v2.
"""
from __future__ import annotations

import glob
import json
import os

import pytest
from pyspark.sql import functions as F

from sparkstate.checkpoint import Manifest

from conftest import selected_provider
from datagen import EVENT_SCHEMA, advance_row, max_t, random_events
from spark_harness import (
    PREFIX,
    AggregationCase,
    BatchCollector,
    InputDir,
    assert_same_rows,
    read_parquet_sink,
    run_available_now,
    session_conf,
)
from test_change_feed import (  # noqa: F401 - the state data source on v2 checkpoints
    change_logs,
    test_aggregation_with_watermark_eviction,
    test_snapshot_replay_gives_the_plain_readers_rows_and_names_a_missing_snapshot,
)
from test_failures import test_task_failure_after_state_commit_recommits_the_same_version  # noqa: F401
from test_operators import (  # noqa: F401 - collected here, in this module's v2 session
    DELAY_S,
    JOIN_RANGE_S,
    JOIN_SCHEMA,
    _join,
    _join_inputs,
    test_aggregation_update_mode,
    test_apply_in_pandas_with_state_event_time_timeout,
    test_drop_duplicates,
    test_session_window_append_mode,
    test_stream_stream_left_outer_join,
)
from test_rescale import (  # noqa: F401 - sparkstate rescale on v2 checkpoints
    test_global_aggregation_3_to_5_is_copied_as_one_partition,
    test_stream_stream_join_3_to_12,
)
from test_reexecuted_batch import _forget_last_commit, _generation_udf

FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
SPARK_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# The imported tests run on the rocksdb backend here; the tests below cover both backends.
VARIANTS = ("rocksdb",)

# local[2,4]: Spark retries a failed task (the imported task-failure test needs it)
pytestmark = [pytest.mark.spark_conf({FORMAT_KEY: "2", "spark.master": "local[2,4]"})]


def _commit_log_ids(checkpoint: str, batch: int) -> dict[str, list[list[str]]]:
    with open(os.path.join(checkpoint, "commits", str(batch))) as f:
        header, body = f.read().split("\n", 1)
    assert header == "v2"
    return json.loads(body)["stateUniqueIds"]


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="reads sparkstate's manifests")
@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_the_commit_log_records_the_ids_of_the_attempts_each_store_committed(spark, tmp_path, backend):
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "ckpt")
    source.add_all(random_events(seed=5, n_files=2, per_file=30, n_keys=10))
    with session_conf(spark, {PREFIX + "backend": backend}):
        agg = source.stream().groupBy("k").agg(F.count("*").alias("n"))
        run_available_now(BatchCollector().attach(agg.writeStream.outputMode("update")), checkpoint)
    ids = _commit_log_ids(checkpoint, 1)["0"]
    assert len(ids) == 3  # one list per partition (spark.sql.shuffle.partitions), one id per store
    for partition, (checkpoint_id,) in enumerate(ids):
        manifests = os.path.join(checkpoint, "state", "0", str(partition), "sparkstate", "manifests")
        assert os.path.exists(os.path.join(manifests, f"2_{checkpoint_id}.manifest"))


class CrashedRerun:
    """Batches 0-2, a crash between the state commits of batch 2 and its commit log entry, a re-run of
    batch 2 that computes other values (a non-deterministic function), then more batches in a new run."""

    def __init__(self, spark, tmp_path, name: str, files) -> None:
        self.spark = spark
        self.source = InputDir(spark, str(tmp_path / name / "in"), EVENT_SCHEMA)
        self.checkpoint = str(tmp_path / name / "ckpt")
        self.generation = str(tmp_path / name / "generation")
        self.files = files
        self.sink = BatchCollector()

    def _run(self, conf: dict[str, str]) -> None:
        with session_conf(self.spark, conf):
            shifted = self.source.stream().select("k", _generation_udf(self.generation)("v").alias("w"))
            counts = shifted.groupBy("k").agg(F.sum("w").alias("total"), F.count("*").alias("n"))
            run_available_now(self.sink.attach(counts.writeStream.outputMode("update")), self.checkpoint)

    def _set_generation(self, value: int) -> None:
        with open(self.generation, "w") as f:
            f.write(str(value))

    def run(self, conf: dict[str, str], on_crash=None, after_rerun=None) -> BatchCollector:
        os.makedirs(os.path.dirname(self.generation), exist_ok=True)
        self._set_generation(0)
        self.source.add_all(self.files[:3])
        self._run(conf)
        if on_crash is not None:
            on_crash()
        assert _forget_last_commit(self.checkpoint) == 2
        self._set_generation(1000)
        self._run(conf)  # re-runs batch 2 only: its attempt is the one the commit log records
        if after_rerun is not None:
            after_rerun()
        self._set_generation(0)
        self.source.add_all(self.files[3:])
        self._run(conf)
        return self.sink


def _killed_attempts(checkpoint: str) -> dict[str, bytes]:
    """Every store's manifest of version 3 as the killed attempt committed it (before the re-run)."""
    out = {}
    for path in glob.glob(os.path.join(checkpoint, "state", "*", "*", "sparkstate", "manifests", "3_*.manifest")):
        with open(path, "rb") as f:
            out[os.path.dirname(path)] = f.read()
    return out


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="compares sparkstate with Spark's RocksDB provider")
@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_a_rerun_after_a_driver_crash_counts_as_recorded_even_if_the_killed_attempt_publishes_last(
        spark, tmp_path, backend):
    files = random_events(seed=93, n_files=5, per_file=80, n_keys=40)
    reference = CrashedRerun(spark, tmp_path, "spark-rocksdb", files).run({PROVIDER_KEY: SPARK_ROCKSDB})

    ours = CrashedRerun(spark, tmp_path, backend, files)
    killed: dict[str, bytes] = {}

    def zombie_publishes_late() -> None:
        # The killed attempt's task outlived the crash and published version 3 after the re-run: the version's
        # plain manifest is now its. Only the commit log's ids tell the recorded attempt apart.
        assert killed, "the killed attempt left no manifest of version 3"
        for manifests, data in killed.items():
            with open(os.path.join(manifests, "3.manifest"), "wb") as f:
                f.write(data)

    result = ours.run({PREFIX + "backend": backend}, on_crash=lambda: killed.update(_killed_attempts(ours.checkpoint)),
                      after_rerun=zombie_publishes_late)
    recorded = {os.path.join(ours.checkpoint, "state", "0", str(p), "sparkstate", "manifests"): ids[0]
                for p, ids in enumerate(_commit_log_ids(ours.checkpoint, 2)["0"])}
    for manifests, data in killed.items():
        assert Manifest.from_bytes(data, manifests).checkpoint_id != recorded[manifests], \
            "the re-run's attempt was not recorded"
    assert_same_rows(result.updated(["k"]), reference.updated(["k"]), min_rows=40)


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's tools")
def test_a_recorded_attempt_missing_from_the_state_files_fails_clearly(spark, tmp_path):
    """A load of an attempt the state files do not hold names the attempt and what to check."""
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "ckpt")
    source.add_all(random_events(seed=7, n_files=2, per_file=30, n_keys=10))

    def writer():
        agg = source.stream().groupBy("k").agg(F.count("*").alias("n"))
        return BatchCollector().attach(agg.writeStream.outputMode("update"))

    run_available_now(writer(), checkpoint)
    for path in glob.glob(os.path.join(checkpoint, "state", "0", "*", "sparkstate", "manifests", "2_*.manifest")):
        os.remove(path)  # the attempts the commit log recorded are gone
    source.add_all(random_events(seed=8, n_files=1, per_file=30, n_keys=10))
    with pytest.raises(Exception, match="no manifest of attempt .*commit log recorded"):
        run_available_now(writer(), checkpoint)


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's tools")
def test_migrate_to_hdfs_refuses_a_format_v2_checkpoint_by_name_and_changes_nothing(spark, tmp_path):
    import sparkstate
    from sparkstate.errors import MigrationError

    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "ckpt")
    source.add_all(random_events(seed=9, n_files=1, per_file=20, n_keys=5))
    agg = source.stream().groupBy("k").agg(F.count("*").alias("n"))
    run_available_now(BatchCollector().attach(agg.writeStream.outputMode("update")), checkpoint)
    before = sorted(os.path.relpath(os.path.join(d, f), checkpoint) for d, _, fs in os.walk(checkpoint) for f in fs)
    with pytest.raises(MigrationError, match="checkpoint format v2.*HDFS provider does not serve"):
        sparkstate.migrate(spark, checkpoint, "hdfs")
    after = sorted(os.path.relpath(os.path.join(d, f), checkpoint) for d, _, fs in os.walk(checkpoint) for f in fs)
    assert after == before


def _migrated_ids_are_the_targets(checkpoint: str, batch: int, target: str) -> None:
    """The migration batch's commit log entry records, per store, an attempt of version batch+1 that the
    target wrote: sparkstate's attempt manifest, or Spark's RocksDB provider's <v>_<id> file."""
    version = batch + 1
    for op, partitions in _commit_log_ids(checkpoint, batch).items():
        for part, ids in enumerate(partitions):
            for checkpoint_id in ids:
                if target == "sparkstate":
                    pattern = f"state/{op}/{part}/**/sparkstate/manifests/{version}_{checkpoint_id}.manifest"
                else:
                    pattern = f"state/{op}/{part}/**/{version}_{checkpoint_id}.*"
                assert glob.glob(os.path.join(checkpoint, pattern), recursive=True), (batch, op, part, checkpoint_id)


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's tools")
def test_an_aggregation_moves_both_ways_between_spark_rocksdb_and_sparkstate(spark, tmp_path):
    """Spark's RocksDB provider -> sparkstate (rocksdb) -> Spark's RocksDB provider -> sparkstate (heap), a run
    after each move, all on format v2: the result is the batch computation's, every migration batch records
    the target's attempts, and the checkpoint verifies."""
    import sparkstate
    from sparkstate.inspection import verify_checkpoint
    from sparkstate.inspection.verify import format_report
    from sparkstate.storage import fileio_for

    case = AggregationCase(spark, tmp_path, seed=69, n_files=4)
    case.source.add_all(case.files[:1])
    case.run({PROVIDER_KEY: SPARK_ROCKSDB})
    for i, (target, backend) in enumerate([("sparkstate", "rocksdb"), ("rocksdb", None), ("sparkstate", "heap")]):
        summary = sparkstate.migrate(spark, case.checkpoint, target, backend=backend)
        assert summary.rows == case.n_keys
        _migrated_ids_are_the_targets(case.checkpoint, summary.batch_id, target)
        case.source.add_all(case.files[i + 1:i + 2])
        case.run({PREFIX + "backend": backend or "rocksdb"})
    case.assert_matches_batch()
    report = verify_checkpoint(case.checkpoint, fileio_for(case.checkpoint), fileio_for(case.checkpoint))
    assert report.ok, format_report(report, "verify")
    assert {s.backend for s in report.stores} == {"heap"}  # the newest version's backend, not the first's


@pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's tools")
def test_a_stream_stream_join_moves_in_and_out_with_its_four_stores_in_the_recorded_order(spark, tmp_path):
    """A join's commit log entry lists its four stores' ids by position, without names: after a move in and a
    move out each position still holds its own store's attempt, or the restarted join would read another
    store's state. Into Spark's file sink, whose own log gets each migration's batch."""
    import sparkstate

    n_files = 6
    left_files, right_files = _join_inputs(70, n_files)
    left_files.append([advance_row(n_files, "adv-left")])
    right_files.append([advance_row(n_files, "adv-right")])
    left = InputDir(spark, str(tmp_path / "left"), JOIN_SCHEMA)
    right = InputDir(spark, str(tmp_path / "right"), JOIN_SCHEMA)
    checkpoint, output = str(tmp_path / "checkpoint"), str(tmp_path / "output")

    def run(lo: int, hi: int, conf: dict) -> None:
        left.add_all(left_files[lo:hi])
        right.add_all(right_files[lo:hi])
        with session_conf(spark, conf):
            run_available_now(_join(left.stream(), right.stream(), "left_outer", streaming=True).writeStream
                              .outputMode("append").format("parquet").option("path", output), checkpoint)

    run(0, 2, {PROVIDER_KEY: SPARK_ROCKSDB})
    for target, (lo, hi) in (("sparkstate", (2, 4)), ("rocksdb", (4, n_files + 1))):
        summary = sparkstate.migrate(spark, checkpoint, target, file_sinks=[output])
        ids = _commit_log_ids(checkpoint, summary.batch_id)
        assert all(len(per_store) == 4 for parts in ids.values() for per_store in parts)
        _migrated_ids_are_the_targets(checkpoint, summary.batch_id, target)
        run(lo, hi, {})
    batch = _join(left.batch(), right.batch(), "left_outer", streaming=False)
    final_wm = min(max_t(left_files), max_t(right_files)) - DELAY_S
    emit_before = final_wm - JOIN_RANGE_S  # an unmatched left row is emitted once no right row can match it
    expected = batch.where(F.col("rid").isNotNull() | (F.col("lt") < emit_before)).collect()
    assert sum(1 for r in expected if r["rid"] is None) >= 20, "need unmatched left rows to test"
    assert_same_rows(read_parquet_sink(spark, output), expected, min_rows=40)
