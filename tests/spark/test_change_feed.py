"""Spark's state data source on sparkstate's stores: the change feed (`readChangeFeed`) is, batch by batch,
exactly the difference of consecutive versions read with the plain `statestore` reader, for every operator
and both backends, and agrees with Spark's HDFS provider; snapshot replay (`snapshotStartBatchId`) gives the
plain reader's rows, and a snapshot the checkpoint does not hold is refused by name."""
from __future__ import annotations

import json
import os
import random
import re

import pytest
from conftest import BUILTIN_PROVIDERS, selected_provider
from datagen import BASE, advance_row, event_time, into_files, random_events
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from spark_harness import BatchCollector, InputDir, run_available_now, session_conf
from test_operators import DELAY, JOIN_SCHEMA, Case, _join, _join_inputs, _running_totals_fn

from sparkstate.checkpoint import CheckpointFileManager
from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's stores")


@pytest.fixture(autouse=True)
def change_logs(spark):
    """The RocksDB backend keeps change logs only when asked (the heap backend's deltas are its change logs)."""
    with session_conf(spark, {"spark.sql.streaming.stateStore.sparkstate.rocksdb.changeLog": "true"}):
        yield

JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
               "right-keyWithIndexToValue")


def _key(row_part) -> str:
    return json.dumps(row_part.asDict(recursive=True) if row_part is not None else None, sort_keys=True,
                      default=str)


def _state(spark, checkpoint: str, batch: int, store: str | None) -> dict[tuple[int, str], str]:
    """{(partition, key): value} of the state after `batch` (-1: before the first batch)."""
    if batch < 0:
        return {}
    reader = spark.read.format("statestore").option("batchId", batch)
    if store:
        reader = reader.option("storeName", store)
    return {(r["partition_id"], _key(r["key"])): _key(r["value"]) for r in reader.load(checkpoint).collect()}


def _feed(spark, checkpoint: str, start: int, end: int, store: str | None) -> dict[int, dict]:
    """{batch: {(partition, key): value or None}} from the change feed; a key's last change per batch."""
    reader = (spark.read.format("statestore").option("readChangeFeed", True)
              .option("changeStartBatchId", start).option("changeEndBatchId", end))
    if store:
        reader = reader.option("storeName", store)
    out: dict[int, dict] = {b: {} for b in range(start, end + 1)}
    for r in reader.load(checkpoint).orderBy("batch_id").collect():
        assert r["change_type"] in ("update", "delete")
        out[r["batch_id"]][(r["partition_id"], _key(r["key"]))] = \
            _key(r["value"]) if r["change_type"] == "update" else None
    return out


def _last_batch(checkpoint: str) -> int:
    return max(int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit())


def assert_feed_is_the_difference_of_versions(spark, checkpoint: str, stores=(None,)) -> int:
    """Every store's change feed over all batches equals the differences of consecutive versions; returns
    the number of changes seen (deletes included), so a test can require both kinds."""
    last = _last_batch(checkpoint)
    seen = 0
    for store in stores:
        feed = _feed(spark, checkpoint, 0, last, store)
        previous = {}
        for batch in range(last + 1):
            current = _state(spark, checkpoint, batch, store)
            expected = {k: v for k, v in current.items() if previous.get(k) != v}
            expected.update({k: None for k in previous if k not in current})
            # The feed lists every key the batch wrote, with the key's last write: besides the difference it
            # holds only writes that changed nothing (a value written again, as session windows rewrite
            # their sessions, or a key added and removed within the batch).
            got = {k: v for k, v in feed[batch].items() if v != previous.get(k)}
            assert got == expected, f"store {store or 'default'}, batch {batch}"
            seen += len(got)
            previous = current
    return seen


def _deletes(spark, checkpoint: str, store: str | None = None) -> int:
    reader = (spark.read.format("statestore").option("readChangeFeed", True).option("changeStartBatchId", 0)
              .option("changeEndBatchId", _last_batch(checkpoint)))
    if store:
        reader = reader.option("storeName", store)
    return reader.load(checkpoint).where("change_type = 'delete'").count()


@pytest.mark.variants("rocksdb", "heap", "rocksdb-logged")
def test_aggregation_with_watermark_eviction(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=81, n_files=5, per_file=12, n_keys=4)
    files.append([advance_row(len(files))])
    case.source.add_all(files)
    sink = BatchCollector()
    windowed = (case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
                .groupBy(F.window("ts", "10 seconds"), "k").agg(F.count("*").alias("n"), F.sum("v").alias("s")))
    case.run(lambda: sink.attach(windowed.writeStream.outputMode("append")))
    assert assert_feed_is_the_difference_of_versions(spark, case.checkpoint) > 20
    assert _deletes(spark, case.checkpoint) > 0  # windows the watermark closed


def test_drop_duplicates_with_watermark(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=82, n_files=5, per_file=12, n_keys=4, v_range=6)
    files.append([advance_row(len(files))])
    case.source.add_all(files)
    sink = BatchCollector()
    deduped = (case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
               .dropDuplicates(["k", "v", "ts"]).select("k", "v"))
    case.run(lambda: sink.attach(deduped.writeStream.outputMode("append")))
    assert assert_feed_is_the_difference_of_versions(spark, case.checkpoint) > 20
    assert _deletes(spark, case.checkpoint) > 0


def test_stream_stream_join_every_store(spark, tmp_path, variant):
    n_files = 5
    left_files, right_files = _join_inputs(83, n_files)
    left_files.append([advance_row(n_files, "adv-left")])
    right_files.append([advance_row(n_files, "adv-right")])
    left = InputDir(spark, str(tmp_path / "left"), JOIN_SCHEMA)
    right = InputDir(spark, str(tmp_path / "right"), JOIN_SCHEMA)
    left.add_all(left_files)
    right.add_all(right_files)
    checkpoint = str(tmp_path / "checkpoint")
    run_available_now(BatchCollector().attach(_join(left.stream(), right.stream(), "inner", streaming=True)
                                              .writeStream.outputMode("append")), checkpoint)
    assert assert_feed_is_the_difference_of_versions(spark, checkpoint, JOIN_STORES) > 20
    assert _deletes(spark, checkpoint, "left-keyWithIndexToValue") > 0  # state cleanup by the watermark


def test_session_window(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    files = random_events(seed=84, n_files=5, per_file=8, n_keys=3)
    files.append([advance_row(len(files))])
    case.source.add_all(files)
    sessions = (case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
                .groupBy(F.session_window("ts", "5 seconds"), "k").agg(F.count("*").alias("n")))
    case.run(lambda: BatchCollector().attach(sessions.writeStream.outputMode("append")))
    assert assert_feed_is_the_difference_of_versions(spark, case.checkpoint) > 10
    assert _deletes(spark, case.checkpoint) > 0


def test_apply_in_pandas_with_state_and_timeouts(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    rng = random.Random(85)
    rows = [{"id": f"s{n}-{j}", "k": f"key{n}", "v": rng.randrange(50), "t": BASE + 8 * n + rng.randrange(20)}
            for n in range(10) for j in range(rng.randint(2, 5))]
    rows.sort(key=lambda r: r["t"])
    files = into_files(rows, 5)
    files.append([advance_row(5)])
    case.source.add_all(files)
    stateful = (case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY).groupBy("k")
                .applyInPandasWithState(_running_totals_fn(), "k string, n long, total long, expired boolean",
                                        "n long, total long, last long", "update", GroupStateTimeout.EventTimeTimeout))
    case.run(lambda: BatchCollector().attach(stateful.writeStream.outputMode("update")))
    assert assert_feed_is_the_difference_of_versions(spark, case.checkpoint) > 10
    assert _deletes(spark, case.checkpoint) > 0  # timed-out keys


def test_the_feed_agrees_with_sparks_hdfs_provider(spark, tmp_path, variant):
    files = random_events(seed=86, n_files=5, per_file=12, n_keys=5)
    files.append([advance_row(len(files))])
    feeds = []
    for name, conf in (("ours", {}), ("hdfs", {PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]})):
        case = Case(spark, tmp_path / name)
        case.source.add_all(files)
        windowed = (case.source.stream().withColumn("ts", event_time()).withWatermark("ts", DELAY)
                    .groupBy(F.window("ts", "10 seconds"), "k").agg(F.count("*").alias("n")))
        with session_conf(spark, conf):
            case.run(lambda: BatchCollector().attach(windowed.writeStream.outputMode("append")))
            # Spark's HDFS feed lists every write; the last per key is what the batch left
            feeds.append(_feed(spark, case.checkpoint, 0, _last_batch(case.checkpoint), None))
    assert feeds[0] == feeds[1] and sum(len(b) for b in feeds[0].values()) > 20


def _full_snapshot_batches(checkpoint: str, partition: int) -> list[int]:
    """The batches whose heap full snapshot a retained manifest lists (a finished snapshot no manifest
    names yet does not count: nothing vouches for its contents)."""
    fm = CheckpointFileManager(f"file:{checkpoint}/state/0/{partition}")
    return sorted({int(m.group(1)) - 1 for v in fm.versions() for ref in fm.read_manifest(v).shared_files
                   if (m := re.fullmatch(r"full-(\d+)\.arrow", ref.local))})


@pytest.mark.variants("rocksdb", "heap", "rocksdb-logged")
def test_snapshot_replay_gives_the_plain_readers_rows_and_names_a_missing_snapshot(spark, tmp_path, variant):
    case = Case(spark, tmp_path)
    case.source.add_all(random_events(seed=87, n_files=6, per_file=15, n_keys=6))
    counts = case.source.stream().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
    case.run(lambda: BatchCollector().attach(counts.writeStream.outputMode("update")))
    last = _last_batch(case.checkpoint)
    partition = 1
    starts = list(range(0, last + 1)) if variant != "heap" else _full_snapshot_batches(case.checkpoint, partition)
    assert starts, "no snapshot to start from"

    def rows(reader):
        return sorted(_key(r["key"]) + _key(r["value"]) for r in reader.load(case.checkpoint).collect()
                      if r["partition_id"] == partition)

    expected = rows(spark.read.format("statestore").option("batchId", last))
    assert expected
    for start in sorted({starts[0], starts[-1]}):
        replayed = rows(spark.read.format("statestore").option("batchId", last)
                        .option("snapshotStartBatchId", start).option("snapshotPartitionId", partition))
        assert replayed == expected, f"replayed from the snapshot of batch {start}"
    if variant == "heap":
        missing = next(b for b in range(last + 1) if b not in starts)
        with pytest.raises(Exception, match=f"no full snapshot of version {missing + 1} .batch {missing}."):
            rows(spark.read.format("statestore").option("batchId", last)
                 .option("snapshotStartBatchId", missing).option("snapshotPartitionId", partition))
    else:  # a version retention removed
        manifests = os.path.join(case.checkpoint, "state", "0", str(partition), "sparkstate", "manifests")
        for name in os.listdir(manifests):
            if re.fullmatch(r"1(_.+)?\.manifest", name):  # checkpoint format v2 keeps one per attempt too
                os.remove(os.path.join(manifests, name))
        with pytest.raises(Exception, match=r"version 1 \(batch 0\).*, needed for the snapshot replay of batches "
                                            r"0\.\.\d+, is not in the check"):
            rows(spark.read.format("statestore").option("batchId", last)
                 .option("snapshotStartBatchId", 0).option("snapshotPartitionId", partition))
