"""Idle-state expiry in real queries: an aggregation and a dropDuplicates with a ttl give, batch after batch,
what a reference computes in Python with the same rule from the batch times the checkpoint records. Every
batch is its own run of the query (a stop and a restart from the checkpoint).

The rule: batch b runs at time T(b), the clock of the version it loads (`Manifest.clock_ms`; batch 0: the
`batchTimeMs` version 1 records). A key last written by a batch that ran at time t is expired in batch b
when T(b) - t > ttl. Each store (partition) has its own times; the durations here leave tens of seconds
between "idle" and "expired", and the reference is computed with the earliest and the latest time of every
batch to check that no key's fate depends on which partition it lives in.
"""
from __future__ import annotations

import os
import time

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from conftest import selected_provider
from spark_harness import (PREFIX, AggregationCase, BatchCollector, InputDir, run_available_now,
                           run_available_now_progress, session_conf)

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")

TTL_S = 30
PAUSE_S = 45  # a pause longer than the ttl, with room for slow batches on either side
SCHEMA = StructType([StructField("k", StringType()), StructField("v", LongType())])
# One file per batch; PAUSE_S passes after batch 1. Batch 2 still runs at the time batch 1 committed, so its
# writes are stamped before the pause, and batch 3's after it.
BATCHES = [["a", "b", "c", "d"], ["a", "a"], ["b"], ["c"], ["a", "b", "c", "d", "e"]]
PAUSE_AFTER = 1
# What the rule gives when batches take seconds: batch 3 runs after the pause, where a, b, c and d have
# been idle for longer than the ttl (c is read there and starts again; a, b and d are deleted unread, the
# metric's 3); in batch 4 only c, written by batch 3, is still alive.
SCENARIO = {"count": [[("a", 1), ("b", 1), ("c", 1), ("d", 1)], [("a", 3)], [("b", 2)], [("c", 1)],
                      [("a", 1), ("b", 1), ("c", 2), ("d", 1), ("e", 1)]],
            "dedup": [[("a",), ("b",), ("c",), ("d",)], [], [], [("c",)], [("a",), ("b",), ("d",), ("e",)]]}


def _batch_times(checkpoint: str, batches: int) -> list[list[int]]:
    """Per batch, the batch time each partition's store of operator 0 ran it at (from the manifests)."""
    from sparkstate.checkpoint import Manifest

    root = os.path.join(checkpoint, "state", "0")
    times: list[list[int]] = [[] for _ in range(batches)]
    for part in sorted(os.listdir(root), key=lambda n: (not n.isdigit(), n)):
        manifests = os.path.join(root, part, "sparkstate", "manifests")
        if not part.isdigit() or not os.path.isdir(manifests):
            continue

        def manifest(v: int) -> Manifest:
            path = os.path.join(manifests, f"{v}.manifest")
            with open(path, "rb") as f:
                return Manifest.from_bytes(f.read(), path)

        first = manifest(1)
        assert first.ttl_stamps and first.batch_time_ms is not None
        times[0].append(first.batch_time_ms)
        for b in range(1, batches):
            times[b].append(manifest(b).clock_ms)
    return times


def _reference(times: list[int], kind: str) -> tuple[list[list[tuple]], list[int]]:
    """Per batch: what the sink receives (sorted rows) and how many keys expire unwritten (the metric)."""
    ttl = TTL_S * 1000
    state: dict[str, tuple[int, int]] = {}  # key -> (count, batch time of its last write)
    rows, expired = [], []
    for b, keys in enumerate(BATCHES):
        t = times[b]
        alive = {k: s for k, s in state.items() if t - s[1] <= ttl}
        out = []
        for k in sorted(set(keys)):
            if kind == "count":
                alive[k] = (alive.get(k, (0, 0))[0] + keys.count(k), t)
                out.append((k, alive[k][0]))
            elif k not in alive:  # dropDuplicates writes a key only when it emits it
                alive[k] = (1, t)
                out.append((k,))
        expired.append(len([k for k in state if k not in alive]))
        state = alive
        rows.append(out)
    return rows, expired


def _query(spark, source: InputDir, kind: str):
    stream = source.stream()
    if kind == "count":
        return stream.groupBy("k").count().writeStream.outputMode("update")
    return stream.select("k").dropDuplicates(["k"]).writeStream.outputMode("append")


@pytest.mark.slow  # a pause of PAUSE_S and ten query runs per backend: about five minutes
def test_expiry_matches_the_rule_over_recorded_batch_times(spark, variant, tmp_path):
    kinds = ("count", "dedup")
    sources = {kind: InputDir(spark, str(tmp_path / kind / "in"), SCHEMA) for kind in kinds}
    sinks = {kind: BatchCollector() for kind in kinds}
    progress: dict[str, list] = {kind: [] for kind in kinds}
    with session_conf(spark, {PREFIX + "ttl": f"{TTL_S}s"}):
        for b, keys in enumerate(BATCHES):
            for kind in kinds:  # each batch a run of its own: a stop and a restart from the checkpoint
                sources[kind].add([{"k": k, "v": i} for i, k in enumerate(keys)])
                runs = run_available_now_progress(sinks[kind].attach(_query(spark, sources[kind], kind)),
                                                  str(tmp_path / kind / "ckpt"))
                assert [p["batchId"] for p in runs] == [b]
                progress[kind] += runs
            if b == PAUSE_AFTER:
                time.sleep(PAUSE_S)
    for kind in kinds:
        times = _batch_times(str(tmp_path / kind / "ckpt"), len(BATCHES))
        early, expired = _reference([min(t) for t in times], kind)
        late, _ = _reference([max(t) for t in times], kind)
        assert early == late, "a key's fate depends on its partition's clock: the durations are too tight"
        got = [sorted(tuple(r) for r in sinks[kind].batches[b]) for b in range(len(BATCHES))]
        assert got == early, kind
        metric = [sum(op["customMetrics"]["sparkstateTtlExpiredKeys"] for op in p["stateOperators"])
                  for p in progress[kind]]
        assert metric == expired, kind
        assert got == SCENARIO[kind], f"{kind}: batches ran too slowly for the durations of this test"


def test_a_bad_duration_fails_the_query_naming_the_key(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=44, n_files=1)
    case.source.add_all(case.files)
    message = case.failure_of_run({PREFIX + "ttl.operator.0": "3 weeks"})
    assert f"invalid value '3 weeks' for '{PREFIX}ttl.operator.0'" in message and "duration" in message


def test_a_join_with_a_ttl_is_refused_naming_the_operator_and_runs_with_none(spark, tmp_path):
    left, right = (InputDir(spark, str(tmp_path / side), SCHEMA) for side in ("left", "right"))
    left.add([{"k": "a", "v": 1}, {"k": "b", "v": 2}])
    right.add([{"k": "a", "v": 10}])
    sink = BatchCollector()

    def run(conf):
        joined = left.stream().join(right.stream().withColumnRenamed("v", "w"), "k")
        with session_conf(spark, conf):
            run_available_now(sink.attach(joined.writeStream.outputMode("append")), str(tmp_path / "ckpt"))

    with pytest.raises(Exception) as refused:
        run({PREFIX + "ttl": "1h"})
    assert "operator 0 is a stream-stream join" in str(refused.value)
    assert f"{PREFIX}ttl.operator.0=none" in str(refused.value)
    run({PREFIX + "ttl": "1h", PREFIX + "ttl.operator.0": "none"})
    assert [tuple(r) for b in sink.batch_ids() for r in sink.batches[b]] == [("a", 1, 10)]


@pytest.mark.slow  # a pause longer than the ttl per backend: about two minutes
def test_a_batch_re_executed_after_a_crash_expires_the_same_keys(spark, variant, tmp_path):
    """The driver dies after the stores committed batch 2 and before Spark's commit log recorded it (done
    here by deleting `commits/2`); the restart runs batch 2 again, long after the ttl has passed on the
    wall clock, and must keep what the first attempt kept: the batch's time is the one version 2 records."""
    ttl_s, pause_s = 20, 30
    source = InputDir(spark, str(tmp_path / "in"), SCHEMA)
    checkpoint = str(tmp_path / "ckpt")
    sink = BatchCollector()

    def run():
        query = source.stream().groupBy("k").count().writeStream.outputMode("update")
        with session_conf(spark, {PREFIX + "ttl": f"{ttl_s}s"}):
            run_available_now(sink.attach(query), checkpoint)

    for keys in (["a", "b"], ["b"], ["a", "c"]):
        source.add([{"k": k, "v": 0} for k in keys])
        run()
    first = sorted(tuple(r) for r in sink.batches[2])
    assert first == [("a", 2), ("c", 1)]
    os.remove(os.path.join(checkpoint, "commits", "2"))
    crc = os.path.join(checkpoint, "commits", ".2.crc")
    if os.path.exists(crc):
        os.remove(crc)
    time.sleep(pause_s)
    del sink.batches[2]
    run()
    assert sorted(tuple(r) for r in sink.batches[2]) == first
