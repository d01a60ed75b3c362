"""The shim's key filter (jvm-shim KeyFilter): gets of absent keys answered in the JVM, and only when the
filter is known to hold every key of the store.

Each test runs a deduplication over input whose later files repeat earlier events, stops, and restarts
over more such files; the sink must equal the same deduplication done in batch, so a filter that ever
called a stored key absent would show as a duplicate in the output. The custom metric
`sparkstateFilteredGets` says when the filter answered.
"""
from __future__ import annotations

import random

import pytest
from datagen import BASE, BUCKET, EVENT_SCHEMA, event_time
from pyspark.sql import functions as F
from spark_harness import InputDir, assert_same_rows, read_parquet_sink, run_available_now_progress, session_conf

from conftest import PREFIX, selected_provider

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="the key filter is sparkstate's")

FILTERED = "sparkstateFilteredGets"


def _files(seed: int, n_files: int, per_file: int, repeat_from: str) -> list[list[dict]]:
    """File i: `per_file` new events of event-time bucket i, then copies of earlier events (`previous`:
    of file i-1 only, so they stay within a watermark; `all`: of any earlier file)."""
    rng = random.Random(seed)
    files: list[list[dict]] = []
    for i in range(n_files):
        rows = [{"id": f"e{i}-{j}", "k": f"k{rng.randrange(50)}", "v": j, "t": BASE + BUCKET * i + rng.randrange(BUCKET)}
                for j in range(per_file)]
        earlier = files[-1] if repeat_from == "previous" and files else [r for f in files for r in f]
        copies = rng.sample(earlier, min(len(earlier), per_file // 2))
        files.append(rows + [dict(r) for r in copies])
    return files


def _filtered(progress: list[dict]) -> list[int]:
    """Filtered gets per batch that read input (each batch's stateful operator)."""
    return [sum(op.get("customMetrics", {}).get(FILTERED, 0) for op in p["stateOperators"])
            for p in progress if p["numInputRows"] > 0]


def _run_two_phases(spark, tmp_path, files, make_query) -> tuple[list[int], list[int], InputDir]:
    source = InputDir(spark, str(tmp_path / "events"), EVENT_SCHEMA)
    checkpoint, output = str(tmp_path / "checkpoint"), str(tmp_path / "output")
    phases = []
    for part in (files[:3], files[3:]):
        source.add_all(part)
        writer = make_query(source.stream()).writeStream.outputMode("append").format("parquet").option("path", output)
        phases.append(_filtered(run_available_now_progress(writer, checkpoint)))
    assert_same_rows(read_parquet_sink(spark, output), source.batch().select("id", "t").distinct().collect(),
                     min_rows=100)
    return phases[0], phases[1], source


def _dedup_with_watermark(stream):
    return (stream.withColumn("et", event_time()).withWatermark("et", "30 seconds")
            .dropDuplicates(["id", "et"]).select("id", "t"))


def test_a_full_scan_after_a_restart_lets_the_filter_answer_again(spark, tmp_path, variant):
    """dropDuplicates with a watermark scans its whole store every batch to evict: a new query starts from
    an empty store, which is known to be empty; a restarted one is not trusted before that scan."""
    first, second, _ = _run_two_phases(spark, tmp_path, _files(11, 6, 60, "previous"), _dedup_with_watermark)
    assert len(first) == 3 and all(n > 0 for n in first), f"filtered gets per batch, first run: {first}"
    assert second[0] == 0, f"the first batch after the restart trusted a filter before any scan: {second}"
    assert all(n > 0 for n in second[1:]), f"filtered gets per batch after the restart: {second}"


def test_without_a_full_scan_a_restarted_query_asks_the_worker(spark, tmp_path):
    """dropDuplicates without a watermark never scans, so after a restart nothing proves what the store
    holds: every get goes to the worker, and the copies of the first run's events are still dropped."""
    first, second, _ = _run_two_phases(spark, tmp_path, _files(12, 6, 60, "all"),
                                       lambda s: s.dropDuplicates(["id"]).select("id", "t"))
    assert all(n > 0 for n in first), f"filtered gets per batch, first run: {first}"
    assert second == [0] * len(second), f"filtered gets after the restart: {second}"


def test_max_keys_zero_turns_the_filter_off(spark, tmp_path):
    with session_conf(spark, {PREFIX + "keyFilter.maxKeys": "0"}):
        first, second, _ = _run_two_phases(spark, tmp_path, _files(13, 6, 60, "previous"), _dedup_with_watermark)
    assert first + second == [0] * (len(first) + len(second))


def test_a_filter_too_small_for_the_store_answers_nothing_and_loses_nothing(spark, tmp_path):
    """Past maxKeys the filter stops answering: the query runs on, every get going to the worker."""
    with session_conf(spark, {PREFIX + "keyFilter.maxKeys": "20", "spark.sql.shuffle.partitions": "1"}):
        first, second, _ = _run_two_phases(spark, tmp_path, _files(14, 6, 60, "all"),
                                           lambda s: s.dropDuplicates(["id"]).select("id", "t"))
    assert first[0] > 0, f"the filter answered before it filled up: {first}"
    assert first[1:] + second == [0] * (len(first) - 1 + len(second)), f"after it filled up: {first} {second}"


def test_aggregation_results_match_batch_with_the_filter(spark, tmp_path, variant):
    """A streaming aggregation gets every group's row; new groups are answered by the filter."""
    source = InputDir(spark, str(tmp_path / "events"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    files = _files(15, 4, 60, "previous")
    results = {}

    def keep(df, batch_id):
        for row in df.collect():
            results[row["k"]] = (row["n"], row["total"])

    filtered = []
    for part in (files[:2], files[2:]):
        source.add_all(part)
        writer = (source.stream().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
                  .writeStream.outputMode("update").foreachBatch(keep))
        filtered += _filtered(run_available_now_progress(writer, checkpoint))
    expected = {r["k"]: (r["n"], r["total"]) for r in
                source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")).collect()}
    assert results == expected and len(expected) >= 40
    assert filtered[0] > 0, f"new groups of the first batch were not filtered: {filtered}"


def test_session_windows_skip_prefix_scans_of_new_keys(spark, tmp_path, variant):
    """Session windows look a key's sessions up by prefix scan: the filter holds every key's scan prefix
    too, so a key with no session yet needs no scan in the worker."""
    source = InputDir(spark, str(tmp_path / "events"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    rng = random.Random(16)
    files = [[{"id": f"e{i}-{j}", "k": f"k{rng.randrange(300)}", "v": j, "t": BASE + BUCKET * i + rng.randrange(BUCKET)}
              for j in range(60)] for i in range(6)]
    files.append([{"id": "advance", "k": "zz", "v": 0, "t": BASE + BUCKET * 6 + 1005}])
    sessions: list = []
    filtered: list[int] = []

    def query(df):
        return (df.withColumn("ts", event_time()).withWatermark("ts", "10 seconds")
                .groupBy(F.session_window("ts", "5 seconds"), "k").agg(F.count("*").alias("n")))

    for part in (files[:3], files[3:]):
        source.add_all(part)
        writer = query(source.stream()).writeStream.outputMode("append").foreachBatch(
            lambda df, _: sessions.extend(df.collect()))
        filtered += _filtered(run_available_now_progress(writer, checkpoint))
    final_watermark = BASE + BUCKET * 6 + 1005 - 10
    expected = query(source.batch()).where(
        F.col("session_window.end") <= F.timestamp_seconds(F.lit(final_watermark))).collect()
    assert_same_rows(sessions, expected, min_rows=200)
    assert filtered[0] > 0, f"prefix scans of new keys went to the worker: {filtered}"
