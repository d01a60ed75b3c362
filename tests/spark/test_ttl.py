"""Idle-state expiry in real queries: each stateful operator with a ttl gives, batch after batch, what a
reference computes in Python with the same rule from the batch times the checkpoint records. Every batch is
its own run of the query (a stop and a restart from the checkpoint).

The rule: batch b runs at time T(b), the clock of the version it loads (`Manifest.clock_ms`; batch 0: the
`batchTimeMs` version 1 records). A key last written by a batch that ran at time t is expired in batch b
when T(b) - t > ttl. Each store (partition) has its own times; the durations here leave tens of seconds
between "idle" and "expired", and the reference is computed with the earliest and the latest time of every
batch to check that no key's fate depends on which partition it lives in.
"""
from __future__ import annotations

import glob
import os
import time

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import LongType, StringType, StructField, StructType

from conftest import selected_provider
from spark_harness import (PREFIX, AggregationCase, BatchCollector, InputDir, run_available_now,
                           run_available_now_progress, session_conf)

import sparkstate

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")

TTL_S = 40
PAUSE_S = 60  # a pause longer than the ttl, with room for slow batches on either side
SCHEMA = StructType([StructField("k", StringType()), StructField("v", LongType())])
# One file per batch; PAUSE_S passes after batch 1. Batch 2 still runs at the time batch 1 committed, so its
# writes are stamped before the pause, and batch 3's after it.
BATCHES = [["a", "b", "c", "d"], ["a", "a"], ["b"], ["c"], ["a", "b", "c", "d", "e"]]
PAUSE_AFTER = 1
# The operators, each with the rule it follows: "count" (a running count per key: an expired key counts
# again from its next row; the sink gets the keys the batch wrote), "complete" (the same counts; the sink
# gets every key the state holds: Spark refuses update mode for session windows, with or without a
# watermark, and complete mode also checks that scans hide expired keys) or "dedup" (a key is emitted when
# it is not in the state: an expired key is emitted again; the operator writes a key only when it emits it).
RULES = {"count": "count", "dedup": "dedup", "session": "complete", "pandas": "count", "dedupww": "dedup"}
# The event time of every row of the session window and dropDuplicatesWithinWatermark queries (seconds):
# a constant, so every batch's rows fall into a key's one session (or one watermark interval).
EVENT_S = 1_767_225_600  # 2026-01-01T00:00:00Z
SESSION_GAP_S = 600
# What the rule gives when batches take seconds: batch 3 runs after the pause, where a, b, c and d have
# been idle for longer than the ttl (c is read there and starts again; a, b and d are deleted unread, the
# metric's 3); in batch 4 only c, written by batch 3, is still alive.
SCENARIO = {"count": [[("a", 1), ("b", 1), ("c", 1), ("d", 1)], [("a", 3)], [("b", 2)], [("c", 1)],
                      [("a", 1), ("b", 1), ("c", 2), ("d", 1), ("e", 1)]],
            "complete": [[("a", 1), ("b", 1), ("c", 1), ("d", 1)], [("a", 3), ("b", 1), ("c", 1), ("d", 1)],
                         [("a", 3), ("b", 2), ("c", 1), ("d", 1)], [("c", 1)],
                         [("a", 1), ("b", 1), ("c", 2), ("d", 1), ("e", 1)]],
            "dedup": [[("a",), ("b",), ("c",), ("d",)], [], [], [("c",)], [("a",), ("b",), ("d",), ("e",)]]}


def _batch_times(checkpoint: str, batch_ids: list[int], store_name: str = "") -> list[list[int]]:
    """Per batch of `batch_ids`, the batch time each partition's store of operator 0 (`store_name`: one
    of its stores other than the default) ran it at (from the
    manifests: batch b loads version b; batch 0 runs at the `batchTimeMs` of version 1). A partition
    without the version (one a rescale removed, or one it added) has no time for that batch."""
    from sparkstate.checkpoint import Manifest

    root = os.path.join(checkpoint, "state", "0")
    times: list[list[int]] = [[] for _ in batch_ids]
    for part in sorted(os.listdir(root), key=lambda n: (not n.isdigit(), n)):
        manifests = os.path.join(root, part, store_name, "sparkstate", "manifests")
        if not part.isdigit() or not os.path.isdir(manifests):
            continue
        for i, b in enumerate(batch_ids):
            path = os.path.join(manifests, f"{max(b, 1)}.manifest")
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                manifest = Manifest.from_bytes(f.read(), path)
            assert manifest.ttl_stamps and manifest.batch_time_ms is not None, path
            times[i].append(manifest.batch_time_ms if b == 0 else manifest.clock_ms)
    return times


def _reference(batches: list[list[str]], times: list[int], rule: str,
               ttl_ms: int = TTL_S * 1000) -> tuple[list[list[tuple]], list[int]]:
    """Per batch (`batches[i]` runs at `times[i]`): what the sink receives (sorted rows: (key, count) for
    the count and complete rules, (key,) for the dedup rule, (key, row, row) for the join of the rows with
    themselves, a row being its place in its batch) and how many keys expire unwritten (the metric; a
    join's: rows)."""
    if rule == "join":
        sides = [[(k, i) for i, k in enumerate(keys)] for keys in batches]
        return _join_reference(list(zip(sides, sides)), times, ttl_ms)
    state: dict[str, tuple[int, int]] = {}  # key -> (count, batch time of its last write)
    rows, expired = [], []
    for t, keys in zip(times, batches):
        alive = {k: s for k, s in state.items() if t - s[1] <= ttl_ms}
        out = []
        for k in sorted(set(keys)):
            if rule in ("count", "complete"):
                alive[k] = (alive.get(k, (0, 0))[0] + keys.count(k), t)
                out.append((k, alive[k][0]))
            elif k not in alive:  # dropDuplicates writes a key only when it emits it
                alive[k] = (1, t)
                out.append((k,))
        expired.append(len([k for k in state if k not in alive]))
        state = alive
        rows.append(sorted((k, n) for k, (n, _) in alive.items()) if rule == "complete" else out)
    return rows, expired


def _since_first(times: list[list[int]]) -> list[tuple[float, float]]:
    """Each batch's earliest and latest time, in seconds after batch 0's earliest (for failure messages)."""
    first = min(times[0])
    return [(round((min(t) - first) / 1000, 1), round((max(t) - first) / 1000, 1)) for t in times]


def _counting_fn():
    """Built inside a function so cloudpickle ships it by value (workers cannot import test modules)."""

    def counting(key, pdfs, state):
        n = state.get[0] if state.exists else 0
        for pdf in pdfs:
            n += len(pdf)
        state.update((n,))
        yield pd.DataFrame({"k": [key[0]], "count": [n]})

    return counting


def _start_python_workers(spark) -> None:
    """Start the Python workers (pandas imported) before the timed runs: a first pandas UDF on a cold,
    loaded machine has held one partition's batch 0 for 25 s, spreading the partitions' batch 0 times
    beyond what the durations leave."""
    groups = spark.range(8).withColumn("g", F.col("id") % 4).groupBy("g")
    groups.applyInPandas(lambda pdf: pdf, "id long, g long").collect()


def _query(source: InputDir, kind: str):
    """The query of `kind`; its sink gets rows shaped as `_as_reference_rows` expects."""
    stream = source.stream()
    timed = stream.withColumn("ts", F.timestamp_seconds(F.lit(EVENT_S)))
    if kind == "count":
        return stream.groupBy("k").count().writeStream.outputMode("update")
    if kind == "dedup":
        return stream.select("k").dropDuplicates(["k"]).writeStream.outputMode("append")
    if kind == "session":
        sessions = timed.groupBy(F.session_window("ts", f"{SESSION_GAP_S} seconds").alias("w"), "k").count()
        return (sessions.select("k", F.col("w.start").cast("long").alias("start"),
                                F.col("w.end").cast("long").alias("end"), "count")
                .writeStream.outputMode("complete"))
    if kind == "pandas":
        return (stream.groupBy("k").applyInPandasWithState(_counting_fn(), "k string, count long", "count long",
                                                           "update", GroupStateTimeout.NoTimeout)
                .writeStream.outputMode("update"))
    if kind == "join":  # the stream joined with itself: each side gets every row
        return stream.join(source.stream().withColumnRenamed("v", "w"), "k").writeStream.outputMode("append")
    assert kind == "dedupww"
    return (timed.withWatermark("ts", "365 days").dropDuplicatesWithinWatermark(["k"]).select("k")
            .writeStream.outputMode("append"))


def _as_reference_rows(kind: str, rows: list) -> list[tuple]:
    """A batch's sink rows in the reference's shape; a session must be the one session of the constant
    event time (a fresh one after expiry looks the same, its count tells them apart)."""
    out = []
    for r in rows:
        if kind == "session":
            assert (r["start"], r["end"]) == (EVENT_S, EVENT_S + SESSION_GAP_S), r
            out.append((r["k"], r["count"]))
        else:
            out.append(tuple(r))
    return sorted(out)


def _expired_metric(progress: list[dict]) -> list[int]:
    return [sum(op["customMetrics"]["sparkstateTtlExpiredKeys"] for op in p["stateOperators"]) for p in progress]


@pytest.mark.slow  # a pause of PAUSE_S and 25 query runs per backend: about five minutes per backend
def test_expiry_matches_the_rule_over_recorded_batch_times(spark, variant, tmp_path):
    """Every operator with state per key. Each kind runs its batches back to back (batches 0 and 1, the
    pause, batches 2 to 4) so that the time between two of its batches does not grow with the number of
    kinds. No-data batches are off: a watermark that moves would add one to a run (the test runs one
    batch per run)."""
    kinds = tuple(RULES)
    sources = {kind: InputDir(spark, str(tmp_path / kind / "in"), SCHEMA) for kind in kinds}
    sinks = {kind: BatchCollector() for kind in kinds}
    progress: dict[str, list] = {kind: [] for kind in kinds}
    phases = (range(0, PAUSE_AFTER + 1), range(PAUSE_AFTER + 1, len(BATCHES)))
    _start_python_workers(spark)
    with session_conf(spark, {PREFIX + "ttl": f"{TTL_S}s",
                              "spark.sql.streaming.noDataMicroBatches.enabled": "false"}):
        for phase in phases:
            if phase.start > 0:
                time.sleep(PAUSE_S)
            for kind in kinds:
                for b in phase:  # each batch a run of its own: a stop and a restart from the checkpoint
                    sources[kind].add([{"k": k, "v": i} for i, k in enumerate(BATCHES[b])])
                    runs = run_available_now_progress(sinks[kind].attach(_query(sources[kind], kind)),
                                                      str(tmp_path / kind / "ckpt"))
                    assert [p["batchId"] for p in runs] == [b], kind
                    progress[kind] += runs
    for kind in kinds:
        rule = RULES[kind]
        times = _batch_times(str(tmp_path / kind / "ckpt"), list(range(len(BATCHES))))
        assert all(times), f"{kind}: a batch without a recorded time"
        early, expired = _reference(BATCHES, [min(t) for t in times], rule)
        late, _ = _reference(BATCHES, [max(t) for t in times], rule)
        assert early == late, (f"{kind}: a key's fate depends on its partition's clock: the durations are too "
                               f"tight: {_since_first(times)}")
        got = [_as_reference_rows(kind, sinks[kind].batches[b]) for b in range(len(BATCHES))]
        assert got == early, kind
        assert _expired_metric(progress[kind]) == expired, kind
        assert got == SCENARIO[rule], f"{kind}: batches ran too slowly for these durations: {_since_first(times)}"


# Across a rescale from 4 to 2 partitions (batch 2 is the rescale's). A batch runs at the time the one before
# it committed, so a pause reaches the batch after the next one: the keys of batch 0 are written at T0, `a`
# again by batch 1 at T1 (batch 0's commit, seconds later). RESCALE_PAUSES_S[0] passes before the rescale,
# and batch 3, the first after it, runs at the rescale's commit: `a` is read there within the ttl of its
# write (kept: its stamp is not lost) and written again. RESCALE_PAUSES_S[1] passes after batch 3, so batch
# 5 runs more than the ttl after T0 and less after the rescale: `b`, idle since T0, starts again (its stamp
# is not reset to the rescale's time); `a` (written by batch 3) and `e` (by batch 4) are alive; `c` and
# `d`, idle since T0, are deleted unread by the new partitions' stores.
# The ttl is 5 s short of the two pauses together, so batch 5 runs more than the ttl after T0 however long
# the runs take; batches 3 and 5 run within the ttl of `a`'s last write while the runs and the rescale
# between the write and the read take less than 45 s (a cold first run and rescale on a loaded machine
# have taken 30).
RESCALE_TTL_S = 95
RESCALE_PAUSES_S = (50, 50)
RESCALE_BATCHES = {0: ["a", "b", "c", "d"], 1: ["a"], 3: ["a"], 4: ["e"], 5: ["a", "b", "e"]}
RESCALE_SCENARIO = [[("a", 1), ("b", 1), ("c", 1), ("d", 1)], [("a", 2)], [("a", 3)], [("e", 1)],
                    [("a", 4), ("b", 1), ("e", 2)]]
# The batch times the scenario is designed for (ms after batch 0; a batch runs at the commit of the one
# before it): batch 1 a second later, batch 3 at the rescale's commit after the first pause, batch 4 at
# batch 3's commit a second later, batch 5 at batch 4's commit after the second pause.
RESCALE_DESIGN_MS = [0, 1_000, 52_000, 53_000, 103_000]
RESCALE_KINDS = {"count": "count", "dedup": "dedup", "session": "complete", "pandas": "count", "dedupww": "dedup",
                 "join": "join"}


@pytest.mark.slow  # pauses of 100 s, five query runs and a rescale per backend and operator: about three minutes
@pytest.mark.parametrize("kind", list(RESCALE_KINDS))
def test_a_rescale_keeps_each_key_s_last_write_time(spark, variant, tmp_path, kind):
    rule = RESCALE_KINDS[kind]
    source = InputDir(spark, str(tmp_path / "in"), SCHEMA)
    checkpoint = str(tmp_path / "ckpt")
    sink = BatchCollector()
    progress: list[dict] = []
    steps: list[str] = []  # when each step ended (wall clock, s from the start): for a failure's message
    if kind == "pandas":
        _start_python_workers(spark)
    start = time.time()

    def run(b: int) -> None:
        source.add([{"k": k, "v": i} for i, k in enumerate(RESCALE_BATCHES[b])])
        runs = run_available_now_progress(sink.attach(_query(source, kind)), checkpoint)
        assert [p["batchId"] for p in runs] == [b]
        progress.extend(runs)
        steps.append(f"batch {b} {time.time() - start:.1f}")

    with session_conf(spark, {PREFIX + "ttl": f"{RESCALE_TTL_S}s",
                              "spark.sql.streaming.noDataMicroBatches.enabled": "false"}):
        with session_conf(spark, {"spark.sql.shuffle.partitions": "4"}):  # pinned by the first run
            run(0)
            run(1)
        time.sleep(RESCALE_PAUSES_S[0])
        summary = sparkstate.rescale(spark, checkpoint, 2)
        assert (summary.old_partitions, summary.new_partitions, summary.batch_id) == (4, 2, 2)
        steps.append(f"rescale {time.time() - start:.1f}")
        run(3)
        time.sleep(RESCALE_PAUSES_S[1])
        run(4)
        run(5)

    batch_ids = list(RESCALE_BATCHES)
    batches = [RESCALE_BATCHES[b] for b in batch_ids]
    # after the rescale: the new partitions' manifests
    times = _batch_times(checkpoint, batch_ids, "left-keyToNumValues" if kind == "join" else "")
    assert [len(t) for t in times] == [4, 4, 2, 2, 2]
    ttl_ms = RESCALE_TTL_S * 1000
    early, expired = _reference(batches, [min(t) for t in times], rule, ttl_ms)
    late, _ = _reference(batches, [max(t) for t in times], rule, ttl_ms)
    timing = f"batch times {_since_first(times)}; steps {steps}"
    assert early == late, f"a key's fate depends on its partition's clock: the durations are too tight ({timing})"
    assert sink.batch_ids() == batch_ids
    got = [_as_reference_rows(kind, sink.batches[b]) for b in batch_ids]
    assert got == early
    assert _expired_metric(progress) == expired
    assert _reference(batches, RESCALE_DESIGN_MS, "count", ttl_ms)[0] == RESCALE_SCENARIO
    designed = _reference(batches, RESCALE_DESIGN_MS, rule, ttl_ms)[0]
    assert got == designed, f"batches ran too slowly for the durations of this test ({timing})"


def test_a_bad_duration_fails_the_query_naming_the_key(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=44, n_files=1)
    case.source.add_all(case.files)
    message = case.failure_of_run({PREFIX + "ttl.operator.0": "3 weeks"})
    assert f"invalid value '3 weeks' for '{PREFIX}ttl.operator.0'" in message and "duration" in message


# A stream-stream join side: (key, row) pairs of its left and right input per batch. PAUSE_S passes after
# batch 1, so batch 3 runs more than the ttl after every write of batches 0 to 2: there a comes back on the
# left with one row where it had two (the second is left past its new count and deleted), c comes back on
# the right, and every other key is deleted with its rows; in batch 4 each side matches what batch 3 wrote.
JOIN_BATCHES = [([("a", 1), ("a", 2), ("b", 3)], []), ([], [("a", 10)]), ([("c", 4)], [("b", 11)]),
                ([("a", 5)], [("c", 12)]), ([("c", 6)], [("a", 13)])]
JOIN_SCENARIO = ([[], [("a", 1, 10), ("a", 2, 10)], [("b", 3, 11)], [], [("a", 5, 13), ("c", 6, 12)]],
                 [0, 0, 0, 5, 0])


def _join_reference(batches: list[tuple[list, list]], times: list[int],
                    ttl_ms: int = TTL_S * 1000) -> tuple[list[list[tuple]], list[int]]:
    """Per batch: the inner join's sorted (key, left row, right row) output, and the rows its stores
    delete (Spark reports a join's custom metrics from its rows stores only): an expired key not written
    again loses all its rows (and its count), one written again the rows past its new count."""
    state: dict[str, dict] = {"left": {}, "right": {}}  # side -> key -> (rows, batch time of its last write)
    out, deleted = [], []
    for t, (left, right) in zip(times, batches):
        gone = 0
        for side, new in (("left", left), ("right", right)):
            written = [k for k, _ in new]
            alive = {}
            for k, (rows, at) in state[side].items():
                if t - at <= ttl_ms:
                    alive[k] = (rows, at)
                elif k in written:
                    gone += max(0, len(rows) - written.count(k))
                else:
                    gone += len(rows)
            state[side] = alive
        old_left, old_right = ({k: rows for k, (rows, _) in state[side].items()} for side in ("left", "right"))
        pairs = [(k, v, w) for k, v in left for w in old_right.get(k, []) + [w for kk, w in right if kk == k]]
        pairs += [(k, v, w) for k, w in right for v in old_left.get(k, [])]
        for side, new in (("left", left), ("right", right)):
            for k, v in new:
                rows = state[side].get(k, ([], t))[0]
                state[side][k] = (rows + [v], t)
        out.append(sorted(pairs))
        deleted.append(gone)
    return out, deleted


def _join_query(left: InputDir, right: InputDir, keys: list[str]):
    return (left.stream().join(right.stream().withColumnRenamed("v", "w"), keys)
            .select("k", "v", "w").writeStream.outputMode("append"))


@pytest.mark.slow  # a pause of PAUSE_S and 5 query runs per backend: about two minutes per backend
def test_a_join_expires_a_key_with_its_rows_by_the_rule(spark, variant, tmp_path):
    """An inner join without a watermark, each batch its own run: each side's key is forgotten, count and
    rows together, the ttl after that side last wrote it; the output and the deletes follow the rule over
    the recorded batch times."""
    left, right = (InputDir(spark, str(tmp_path / side), SCHEMA) for side in ("left", "right"))
    sink, progress, checkpoint = BatchCollector(), [], str(tmp_path / "ckpt")
    with session_conf(spark, {PREFIX + "ttl": f"{TTL_S}s",
                              "spark.sql.streaming.noDataMicroBatches.enabled": "false"}):
        for b, (left_rows, right_rows) in enumerate(JOIN_BATCHES):
            if b == PAUSE_AFTER + 1:
                time.sleep(PAUSE_S)
            left.add([{"k": k, "v": v} for k, v in left_rows])
            right.add([{"k": k, "v": v} for k, v in right_rows])
            runs = run_available_now_progress(sink.attach(_join_query(left, right, ["k"])), checkpoint)
            assert [p["batchId"] for p in runs] == [b]
            progress += runs
    times = _batch_times(checkpoint, list(range(len(JOIN_BATCHES))), "left-keyToNumValues")
    early = _join_reference(JOIN_BATCHES, [min(t) for t in times])
    late = _join_reference(JOIN_BATCHES, [max(t) for t in times])
    assert early == late, f"a key's fate depends on its partition's clock: {_since_first(times)}"
    got = [sorted(tuple(r) for r in sink.batches[b]) for b in range(len(JOIN_BATCHES))]
    assert (got, _expired_metric(progress)) == early
    assert early == JOIN_SCENARIO, f"batches ran too slowly for these durations: {_since_first(times)}"


def _join_side_entries(store_dir: str, tmp_path) -> list[tuple[bytes, bytes]]:
    from sparkstate.engine import Store, StoreSpec

    part = int(os.path.basename(os.path.dirname(store_dir)))
    spec = StoreSpec.from_json({
        "checkpointLocation": store_dir, "operatorId": 0, "partitionId": part,
        "storeName": os.path.basename(store_dir), "instanceId": f"read-{time.time_ns()}", "queryRunId": "read",
        "keySchema": "{}", "valueSchema": "{}", "numColsPrefixKey": 0, "numPartitions": 1,
        "minVersionsToRetain": 10, "settings": {}})
    store = Store(spec, local_root=str(tmp_path / "local"))
    try:
        store.load(store.file_manager.latest_version())
        return [row for chunk in store.scan(b"", 10_000, 1 << 24) for row in chunk]
    finally:
        store.close()


def test_a_join_with_a_ttl_that_expires_nothing_keeps_every_row(spark, tmp_path):
    """Nothing reaches the ttl: every batch (each its own run) gives the reference's join and nothing is
    deleted. The values stores' keys, Spark's own bytes, split into their count keys (a string, an int and
    a decimal too long for its slot) with every index below the count: what the deletes rely on."""
    from pyspark.sql.types import DecimalType, IntegerType

    from sparkstate.engine.join_expiry import IndexedKeys, count_of

    left, right = (InputDir(spark, str(tmp_path / side), "k string, n int, v long") for side in ("left", "right"))
    batches = [([("a", 1), ("a", 2), ("bb", 3)], [("a", 10)]), ([("c", 4)], [("bb", 11), ("a", 12)]),
               ([("a", 5)], [("c", 13), ("zz", 14)])]
    sink, progress, checkpoint = BatchCollector(), [], str(tmp_path / "ckpt")

    def keyed(source: InputDir):
        stream = source.stream()
        return stream.withColumn("d", (F.col("n") * 7).cast(DecimalType(25, 2)))

    with session_conf(spark, {PREFIX + "ttl": "1h"}):
        for left_rows, right_rows in batches:
            left.add([{"k": k, "n": len(k), "v": v} for k, v in left_rows])
            right.add([{"k": k, "n": len(k), "v": v} for k, v in right_rows])
            query = (keyed(left).join(keyed(right).withColumnRenamed("v", "w"), ["k", "n", "d"])
                     .select("k", "v", "w").writeStream.outputMode("append"))
            progress += run_available_now_progress(sink.attach(query), checkpoint)
    expected, deleted = _join_reference(batches, [0] * len(batches), ttl_ms=3_600_000)
    assert [sorted(tuple(r) for r in sink.batches[b]) for b in sink.batch_ids()] == expected
    assert _expired_metric(progress) == deleted == [0, 0, 0]

    schema = (StructType().add("k", StringType()).add("n", IntegerType()).add("d", DecimalType(25, 2))
              .add("index", LongType()))
    keys, rows_checked = IndexedKeys(schema.json()), 0
    for side in ("left", "right"):
        for part_dir in glob.glob(os.path.join(checkpoint, "state", "0", "*", f"{side}-keyToNumValues")):
            counts = {k: count_of(v) for k, v in _join_side_entries(part_dir, tmp_path)}
            values_dir = os.path.join(os.path.dirname(part_dir), f"{side}-keyWithIndexToValue")
            split = [keys.split(k) for k, _ in _join_side_entries(values_dir, tmp_path)]
            assert all(s is not None and s[0] in counts and 0 <= s[1] < counts[s[0]] for s in split), part_dir
            assert len(split) == sum(counts.values())
            rows_checked += len(split)
    assert rows_checked == sum(len(left_rows) + len(right_rows) for left_rows, right_rows in batches)


@pytest.mark.slow  # a pause longer than the ttl and 20 query runs per backend: about three minutes
def test_a_batch_re_executed_after_a_crash_expires_the_same_keys(spark, variant, tmp_path):
    """Every operator of the scenario test, and a join. The driver dies after the stores committed batch 2
    and before Spark's commit log recorded it (done here by deleting `commits/2`); the restart runs batch 2 again,
    long after the ttl has passed on the wall clock, and must emit what the first attempt emitted: the
    batch's time is the one version 2 records. On the wall clock a and b would have expired."""
    ttl_s, pause_s = 20, 30
    kinds = tuple(RULES) + ("join",)
    sources = {kind: InputDir(spark, str(tmp_path / kind / "in"), SCHEMA) for kind in kinds}
    sinks = {kind: BatchCollector() for kind in kinds}
    _start_python_workers(spark)

    def run(kind: str) -> None:
        with session_conf(spark, {PREFIX + "ttl": f"{ttl_s}s",
                                  "spark.sql.streaming.noDataMicroBatches.enabled": "false"}):
            run_available_now(sinks[kind].attach(_query(sources[kind], kind)), str(tmp_path / kind / "ckpt"))

    first = {}
    for kind in kinds:
        for keys in (["a", "b"], ["b"], ["a", "c"]):
            sources[kind].add([{"k": k, "v": 0} for k in keys])
            run(kind)
        first[kind] = _as_reference_rows(kind, sinks[kind].batches[2])
        checkpoint = str(tmp_path / kind / "ckpt")
        os.remove(os.path.join(checkpoint, "commits", "2"))
        crc = os.path.join(checkpoint, "commits", ".2.crc")
        if os.path.exists(crc):
            os.remove(crc)
        del sinks[kind].batches[2]
    assert first["count"] == first["pandas"] == [("a", 2), ("c", 1)], first
    assert first["dedup"] == first["dedupww"] == [("c",)], first
    assert first["session"] == [("a", 2), ("b", 2), ("c", 1)], first
    assert first["join"] == [("a", 0, 0)] * 3 + [("c", 0, 0)], first  # a: its row of batch 0 on each side, and itself
    time.sleep(pause_s)
    for kind in kinds:
        run(kind)
        assert _as_reference_rows(kind, sinks[kind].batches[2]) == first[kind], kind
