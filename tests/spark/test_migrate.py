"""`sparkstate migrate`: a query that ran on one state store provider is stopped, migrated, restarted
unchanged and finishes on the other, with the result of the batch computation; refusals say why.

The operator tests run on the RocksDB backend in the default selection and on the heap backend in the slow
one: a migration reads and writes both through the same store calls, and the aggregation tests move heap
state in the default selection too."""
from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time

import pytest
from conftest import BUILTIN_PROVIDERS, selected_provider
from datagen import BASE, advance_row, event_time, into_files, max_t, random_events
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from spark_harness import (
    PREFIX,
    AggregationCase,
    BatchCollector,
    InputDir,
    assert_same_rows,
    run_available_now,
    session_conf,
)
from test_operators import (
    DELAY,
    DELAY_S,
    JOIN_SCHEMA,
    STATE_TIMEOUT_S,
    Case,
    _join,
    _join_inputs,
    _running_totals_fn,
    file_sink_across_an_offline_batch,
)

import sparkstate
from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF, SparkLogs
from sparkstate.errors import AlreadyMigratedError, MigrationError, SparkstateError
from sparkstate.inspection import verify_checkpoint
from sparkstate.spark_lines import spark_line
from sparkstate.storage import fileio_for

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="needs the sparkstate jar")

PROVIDER_CLASSES = {**BUILTIN_PROVIDERS, "sparkstate": sparkstate.PROVIDER_CLASS}


def _pinned_provider(checkpoint: str) -> str:
    logs = SparkLogs(fileio_for(checkpoint), checkpoint)
    return logs.read_offset(logs.offset_batches()[-1]).conf[PROVIDER_CLASS_CONF]


def _run_on(case: AggregationCase, provider: str, backend: str = "rocksdb") -> None:
    """A run whose session names `provider`: a new checkpoint takes it, an existing one keeps its own."""
    case.run({PROVIDER_CLASS_CONF: PROVIDER_CLASSES[provider],
              "spark.sql.streaming.stateStore.sparkstate.backend": backend})


@pytest.mark.parametrize("source,target,backend", [
    ("hdfs", "sparkstate", "rocksdb"),
    ("rocksdb", "sparkstate", "heap"),
    ("sparkstate", "hdfs", None),
    ("sparkstate", "rocksdb", None),
])
def test_an_aggregation_moves_between_providers(spark, tmp_path, source, target, backend):
    case = AggregationCase(spark, tmp_path, seed=61, n_files=4)
    case.source.add_all(case.files[:2])
    _run_on(case, source)
    summary = sparkstate.migrate(spark, case.checkpoint, target, backend=backend)
    assert summary.rows == case.n_keys and _pinned_provider(case.checkpoint) == PROVIDER_CLASSES[target]
    case.source.add_all(case.files[2:])
    _run_on(case, source, backend or "rocksdb")  # the session still names the source: the checkpoint wins
    case.assert_matches_batch()
    assert _pinned_provider(case.checkpoint) == PROVIDER_CLASSES[target]


def _stored_stamps(case: AggregationCase, tmp_path) -> list[tuple[int, set[int]]]:
    """Per store of the query: the batch time of the batch that reads its newest version, and the stamps of
    its stored values."""
    from sparkstate.engine import Store, StoreSpec
    from sparkstate.engine.ttl import STAMP

    out = []
    for store_dir in case.store_dirs():
        location = os.path.dirname(store_dir)
        spec = StoreSpec.from_json({
            "checkpointLocation": location, "operatorId": 0, "partitionId": int(os.path.basename(location)),
            "storeName": "default", "instanceId": f"read-{len(out)}-{random.random()}", "queryRunId": "read",
            "keySchema": "{}", "valueSchema": "{}", "numColsPrefixKey": 0, "numPartitions": 1,
            "minVersionsToRetain": 10, "settings": {}})
        store = Store(spec, local_root=str(tmp_path / "read"))
        try:
            store.load(store.file_manager.latest_version())
            stamps = store.stored_stamps()
            assert stamps.stamped, store_dir
            values = [v for chunk in store.scan(b"", 10_000, 1 << 24, as_stored=True) for _, v in chunk]
            out.append((stamps.batch_time_ms, {STAMP.unpack_from(v)[0] for v in values}))
        finally:
            store.close()
    return out


@pytest.mark.slow  # two migrations and three runs: about a minute
def test_a_migration_into_sparkstate_stamps_every_key_with_its_time_and_one_out_drops_them(spark, tmp_path):
    """With a ttl, the state a migration brings in is written at the migration's time; migrated out again
    to Spark's provider, the values are Spark's (the query's result is exact after each move)."""
    case = AggregationCase(spark, tmp_path, seed=62, n_files=4)
    case.source.add_all(case.files[:2])
    _run_on(case, "hdfs")
    with session_conf(spark, {PREFIX + "ttl": "1h"}):
        before = int(time.time() * 1000)
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
        after = int(time.time() * 1000)
        stores = _stored_stamps(case, tmp_path)
        # one stamp per store, the migration's, and the next batch runs at or after it
        assert stores and all(len(stamps) == 1 and before <= min(stamps) <= batch_time <= after
                              for batch_time, stamps in stores), (before, after, stores)
        case.source.add_all(case.files[2:3])
        _run_on(case, "sparkstate")
        case.assert_matches_batch()
        sparkstate.migrate(spark, case.checkpoint, "hdfs")
    case.source.add_all(case.files[3:])
    _run_on(case, "hdfs")
    case.assert_matches_batch()
    assert _pinned_provider(case.checkpoint) == PROVIDER_CLASSES["hdfs"]


def test_state_under_a_state_location_moves_out_and_back_in(spark, tmp_path):
    """A query whose sparkstate state lives under `stateLocation` (where S3 state goes) moves out to Spark's
    RocksDB provider and back, with the setting in the migrating session; without it, the refusal says to
    pass it."""
    case = AggregationCase(spark, tmp_path, seed=71, n_files=3)
    located = {PREFIX + "stateLocation": str(tmp_path / "state-elsewhere")}
    case.source.add_all(case.files[:1])
    case.run({**located, PROVIDER_CLASS_CONF: PROVIDER_CLASSES["sparkstate"]})
    assert not os.path.exists(os.path.join(case.checkpoint, "state", "0", "0", "sparkstate"))
    with pytest.raises(MigrationError, match=f"pass it \\(--conf {PREFIX}stateLocation="):
        sparkstate.migrate(spark, case.checkpoint, "rocksdb")
    with session_conf(spark, located):
        sparkstate.migrate(spark, case.checkpoint, "rocksdb")
    case.source.add_all(case.files[1:2])
    case.run()
    with session_conf(spark, located):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate", backend="heap")
    case.source.add_all(case.files[2:])
    case.run({**located, PREFIX + "backend": "heap"})
    case.assert_matches_batch()
    assert _pinned_provider(case.checkpoint) == sparkstate.PROVIDER_CLASS


def test_a_round_trip_through_every_provider_is_exact(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=62, n_files=5)
    case.source.add_all(case.files[:1])
    _run_on(case, "hdfs")
    for i, (target, backend) in enumerate([("sparkstate", "rocksdb"), ("rocksdb", None), ("sparkstate", "heap")]):
        sparkstate.migrate(spark, case.checkpoint, target, backend=backend)
        case.source.add_all(case.files[i + 1:i + 2])
        _run_on(case, target, backend or "rocksdb")
    case.source.add_all(case.files[4:])
    _run_on(case, "sparkstate", "heap")
    case.assert_matches_batch()


def test_refusals_change_nothing(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=63, n_files=2)
    with pytest.raises(MigrationError, match="no offset log"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    case.source.add_all(case.files[:1])
    _run_on(case, "hdfs")
    with pytest.raises(MigrationError, match="already runs on hdfs"):
        sparkstate.migrate(spark, case.checkpoint, "hdfs")
    cli = subprocess.run([sys.executable, "-m", "sparkstate.cli", "migrate", "--checkpoint", case.checkpoint,
                          "--to", "hdfs", "--master", "local[1]", "--json"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert cli.returncode == 0, cli.stderr[-3000:]  # the command asked for what is already so: it succeeds
    assert "already runs on hdfs" in json.loads(cli.stdout)["nothing_to_do"]
    before = sorted(os.listdir(os.path.join(case.checkpoint, "offsets")))
    with open(os.path.join(case.checkpoint, "commits", "0")) as f:
        committed = f.read()
    with open(os.path.join(case.checkpoint, "commits", "0"), "w") as f:
        f.write(committed.replace("v1", "v2", 1))  # format v2's header, without the ids its entries record
    with pytest.raises(MigrationError, match="records no state ids of operator 0"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    with open(os.path.join(case.checkpoint, "commits", "0"), "w") as f:
        f.write(committed)
    assert sorted(os.listdir(os.path.join(case.checkpoint, "offsets"))) == before
    with session_conf(spark, {}):
        case.source.add_all(case.files[1:])
        _run_on(case, "hdfs")
    case.assert_matches_batch()


# ---- every operator sparkstate serves: in from Spark's HDFS provider, out to Spark's RocksDB provider ----

def _three_runs(spark, checkpoint: str, backend: str, runs) -> None:
    """Run 1 on HDFS, migrate into sparkstate(`backend`), run 2, migrate out to RocksDB (to HDFS on a line
    whose RocksDB provider cannot start empty at a version, before 4.2), run 3."""
    first, second, third = runs
    out = _way_out(spark)
    with session_conf(spark, {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]}):
        first()
    sparkstate.migrate(spark, checkpoint, "sparkstate", backend=backend)
    assert _pinned_provider(checkpoint) == sparkstate.PROVIDER_CLASS
    with session_conf(spark, {"spark.sql.streaming.stateStore.sparkstate.backend": backend}):
        second()
        sparkstate.migrate(spark, checkpoint, out)
    assert _pinned_provider(checkpoint) == BUILTIN_PROVIDERS[out]
    third()


def _way_out(spark) -> str:
    """Where the operator tests migrate out of sparkstate: Spark's RocksDB provider, or its HDFS provider on a
    line whose RocksDB provider cannot start empty at a version (before 4.2)."""
    return "rocksdb" if spark_line(spark.version) >= "4.2" else "hdfs"


def _staged(source: InputDir, files: list, run) -> tuple:
    """Three runs over the files in thirds."""
    cut = [len(files) // 3, 2 * len(files) // 3]
    return ((lambda: (source.add_all(files[:cut[0]]), run())),
            (lambda: (source.add_all(files[cut[0]:cut[1]]), run())),
            (lambda: (source.add_all(files[cut[1]:]), run())))


@pytest.mark.parametrize("backend", ["rocksdb", pytest.param("heap", marks=pytest.mark.slow)])
def test_drop_duplicates_and_within_watermark(spark, tmp_path, backend):
    case = Case(spark, tmp_path)
    files = random_events(seed=64, n_files=6, per_file=30, n_keys=6, v_range=15)
    files.append([advance_row(len(files))])
    plain, within, reference = BatchCollector(), BatchCollector(), BatchCollector()

    def within_watermark(sink: BatchCollector, checkpoint: str) -> None:
        timed = case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
        run_available_now(sink.attach(timed.dropDuplicatesWithinWatermark(["k", "v"]).select("k", "v")
                                      .writeStream.outputMode("append")), checkpoint)

    def run():
        run_available_now(plain.attach(case.source.stream().dropDuplicates(["k", "v"]).select("k", "v")
                                       .writeStream.outputMode("append")), case.checkpoint)
        within_watermark(within, case.checkpoint + "-ww")
        with session_conf(spark, {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]}):
            within_watermark(reference, case.checkpoint + "-ref")  # never migrated

    first, second, third = _staged(case.source, files, run)
    with session_conf(spark, {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]}):
        first()
    for ckpt in (case.checkpoint, case.checkpoint + "-ww"):
        sparkstate.migrate(spark, ckpt, "sparkstate", backend=backend)
    with session_conf(spark, {"spark.sql.streaming.stateStore.sparkstate.backend": backend}):
        second()
        for ckpt in (case.checkpoint, case.checkpoint + "-ww"):
            sparkstate.migrate(spark, ckpt, _way_out(spark))
    third()
    assert_same_rows(plain.appended(), case.source.batch().select("k", "v").distinct().collect(), min_rows=40)
    # Which duplicates fall within the watermark depends on the batches: the same query on Spark's provider,
    # never migrated, over the same batches
    assert_same_rows(within.appended(), reference.appended(), min_rows=40)


@pytest.mark.parametrize("backend", ["rocksdb", pytest.param("heap", marks=pytest.mark.slow)])
def test_stream_stream_join(spark, tmp_path, backend):
    n_files = 6
    left_files, right_files = _join_inputs(65, n_files)
    left_files.append([advance_row(n_files, "adv-left")])
    right_files.append([advance_row(n_files, "adv-right")])
    left = InputDir(spark, str(tmp_path / "left"), JOIN_SCHEMA)
    right = InputDir(spark, str(tmp_path / "right"), JOIN_SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    sink = BatchCollector()

    def run(lo: int, hi: int):
        left.add_all(left_files[lo:hi])
        right.add_all(right_files[lo:hi])
        run_available_now(sink.attach(_join(left.stream(), right.stream(), "inner", streaming=True)
                                      .writeStream.outputMode("append")), checkpoint)

    _three_runs(spark, checkpoint, backend, (lambda: run(0, 2), lambda: run(2, 4), lambda: run(4, n_files + 1)))
    assert_same_rows(sink.appended(), _join(left.batch(), right.batch(), "inner", streaming=False).collect(),
                     min_rows=40)


@pytest.mark.parametrize("backend", ["rocksdb", pytest.param("heap", marks=pytest.mark.slow)])
def test_session_window(spark, tmp_path, backend):
    case = Case(spark, tmp_path)
    files = random_events(seed=66, n_files=6, per_file=10, n_keys=4)
    files.append([advance_row(len(files))])
    sink = BatchCollector()

    def query(df):
        return (df.withColumn("ts", event_time()).withWatermark("ts", DELAY)
                .groupBy(F.session_window("ts", "5 seconds"), "k")
                .agg(F.count("*").alias("n"), F.sum("v").alias("total")))

    def run():
        case.run(lambda: sink.attach(query(case.source.stream()).writeStream.outputMode("append")))

    _three_runs(spark, case.checkpoint, backend, _staged(case.source, files, run))
    final_wm = max_t(files) - DELAY_S
    expected = (query(case.source.batch())
                .where(F.col("session_window.end") <= F.timestamp_seconds(F.lit(final_wm))).collect())
    assert_same_rows(sink.appended(), expected, min_rows=10)


@pytest.mark.parametrize("backend", ["rocksdb", pytest.param("heap", marks=pytest.mark.slow)])
def test_apply_in_pandas_with_state_and_its_timeouts(spark, tmp_path, backend):
    case = Case(spark, tmp_path)
    rng = random.Random(67)
    rows = [{"id": f"s{n}-{j}", "k": f"key{n}", "v": rng.randrange(50), "t": BASE + 8 * n + rng.randrange(20)}
            for n in range(13) for j in range(rng.randint(3, 8))]
    rows.sort(key=lambda r: r["t"])
    files = into_files(rows, 6)
    files.append([advance_row(6)])
    sink = BatchCollector()

    def run():
        case.run(lambda: sink.attach(
            case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
            .groupBy("k").applyInPandasWithState(_running_totals_fn(), "k string, n long, total long, expired boolean",
                                                "n long, total long, last long", "update",
                                                GroupStateTimeout.EventTimeTimeout)
            .writeStream.outputMode("update")))

    _three_runs(spark, case.checkpoint, backend, _staged(case.source, files, run))
    final_wm = max_t(files) - DELAY_S
    per_key = (case.source.batch().groupBy("k")
               .agg(F.count("*").alias("n"), F.sum("v").alias("total"), F.max("t").alias("last")).collect())
    expected = [(r["k"], r["n"], r["total"], r["last"] + STATE_TIMEOUT_S < final_wm) for r in per_key]
    assert any(e[3] for e in expected)  # some keys timed out
    assert_same_rows(sink.updated(["k"]), expected, min_rows=13)


@pytest.mark.parametrize("backend", ["rocksdb", pytest.param("heap", marks=pytest.mark.slow)])
def test_streaming_limit_and_two_operators_in_one_query(spark, tmp_path, backend):
    case = Case(spark, tmp_path)
    files = random_events(seed=68, n_files=6, per_file=20, n_keys=8, v_range=10)
    limited, counted = BatchCollector(), BatchCollector()

    def run():
        stream = case.source.stream()
        run_available_now(limited.attach(stream.select("k", "v").limit(50).writeStream.outputMode("append")),
                          case.checkpoint + "-limit")
        distinct_then_count = stream.dropDuplicates(["k", "v"]).groupBy("k").agg(F.count("*").alias("n"))
        run_available_now(counted.attach(distinct_then_count.writeStream.outputMode("update")), case.checkpoint)

    first, second, third = _staged(case.source, files, run)
    with session_conf(spark, {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]}):
        first()
    for ckpt in (case.checkpoint, case.checkpoint + "-limit"):
        sparkstate.migrate(spark, ckpt, "sparkstate", backend=backend)
    with session_conf(spark, {"spark.sql.streaming.stateStore.sparkstate.backend": backend}):
        second()
        for ckpt in (case.checkpoint, case.checkpoint + "-limit"):
            sparkstate.migrate(spark, ckpt, _way_out(spark))
    third()
    assert len(limited.appended()) == 50
    expected = case.source.batch().dropDuplicates(["k", "v"]).groupBy("k").agg(F.count("*").alias("n"))
    assert_same_rows(counted.updated(["k"]), expected.collect(), min_rows=8)


def test_an_interrupted_migration_changes_nothing_and_a_rerun_finishes(spark, tmp_path, monkeypatch):
    from sparkstate.migration import runner

    case = AggregationCase(spark, tmp_path, seed=69, n_files=3)
    case.source.add_all(case.files[:1])
    _run_on(case, "hdfs")
    batches = sorted(os.listdir(os.path.join(case.checkpoint, "commits")))

    def failing_verify(plan, results):
        raise MigrationError("interrupted after the copy")

    monkeypatch.setattr(runner, "_verify", failing_verify)
    with pytest.raises(MigrationError, match="interrupted after the copy"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    monkeypatch.undo()
    assert _pinned_provider(case.checkpoint) == BUILTIN_PROVIDERS["hdfs"]
    assert sorted(os.listdir(os.path.join(case.checkpoint, "commits"))) == batches

    class CrashBeforeCommit:  # the process dies between the offset log entry and the commit log entry
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def create_exclusive(self, path, data):
            if "/commits/" in path:
                raise KeyboardInterrupt("killed")
            return self.inner.create_exclusive(path, data)

    publish = runner._publish
    monkeypatch.setattr(runner, "_publish", lambda plan, fio, *a: publish(plan, CrashBeforeCommit(fio), *a))
    with pytest.raises(KeyboardInterrupt):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    monkeypatch.undo()
    with pytest.raises(SparkstateError, match="unfinished migration to io.sparkstate.*--to sparkstate --backend"):
        verify_checkpoint(case.checkpoint, fileio_for(case.checkpoint), fileio_for(case.checkpoint))
    summary = sparkstate.migrate(spark, case.checkpoint, "sparkstate")  # finishes what the killed run began
    assert summary.batch_id == int(batches[-1]) + 1
    case.source.add_all(case.files[1:])
    _run_on(case, "hdfs")
    assert _pinned_provider(case.checkpoint) == sparkstate.PROVIDER_CLASS
    case.assert_matches_batch()


@pytest.mark.parametrize("how", ["file_sinks", "repair"])
def test_file_sink_log_gets_the_migration_batch(spark, tmp_path, how):
    """The migration's batch (sparkstate to Spark's RocksDB provider) in the file sink's own log: written
    by the migration given the sink's path, else added by `repair_file_sink` after the restart failed
    (file_sink_across_an_offline_batch)."""
    with session_conf(spark, {PROVIDER_CLASS_CONF: sparkstate.PROVIDER_CLASS}):
        case = file_sink_across_an_offline_batch(
            spark, tmp_path, 37, how,
            lambda checkpoint, sinks: sparkstate.migrate(spark, checkpoint, "rocksdb", file_sinks=sinks))
    assert _pinned_provider(case.checkpoint) == PROVIDER_CLASSES["rocksdb"]


def test_the_command_line_refuses_before_starting_spark(tmp_path):
    checkpoint = str(tmp_path / "missing")
    proc = subprocess.run([sys.executable, "-m", "sparkstate.cli", "migrate", "--checkpoint", checkpoint,
                           "--to", "hdfs", "--backend", "heap"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "--backend applies to --to sparkstate only" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "sparkstate.cli", "migrate", "--checkpoint", checkpoint,
                           "--to", "sparkstate", "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "does not exist" in proc.stderr and not proc.stdout.strip()
    proc = subprocess.run([sys.executable, "-m", "sparkstate.cli", "migrate", "--checkpoint", checkpoint,
                           "--to", "sparkstate", "--partitions", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "--partitions must be a positive integer" in proc.stderr


def test_from_sparks_rocksdb_provider_with_changelog_checkpointing(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=73, n_files=4)
    changelog = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
    case.source.add_all(case.files[:2])
    with session_conf(spark, changelog):
        _run_on(case, "rocksdb")
    assert any(n.endswith(".changelog") for _, _, names in os.walk(case.checkpoint) for n in names)
    summary = sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    assert summary.rows == case.n_keys
    case.source.add_all(case.files[2:])
    _run_on(case, "rocksdb")
    case.assert_matches_batch()


def test_migrate_and_rescale_in_one_run_both_ways(spark, tmp_path, monkeypatch):
    from sparkstate.migration import with_rescale

    case = AggregationCase(spark, tmp_path, seed=74, n_files=4, n_keys=20)
    case.source.add_all(case.files[:1])
    _run_on(case, "hdfs")
    with pytest.raises(MigrationError, match="needs sparkstate on one side"):
        sparkstate.migrate(spark, case.checkpoint, "rocksdb", partitions=5)

    def no_rescale(*args, **kwargs):
        raise KeyboardInterrupt("killed between the two steps")

    monkeypatch.setattr(with_rescale, "rescale", no_rescale)
    with pytest.raises(KeyboardInterrupt):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate", backend="heap", partitions=5)
    monkeypatch.undo()
    summary = sparkstate.migrate(spark, case.checkpoint, "sparkstate", backend="heap", partitions=5)
    assert summary.migration is None and summary.rescale.new_partitions == 5  # the re-run finishes the job
    case.source.add_all(case.files[1:2])
    _run_on(case, "hdfs", "heap")
    assert _pinned_provider(case.checkpoint) == sparkstate.PROVIDER_CLASS
    assert len(case.store_dirs()) == 5
    with pytest.raises(AlreadyMigratedError, match="already runs on sparkstate"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate", backend="heap")
    for partitions in (None, 3):  # another backend is refused, not passed over (nor rescaled without it)
        with pytest.raises(MigrationError, match="with the heap backend.*--to rocksdb`, then .*--backend rocksdb"):
            sparkstate.migrate(spark, case.checkpoint, "sparkstate", backend="rocksdb", partitions=partitions)
    assert len(case.store_dirs()) == 5 and _pinned_provider(case.checkpoint) == sparkstate.PROVIDER_CLASS

    summary = sparkstate.migrate(spark, case.checkpoint, "rocksdb", partitions=2)
    assert summary.rescale.new_partitions == 2
    assert summary.migration.rows == case.source.batch().select("k").distinct().count()
    with pytest.raises(MigrationError, match="already runs on rocksdb with 2 partitions"):
        sparkstate.migrate(spark, case.checkpoint, "rocksdb", partitions=2)
    case.source.add_all(case.files[2:])
    _run_on(case, "hdfs")
    logs = SparkLogs(fileio_for(case.checkpoint), case.checkpoint)
    assert logs.read_offset(logs.offset_batches()[-1]).shuffle_partitions == 2
    case.assert_matches_batch()


def test_refused_while_the_query_runs_or_another_tool_holds_the_checkpoint(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=75, n_files=2)
    case.source.add_all(case.files[:1])
    with session_conf(spark, {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]}):
        query = case.writer().option("checkpointLocation", case.checkpoint).trigger(processingTime="1 second").start()
    try:
        query.processAllAvailable()
        with pytest.raises(MigrationError, match="is running on"):
            sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    finally:
        query.stop()
    lock = os.path.join(case.checkpoint, "sparkstate-rescale", "lock")
    os.makedirs(os.path.dirname(lock))
    with open(lock, "w") as f:  # a live process of this host holds the checkpoint (this one: certainly alive)
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "startedMs": 0, "task": "rescale to 5"}, f)
    with pytest.raises(MigrationError, match="another rescale to 5"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    os.remove(lock)
    assert _pinned_provider(case.checkpoint) == BUILTIN_PROVIDERS["hdfs"]
    case.source.add_all(case.files[1:])
    _run_on(case, "hdfs")
    case.assert_matches_batch()


@pytest.mark.slow  # a transformWithStateInPandas query: its Python workers start cold
def test_transform_with_state_and_a_checkpoint_without_a_committed_batch_are_refused(spark, tmp_path):
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class Count(StatefulProcessor):
        def init(self, handle) -> None:
            self.count = handle.getValueState("count", "n long")

        def handleInputRows(self, key, rows, timerValues):
            n = (self.count.get()[0] if self.count.exists() else 0) + sum(len(batch) for batch in rows)
            self.count.update((n,))
            yield pd.DataFrame({"k": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    case = Case(spark, tmp_path)
    case.source.add_all(random_events(seed=76, n_files=1, per_file=10, n_keys=3))
    sink = BatchCollector()
    with session_conf(spark, {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["rocksdb"]}):
        case.run(lambda: sink.attach(
            case.source.stream().groupBy("k").transformWithStateInPandas(Count(), "k string, n long", "Update", "None")
            .writeStream.outputMode("update")))
    listing = sorted(os.listdir(case.checkpoint))
    with pytest.raises(MigrationError, match="transformWithState"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    assert sorted(os.listdir(case.checkpoint)) == listing

    for name in os.listdir(os.path.join(case.checkpoint, "commits")):
        os.remove(os.path.join(case.checkpoint, "commits", name))
    with pytest.raises(MigrationError, match="no committed batch"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
