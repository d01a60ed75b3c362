"""End-to-end stateful operator tests: run part of the input, stop, restart from the same checkpoint
over the rest, and compare the sink's contents with the same computation done in batch.

Runs against the provider chosen by `SPARKSTATE_TEST_PROVIDER` (see conftest.py).
"""
from __future__ import annotations

import os
import random

import pandas as pd
import pytest
from datagen import BASE, BUCKET, EVENT_SCHEMA, advance_row, event_time, into_files, max_t, random_events
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import LongType, StringType, StructField, StructType
from sparkstate_jobs.progress import progress_dict
from spark_harness import (
    BatchCollector,
    InputDir,
    assert_same_rows,
    committed_batches,
    read_parquet_sink,
    run_available_now,
    run_available_now_progress,
    session_conf,
)

DELAY = "10 seconds"
DELAY_S = 10


class Case:
    """One test's input directory, checkpoint and output directory."""

    def __init__(self, spark, tmp_path, schema=EVENT_SCHEMA, name="events"):
        self.spark = spark
        self.source = InputDir(spark, str(tmp_path / name), schema)
        self.checkpoint = str(tmp_path / "checkpoint")
        self.output = str(tmp_path / "output")

    def run(self, make_writer) -> dict:
        """Build the query from a fresh readStream and drain it (availableNow)."""
        return run_available_now(make_writer(), self.checkpoint)


def deduplication_to_a_file_sink(spark, tmp_path, seed: int):
    """dropDuplicates into a parquet file sink: the case, its six input files, the output path, run()."""
    case = Case(spark, tmp_path)
    files = random_events(seed=seed, n_files=6, per_file=40, n_keys=6, v_range=15)
    out = str(tmp_path / "out")

    def run():
        case.run(lambda: case.source.stream().dropDuplicates(["k", "v"]).select("k", "v").writeStream
                 .format("parquet").option("path", out).outputMode("append"))

    return case, files, out, run


def file_sink_across_an_offline_batch(spark, tmp_path, seed: int, how: str, offline, first_run=None):
    """Spark's file sink keeps its own batch log and compacts it every compactInterval batches (2 here, so
    the offline command's batch 3, a rescale's or a migration's, is itself a compaction id). `offline(
    checkpoint, file_sinks)` runs the command after three batches; `how` "file_sinks" gives it the sink's
    path, "repair" does not, so the restart fails like Spark's own repartition does until
    `repair_file_sink` adds the entry. Either way the output is exactly the batch computation's, across
    one more restart. Returns the case."""
    case, files, out, run = deduplication_to_a_file_sink(spark, tmp_path, seed)
    with session_conf(spark, {"spark.sql.streaming.fileSink.log.compactInterval": "2"}):
        case.source.add_all(files[:3])
        (first_run or (lambda f: f()))(run)
        log = os.path.join(out, "_spark_metadata")
        assert sorted(n for n in os.listdir(log) if not n.startswith(".")) == ["0", "1.compact", "2"]
        assert offline(case.checkpoint, [out] if how == "file_sinks" else []).batch_id == 3
        case.source.add_all(files[3:])
        if how == "repair":
            with pytest.raises(Exception, match="BATCH_METADATA_NOT_FOUND|Unable to find batch"):
                run()
            from sparkstate.rescaling import repair_file_sink

            assert repair_file_sink(case.checkpoint, out, default_interval=2) == [3]
        run()
        run()  # a restart after the compactions that followed the offline batch
    assert "3.compact" in os.listdir(log) and committed_batches(case.checkpoint)[-1] >= 5
    assert_same_rows(read_parquet_sink(spark, out), case.source.batch().select("k", "v").distinct().collect(),
                     min_rows=40)
    return case


def _restart_happened(case: Case, first_batches: list[int]) -> None:
    """The second run must have continued the first run's batch ids (i.e. resumed the checkpoint).

    Old commit-log entries are purged (minBatchesToRetain), so only the tail is compared.
    """
    after = committed_batches(case.checkpoint)
    assert first_batches, "first run committed nothing"
    assert after and after[-1] > first_batches[-1] and first_batches[-1] in after
    assert after == list(range(after[0], after[-1] + 1))


def _two_phases(case: Case, files, split: int, make_writer) -> list[int]:
    """Run files[:split], then files[split:] from the same checkpoint; returns the first run's batches."""
    case.source.add_all(files[:split])
    case.run(make_writer)
    first = committed_batches(case.checkpoint)
    # maxFilesPerTrigger=1: at least one batch per file (plus no-data batches for watermarks)
    assert len(first) >= split
    case.source.add_all(files[split:])
    case.run(make_writer)
    _restart_happened(case, first)
    return first


# ------------------------------------------------------------------------------ aggregations

def _per_key_stats(df: DataFrame) -> DataFrame:
    return df.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"),
                               F.min("v").alias("lo"), F.max("v").alias("hi"))


@pytest.mark.variants("rocksdb", "heap", "socket", "rocksdb-logged", slow=("py4j", "rocksdb-mapped"))
def test_aggregation_update_mode(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=1, n_files=4, per_file=50, n_keys=12)
    sink = BatchCollector()
    _two_phases(case, files, 2, lambda: sink.attach(
        _per_key_stats(case.source.stream()).writeStream.outputMode("update")))
    assert_same_rows(sink.updated(["k"]), _per_key_stats(case.source.batch()).collect(), min_rows=12)


def test_aggregation_complete_mode(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=2, n_files=5, per_file=40, n_keys=9)

    def query(df):
        return df.groupBy("k", (F.col("v") % 3).alias("m")).agg(F.count("*").alias("n"),
                                                               F.sum("v").alias("total"))

    sink = BatchCollector()
    _two_phases(case, files, 2, lambda: sink.attach(
        query(case.source.stream()).writeStream.outputMode("complete")))
    assert_same_rows(sink.completed(), query(case.source.batch()).collect(), min_rows=20)


def test_windowed_count_append_mode_with_watermark(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=3, n_files=5, per_file=30, n_keys=4)
    files.append([advance_row(len(files))])

    def query(df):
        return (df.withColumn("ts", event_time()).withWatermark("ts", DELAY)
                .groupBy(F.window("ts", "10 seconds"), "k")
                .agg(F.count("*").alias("n"), F.sum("v").alias("total")))

    _two_phases(case, files, 3, lambda: (
        query(case.source.stream()).writeStream.outputMode("append").format("parquet")
        .option("path", case.output)))

    # Append mode emits a window once the watermark (max event time - delay) passes its end.
    final_wm = max_t(files) - DELAY_S
    expected = query(case.source.batch()).where(F.col("window.end") <= F.timestamp_seconds(F.lit(final_wm)))
    got = read_parquet_sink(spark, case.output)
    assert_same_rows(got, expected.collect(), min_rows=30)
    # The advance row's window is still open, so it must not have been emitted.
    assert not [r for r in got if r["k"] == "zz-advance"]


def test_global_aggregation(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=4, n_files=5, per_file=30, n_keys=5)

    def query(df):
        return df.agg(F.count("*").alias("n"), F.sum("v").alias("total"), F.min("t").alias("first"),
                      F.max("t").alias("last"), F.avg("v").alias("mean"))

    sink = BatchCollector()
    _two_phases(case, files, 2, lambda: sink.attach(
        query(case.source.stream()).writeStream.outputMode("update")))
    assert_same_rows(sink.updated([]), query(case.source.batch()).collect())
    # every data batch emitted the running totals: counts grow monotonically across the restart
    counts = [rows[0]["n"] for _, rows in sorted(sink.batches.items()) if rows]
    assert counts == sorted(counts) and len(counts) == len(files)


# --------------------------------------------------------------------------- deduplication

def test_drop_duplicates(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    # few distinct (k, v) pairs, so most rows -- including many in the second run -- are duplicates
    files = random_events(seed=5, n_files=6, per_file=40, n_keys=6, v_range=15)
    _two_phases(case, files, 3, lambda: (
        case.source.stream().dropDuplicates(["k", "v"]).select("k", "v")
        .writeStream.outputMode("append").format("parquet").option("path", case.output)))
    assert_same_rows(read_parquet_sink(spark, case.output),
                     case.source.batch().select("k", "v").distinct().collect(), min_rows=40)


def test_drop_duplicates_within_watermark(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    rng = random.Random(6)
    n_files = 6
    rows = []
    # Each event is delivered 1-3 times within 3 s of event time; copies may land in the next file
    # (and so in the next run).
    for e in range(150):
        t0 = BASE + rng.randrange(BUCKET * n_files - 2)
        k = f"k{rng.randrange(7)}"
        for copy in range(rng.choice([1, 2, 2, 3])):
            rows.append({"id": f"ev{e}", "k": k, "v": copy, "t": t0 + (0 if copy == 0 else rng.randrange(1, 4))})
    for b in range(1, n_files):  # events just before a file boundary whose last copy lands after it
        for e in range(3):
            t0 = BASE + BUCKET * b - rng.randint(1, 2)
            rows += [{"id": f"edge{b}-{e}", "k": "edge", "v": c, "t": t0 + 3 * c} for c in range(2)]
    rows.sort(key=lambda r: r["t"])
    files = into_files(rows, n_files)
    crossing = {r["id"] for r in files[2]} & {r["id"] for r in files[3]}
    assert crossing, "the data should have duplicates across the restart boundary"

    sink = BatchCollector()
    delay = "15 seconds"  # copies are <= 3 s apart; state lives >= 15 s of watermark, so all dedup
    _two_phases(case, files, 3, lambda: sink.attach(
        case.source.stream().withColumn("ts", event_time()).withWatermark("ts", delay)
        .dropDuplicatesWithinWatermark(["id"]).select("id", "k")
        .writeStream.outputMode("append")))
    assert_same_rows(sink.appended(), case.source.batch().select("id", "k").distinct().collect(),
                     min_rows=150)


# ------------------------------------------------------------------------- stream-stream joins

JOIN_SCHEMA = StructType([StructField("id", StringType()), StructField("v", LongType()),
                          StructField("t", LongType())])
JOIN_RANGE_S = 5


def _join_inputs(seed: int, n_files: int):
    """Left events and right events sharing ids; a right row matches if within +-5 s of its left row."""
    rng = random.Random(seed)
    left, right = [], []
    for n in range(n_files * 18):
        t = BASE + rng.randrange(BUCKET * n_files)
        left.append({"id": f"u{n}", "v": n, "t": t})
        kind = rng.random()
        offsets = [] if kind < 0.35 else [rng.randint(-4, 4)] if kind < 0.75 else \
            [rng.randint(-4, 4), rng.choice([-8, -6, 4, 6, 9])]
        for i, d in enumerate(offsets):
            right.append({"id": f"u{n}", "v": 1000 * n + i, "t": max(t + d, BASE)})
    for n in range(n_files * 4):  # right rows without a left partner
        right.append({"id": f"r{n}", "v": -n, "t": BASE + rng.randrange(BUCKET * n_files)})
    return into_files(left, n_files), into_files(right, n_files)


def _join(left: DataFrame, right: DataFrame, how: str, streaming: bool) -> DataFrame:
    lhs = left.select(F.col("id").alias("lid"), F.col("v").alias("lv"), F.col("t").alias("lt"),
                      event_time().alias("lts"))
    rhs = right.select(F.col("id").alias("rid"), F.col("v").alias("rv"), F.col("t").alias("rt"),
                       event_time().alias("rts"))
    if streaming:
        lhs, rhs = lhs.withWatermark("lts", DELAY), rhs.withWatermark("rts", DELAY)
    cond = (F.col("lid") == F.col("rid")) & F.expr(
        f"rts BETWEEN lts - INTERVAL {JOIN_RANGE_S} SECONDS AND lts + INTERVAL {JOIN_RANGE_S} SECONDS")
    return lhs.join(rhs, cond, how).select("lid", "lv", "lt", "rid", "rv", "rt")


def _run_join(spark, tmp_path, how: str, seed: int):
    n_files = 4
    left_files, right_files = _join_inputs(seed, n_files)
    left_files.append([advance_row(n_files, "adv-left")])
    right_files.append([advance_row(n_files, "adv-right")])
    left = InputDir(spark, str(tmp_path / "left"), JOIN_SCHEMA)
    right = InputDir(spark, str(tmp_path / "right"), JOIN_SCHEMA)
    checkpoint, output = str(tmp_path / "checkpoint"), str(tmp_path / "output")
    read_ahead_gets = 0

    def run():
        nonlocal read_ahead_gets
        writer = (_join(left.stream(), right.stream(), how, streaming=True).writeStream
                  .outputMode("append").format("parquet").option("path", output))
        for progress in run_available_now_progress(writer, checkpoint):
            for op in progress_dict(progress).get("stateOperators") or []:
                read_ahead_gets += int((op.get("customMetrics") or {}).get("sparkstateReadAheadGets", 0))

    split = 2
    left.add_all(left_files[:split])
    right.add_all(right_files[:split])
    run()
    first = committed_batches(checkpoint)
    left.add_all(left_files[split:])
    right.add_all(right_files[split:])
    run()
    after = committed_batches(checkpoint)
    assert first and after and after[-1] > first[-1] and first[-1] in after
    batch = _join(left.batch(), right.batch(), how, streaming=False)
    # The global watermark is the minimum over both inputs (default multipleWatermarkPolicy=min).
    final_wm = min(max_t(left_files), max_t(right_files)) - DELAY_S
    return read_parquet_sink(spark, output), batch, final_wm, read_ahead_gets


@pytest.mark.variants("rocksdb", "heap", "rocksdb-logged", slow=("socket", "py4j", "rocksdb-mapped"))
def test_stream_stream_inner_join(spark, tmp_path, variant):
    got, batch, _, read_ahead_gets = _run_join(spark, tmp_path, "inner", seed=7)
    assert_same_rows(got, batch.collect(), min_rows=40)
    # The eviction passes read the values of every key they scan, fetched ahead a chunk at a time.
    assert read_ahead_gets > 0


def test_stream_stream_left_outer_join(spark, tmp_path, variant):
    got, batch, final_wm, read_ahead_gets = _run_join(spark, tmp_path, "left_outer", seed=8)
    assert read_ahead_gets > 0
    # An unmatched left row is emitted once no future right row can match it: once the watermark
    # passes lt + range. Rows still waiting at the end (only the advance row, by construction) are
    # not expected yet.
    emit_before = final_wm - JOIN_RANGE_S
    waiting = batch.where(F.col("rid").isNull() & (F.col("lt") >= emit_before)).collect()
    assert [r["lid"] for r in waiting] == ["adv-adv-left"]
    expected = batch.where(F.col("rid").isNotNull() | (F.col("lt") < emit_before)).collect()
    assert sum(1 for r in expected if r["rid"] is None) >= 20, "need unmatched left rows to test"
    assert_same_rows(got, expected, min_rows=40)


# ------------------------------------------------------------------------------ session windows

@pytest.mark.variants("rocksdb", "heap", "rocksdb-logged", slow=("socket", "py4j", "rocksdb-mapped"))
def test_session_window_append_mode(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    # ~1 event per 10 s per key with a 5 s gap: a mix of single-event and multi-event sessions,
    # some spanning files (and the restart).
    files = random_events(seed=9, n_files=6, per_file=10, n_keys=4)
    files.append([advance_row(len(files))])

    def query(df):
        return (df.withColumn("ts", event_time()).withWatermark("ts", DELAY)
                .groupBy(F.session_window("ts", "5 seconds"), "k")
                .agg(F.count("*").alias("n"), F.sum("v").alias("total"), F.collect_list("id").alias("ids")))

    sink = BatchCollector()
    _two_phases(case, files, 3, lambda: sink.attach(
        query(case.source.stream()).withColumn("ids", F.array_sort("ids"))
        .writeStream.outputMode("append")))

    final_wm = max_t(files) - DELAY_S
    expected = (query(case.source.batch()).withColumn("ids", F.array_sort("ids"))
                .where(F.col("session_window.end") <= F.timestamp_seconds(F.lit(final_wm))).collect())
    assert any(r["n"] > 1 for r in expected), "need multi-event sessions"
    assert_same_rows(sink.appended(), expected, min_rows=20)


# ------------------------------------------------------------ applyInPandasWithState (flatMapGroupsWithState)

STATE_TIMEOUT_S = 40


def _running_totals_fn():
    """Built inside a function so cloudpickle ships it by value (workers cannot import test modules)."""

    def running_totals(key, pdfs, state: GroupState):
        if state.hasTimedOut:
            n, total, _last = state.get
            state.remove()
            yield pd.DataFrame({"k": [key[0]], "n": [n], "total": [total], "expired": [True]})
            return
        n, total, last = state.get if state.exists else (0, 0, 0)
        for pdf in pdfs:
            n += len(pdf)
            total += int(pdf["v"].sum())
            last = max(last, int(pdf["t"].max()))
        state.update((n, total, last))
        state.setTimeoutTimestamp((last + STATE_TIMEOUT_S) * 1000)
        yield pd.DataFrame({"k": [key[0]], "n": [n], "total": [total], "expired": [False]})

    return running_totals


@pytest.mark.variants("rocksdb", "heap", "socket")
def test_apply_in_pandas_with_state_event_time_timeout(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    rng = random.Random(10)
    n_files = 6
    rows = []
    # key n is active during [BASE + 8 n, BASE + 8 n + 20): less than the 40 s timeout, so a key
    # never times out between two of its own events.
    for n in range(13):
        for j in range(rng.randint(3, 8)):
            rows.append({"id": f"s{n}-{j}", "k": f"key{n}", "v": rng.randrange(50),
                         "t": BASE + 8 * n + rng.randrange(20)})
    rows.sort(key=lambda r: r["t"])
    files = into_files(rows, n_files)
    files.append([advance_row(n_files)])

    sink = BatchCollector()
    output_schema = "k string, n long, total long, expired boolean"
    first = _two_phases(case, files, 3, lambda: sink.attach(
        case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
        .groupBy("k").applyInPandasWithState(_running_totals_fn(), output_schema, "n long, total long, last long",
                                            "update", GroupStateTimeout.EventTimeTimeout)
        .writeStream.outputMode("update")))

    # A key's timeout fires once the watermark passes its last event time + timeout.
    final_wm = max_t(files) - DELAY_S
    per_key = (case.source.batch().groupBy("k")
               .agg(F.count("*").alias("n"), F.sum("v").alias("total"), F.max("t").alias("last")).collect())
    assert all(abs(r["last"] + STATE_TIMEOUT_S - final_wm) > 5 for r in per_key), "ambiguous test data"
    expected = [(r["k"], r["n"], r["total"], r["last"] + STATE_TIMEOUT_S < final_wm) for r in per_key]
    assert sum(1 for e in expected if e[3]) >= 10 and sum(1 for e in expected if not e[3]) >= 1
    assert_same_rows(sink.updated(["k"]), expected, min_rows=14)
    # some keys' state (with its timeout) must have crossed the restart and expired in the second run
    before = {r["k"] for b in first for r in sink.batches.get(b, [])}
    expired_after = {r["k"] for b, rows in sink.batches.items() if b > first[-1] for r in rows if r["expired"]}
    assert before & expired_after


# ------------------------------------------------------------------------------- streaming limit

def test_streaming_limit(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = [[{"id": f"f{i}-{j}", "k": f"k{j % 4}", "v": j, "t": BASE + BUCKET * i + j} for j in range(20)]
             for i in range(5)]
    limit = 50  # > the 40 rows of the first run, < the 100 rows of all input

    def run():
        run_available_now(case.source.stream().select("id", "k", "v").limit(limit).writeStream
                          .outputMode("append").format("parquet").option("path", case.output),
                          case.checkpoint)

    case.source.add_all(files[:2])
    run()
    first_run = {r["id"] for r in read_parquet_sink(spark, case.output)}
    case.source.add_all(files[2:4])
    run()
    case.source.add_all(files[4:])
    run()  # the limit is already reached: nothing more may be emitted

    got = read_parquet_sink(spark, case.output)
    batch_rows = case.source.batch().select("id", "k", "v").collect()
    # Only the emitted count is determined (which rows fill the last slots is up to Spark), so the
    # check is: exactly `limit` rows, no duplicates, all genuine input rows, first run fully kept,
    # and the remaining slots filled from the next file in order, not from later files.
    assert len(got) == limit == min(limit, len(batch_rows))
    ids = [r["id"] for r in got]
    assert len(set(ids)) == limit
    assert set(map(tuple, got)) <= set(map(tuple, batch_rows))
    assert first_run == {row["id"] for rows in files[:2] for row in rows}
    later = set(ids) - first_run
    assert len(later) == limit - 40 and later <= {row["id"] for row in files[2]}
