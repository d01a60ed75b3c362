"""End-to-end key-group rescaling: run a query with `old` partitions, stop it, rescale to `new`, restart
the unchanged query over the rest of the input, and compare with the batch computation.

The first run pins `old` in the offset log (the session's `spark.sql.shuffle.partitions` is set only for
it); the restart runs with whatever the rescale pinned, so the test also checks Spark accepted it.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from conftest import selected_provider
from datagen import BASE, advance_row, event_time, into_files, max_t, random_events
from fault_plugin import fault_python
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from spark_harness import (
    PREFIX,
    BatchCollector,
    InputDir,
    assert_same_rows,
    committed_batches,
    read_parquet_sink,
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
    _per_key_stats,
    _running_totals_fn,
    deduplication_to_a_file_sink,
    file_sink_across_an_offline_batch,
)

import sparkstate
from sparkstate.checkpoint.operator_stores import operator_stores, session_prefix_columns
from sparkstate.checkpoint.spark_logs import SparkLogs
from sparkstate.rescaling import RescaleError, build_plan
from sparkstate.rescaling.verify import verify_join_state, verify_routing
from sparkstate.spark_lines import spark_line
from sparkstate.storage import fileio_for
from tests.storage.instrumented import InjectedFault, instrument_local_storage

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="rescaling is a sparkstate feature")


def pinned_partitions(checkpoint: str) -> int:
    logs = SparkLogs(fileio_for(checkpoint), checkpoint)
    return logs.read_offset(logs.offset_batches()[-1]).shuffle_partitions


def expected_backend(spark) -> str:
    return spark.conf.get("spark.sql.streaming.stateStore.sparkstate.backend", "rocksdb")


def run_with(spark, partitions: int, fn):
    """Run `fn` with the session's partition count set (only a new checkpoint takes it)."""
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        return fn()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


def rescale_between_runs(spark, checkpoint: str, old: int, new: int, first_run, second_run, **rescale_opts):
    run_with(spark, old, first_run)
    assert pinned_partitions(checkpoint) == old
    before = committed_batches(checkpoint)
    summary = sparkstate.rescale(spark, checkpoint, new, **rescale_opts)
    assert (summary.old_partitions, summary.new_partitions) == (old, new)
    assert summary.batch_id == before[-1] + 1 and summary.rows > 0
    assert summary.backend == expected_backend(spark)
    second_run()  # session conf unchanged (3): the checkpoint decides
    after = committed_batches(checkpoint)
    assert after[-1] > summary.batch_id and pinned_partitions(checkpoint) == new
    # the restarted query committed further versions in every new partition
    for part in range(new):
        manifests = os.listdir(os.path.join(checkpoint, "state", "0", str(part), *_first_store_dir(checkpoint),
                                            "sparkstate", "manifests"))
        assert f"{after[-1] + 1}.manifest" in manifests, (part, manifests)
    return summary


def _first_store_dir(checkpoint: str) -> list[str]:
    part0 = os.path.join(checkpoint, "state", "0", "0")
    return [] if os.path.isdir(os.path.join(part0, "sparkstate")) else [sorted(
        n for n in os.listdir(part0) if not n.startswith("_"))[0]]


def test_aggregation_4_to_7(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=21, n_files=4, per_file=50, n_keys=30)
    sink = BatchCollector()

    def run():
        case.run(lambda: sink.attach(_per_key_stats(case.source.stream()).writeStream.outputMode("update")))

    case.source.add_all(files[:2])
    summary = rescale_between_runs(spark, case.checkpoint, 4, 7, run,
                                   lambda: (case.source.add_all(files[2:]), run()))
    assert summary.stores == 7
    assert_same_rows(sink.updated(["k"]), _per_key_stats(case.source.batch()).collect(), min_rows=30)
    if spark_line(spark.version) >= "4.0":  # Spark 3.5 has no operator metadata nor its source
        metadata = spark.read.format("state-metadata").load(case.checkpoint).collect()
        assert [(r.operatorId, r.stateStoreName, r.numPartitions) for r in metadata] == [(0, "default", 7)]


def test_drop_duplicates_4_to_2(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=22, n_files=4, per_file=40, n_keys=6, v_range=15)

    sink = BatchCollector()  # not a file sink: see test_file_sink_log_gets_the_synthetic_batch

    def run():
        case.run(lambda: sink.attach(case.source.stream().dropDuplicates(["k", "v"]).select("k", "v")
                                     .writeStream.outputMode("append")))

    case.source.add_all(files[:2])
    rescale_between_runs(spark, case.checkpoint, 4, 2, run, lambda: (case.source.add_all(files[2:]), run()))
    assert_same_rows(sink.appended(), case.source.batch().select("k", "v").distinct().collect(), min_rows=40)


@pytest.mark.parametrize("how", ["file_sinks", "repair"])
def test_file_sink_log_gets_the_synthetic_batch(spark, tmp_path, variant, how):
    """The rescale's batch in the file sink's own log: written by the rescale given the sink's path, else
    added by `repair_file_sink` after the restart failed (file_sink_across_an_offline_batch)."""
    case = file_sink_across_an_offline_batch(
        spark, tmp_path, 29, how, lambda checkpoint, sinks: sparkstate.rescale(spark, checkpoint, 2, file_sinks=sinks),
        first_run=lambda run: run_with(spark, 4, run))
    assert pinned_partitions(case.checkpoint) == 2


def test_file_sink_after_a_rescale_interrupted_while_publishing(spark, tmp_path, monkeypatch, variant):
    """Interrupted after its repartition batch was logged (Spark then refuses the restart), the rescale is
    re-run with the same file sink and finishes: the sink's log gets the batch once, the output is exact."""
    case, files, out, run = deduplication_to_a_file_sink(spark, tmp_path, seed=31)
    with session_conf(spark, {"spark.sql.streaming.fileSink.log.compactInterval": "2"}):
        case.source.add_all(files[:3])
        run_with(spark, 4, run)
        io = instrument_local_storage(monkeypatch)
        io.fail("create_exclusive", "*/sparkstate/manifests/*.manifest")
        with pytest.raises(InjectedFault):
            sparkstate.rescale(spark, case.checkpoint, 3, file_sinks=[out])
        io.heal()
        with pytest.raises(Exception, match="(?i)repartition"):
            run()
        sparkstate.rescale(spark, case.checkpoint, 3, file_sinks=[out])
        case.source.add_all(files[3:])
        run()
    assert "3.compact" in os.listdir(os.path.join(out, "_spark_metadata"))
    assert_same_rows(read_parquet_sink(spark, out), case.source.batch().select("k", "v").distinct().collect(),
                     min_rows=40)


def test_memory_sink_in_complete_mode_4_to_3(spark, tmp_path, variant):
    """The memory sink has no batch log of its own: the restarted query's table is the full result."""
    case = Case(spark, tmp_path)
    files = random_events(seed=30, n_files=4, per_file=40, n_keys=20)
    table = f"rescaled_{variant}"

    def run():
        case.run(lambda: _per_key_stats(case.source.stream()).writeStream.format("memory").queryName(table)
                 .outputMode("complete"))

    case.source.add_all(files[:2])
    rescale_between_runs(spark, case.checkpoint, 4, 3, run, lambda: (case.source.add_all(files[2:]), run()))
    assert_same_rows(spark.table(table).collect(), _per_key_stats(case.source.batch()).collect(), min_rows=20)


@pytest.mark.parametrize("ttl", [None, pytest.param("1h", marks=pytest.mark.slow)], ids=["no-ttl", "ttl"])
def test_stream_stream_join_3_to_12(spark, tmp_path, variant, ttl, request):
    """With a ttl nothing reaches, the count stores carry stamps and the rows stores do not: both move."""
    if ttl is not None:
        spark.conf.set(PREFIX + "ttl", ttl)
        request.addfinalizer(lambda: spark.conf.unset(PREFIX + "ttl"))
    n_files = 4
    left_files, right_files = _join_inputs(31, n_files)
    left_files.append([advance_row(n_files, "adv-left")])
    right_files.append([advance_row(n_files, "adv-right")])
    left = InputDir(spark, str(tmp_path / "left"), JOIN_SCHEMA)
    right = InputDir(spark, str(tmp_path / "right"), JOIN_SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    sink = BatchCollector()

    def run():
        run_available_now(sink.attach(_join(left.stream(), right.stream(), "inner", streaming=True).writeStream
                                      .outputMode("append")), checkpoint)

    left.add_all(left_files[:2])
    right.add_all(right_files[:2])
    run_with(spark, 3, run)
    summary = sparkstate.rescale(spark, checkpoint, 12)
    assert summary.stores == 4 * 12
    # every join key's count and its 0..n-1 indexes moved together; every key sits in its partition
    plan = build_plan(checkpoint, 5)
    assert plan.old_partitions == 12
    checked = verify_join_state(plan, 12, plan.source_version)
    assert checked["left-keyWithIndexToValue"] > 0 and checked["right-keyWithIndexToValue"] > 0
    assert verify_routing(plan, 12, plan.source_version) > 0
    left.add_all(left_files[2:])
    right.add_all(right_files[2:])
    run()
    assert pinned_partitions(checkpoint) == 12
    assert_same_rows(sink.appended(), _join(left.batch(), right.batch(), "inner", streaming=False).collect(),
                     min_rows=40)


def _session_query(df):
    return (df.withColumn("ts", event_time()).withWatermark("ts", DELAY)
            .groupBy(F.session_window("ts", "5 seconds"), "k")
            .agg(F.count("*").alias("n"), F.sum("v").alias("total")))


@pytest.mark.variants("rocksdb", slow=("heap",))  # two CLI runs, each a Spark of its own
def test_session_window_4_to_7_with_the_cli(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=23, n_files=6, per_file=10, n_keys=4)
    files.append([advance_row(len(files))])
    sink = BatchCollector()

    def run():
        case.run(lambda: sink.attach(_session_query(case.source.stream()).writeStream.outputMode("append")))

    case.source.add_all(files[:3])
    run_with(spark, 4, run)
    # the key prefix a checkpoint without operator metadata (Spark 3.5) is read with is Spark's own
    (store,) = operator_stores(fileio_for(case.checkpoint), case.checkpoint)
    assert session_prefix_columns(store.key_schema, store.value_schema) == 1
    assert store.num_cols_prefix_key == 1 and store.operator_name == "sessionWindowStateStoreSaveExec"
    cli = subprocess.run([sys.executable, "-m", "sparkstate.cli", "rescale", "--checkpoint", case.checkpoint,
                          "--partitions", "7", "--master", "local[2]", "--json"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert cli.returncode == 0, cli.stderr[-3000:]
    summary = json.loads(cli.stdout)  # --json: stdout is the summary alone
    assert (summary["old_partitions"], summary["new_partitions"]) == (4, 7) and summary["rows"] > 0, summary
    again = subprocess.run(cli.args, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert again.returncode == 0, again.stderr[-3000:]  # a finished rescale run again is harmless
    assert "already has 7 partitions" in json.loads(again.stdout)["nothing_to_do"]
    case.source.add_all(files[3:])
    run()
    assert pinned_partitions(case.checkpoint) == 7
    final_wm = max_t(files) - DELAY_S
    expected = (_session_query(case.source.batch())
                .where(F.col("session_window.end") <= F.timestamp_seconds(F.lit(final_wm))).collect())
    assert any(r["n"] > 1 for r in expected)
    assert_same_rows(sink.appended(), expected, min_rows=20)


def test_apply_in_pandas_with_state_4_to_2(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    rng = random.Random(24)
    rows = []
    for n in range(13):
        for j in range(rng.randint(3, 8)):
            rows.append({"id": f"s{n}-{j}", "k": f"key{n}", "v": rng.randrange(50),
                         "t": BASE + 8 * n + rng.randrange(20)})
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

    case.source.add_all(files[:3])
    rescale_between_runs(spark, case.checkpoint, 4, 2, run, lambda: (case.source.add_all(files[3:]), run()))
    final_wm = max_t(files) - DELAY_S
    per_key = (case.source.batch().groupBy("k")
               .agg(F.count("*").alias("n"), F.sum("v").alias("total"), F.max("t").alias("last")).collect())
    expected = [(r["k"], r["n"], r["total"], r["last"] + STATE_TIMEOUT_S < final_wm) for r in per_key]
    assert_same_rows(sink.updated(["k"]), expected, min_rows=13)


def test_global_aggregation_3_to_5_is_copied_as_one_partition(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=25, n_files=4, per_file=20, n_keys=5)
    sink = BatchCollector()

    def query(df):
        return df.agg(F.count("*").alias("n"), F.sum("v").alias("total"))

    def run():
        case.run(lambda: sink.attach(query(case.source.stream()).writeStream.outputMode("update")))

    case.source.add_all(files[:2])
    run_with(spark, 3, run)
    summary = sparkstate.rescale(spark, case.checkpoint, 5)
    assert summary.stores == 1 and summary.rows == 1
    case.source.add_all(files[2:])
    run()
    assert_same_rows(sink.updated([]), query(case.source.batch()).collect())


def test_rescale_refused_while_the_query_runs(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    case.source.add_all(random_events(seed=26, n_files=2, per_file=10, n_keys=4))
    query = (case.source.stream().groupBy("k").count().writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", case.checkpoint).trigger(processingTime="1 second").start())
    try:
        query.processAllAvailable()
        with pytest.raises(RescaleError, match="is running on"):
            sparkstate.rescale(spark, case.checkpoint, 5)
    finally:
        query.stop()
    assert not os.path.exists(os.path.join(case.checkpoint, "sparkstate-rescale"))


def test_failed_rescale_then_rerun(spark, tmp_path, monkeypatch, variant):
    """A rescale failing after some partitions were written leaves the checkpoint as it was; one that
    stops after the repartition batch was logged is refused by Spark on restart (its own
    unfinished-repartition check) until the rescale is re-run, which finishes it."""
    case = Case(spark, tmp_path)
    files = random_events(seed=27, n_files=4, per_file=40, n_keys=25)
    sink = BatchCollector()

    def run():
        case.run(lambda: sink.attach(_per_key_stats(case.source.stream()).writeStream.outputMode("update")))

    case.source.add_all(files[:2])
    run_with(spark, 4, run)
    batches = committed_batches(case.checkpoint)
    # The task of new partition 4 writes its stores, then fails writing its done marker.
    done_marker_fails = {"target": "sparkstate.storage.local:LocalFileIO.write_bytes_atomic",
                         "when": "args[0].endswith('/done/4.json')", "action": "raise"}
    with session_conf(spark, {PREFIX + "pythonExec": fault_python(str(tmp_path), [done_marker_fails])}):
        with pytest.raises(RescaleError, match="injected failure"):
            sparkstate.rescale(spark, case.checkpoint, 7)
    assert committed_batches(case.checkpoint) == batches and pinned_partitions(case.checkpoint) == 4
    # The driver writes the repartition batch's offsets, then fails publishing the first new version.
    io = instrument_local_storage(monkeypatch)
    io.fail("create_exclusive", "*/sparkstate/manifests/*.manifest")
    with pytest.raises(InjectedFault):
        sparkstate.rescale(spark, case.checkpoint, 7)
    io.heal()
    with pytest.raises(Exception, match="(?i)repartition"):
        run()  # Spark: unfinished repartition batch
    summary = sparkstate.rescale(spark, case.checkpoint, 7)
    assert summary.partitions_skipped == 7  # every partition was staged by the interrupted run
    case.source.add_all(files[2:])
    run()
    assert pinned_partitions(case.checkpoint) == 7
    assert_same_rows(sink.updated(["k"]), _per_key_stats(case.source.batch()).collect(), min_rows=25)
