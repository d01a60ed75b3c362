"""Benchmark: several stateful streaming workloads, each through several state store providers, in one run.

    python python/bench/workloads.py --quick            # every workload x every provider, small sizes
    python python/bench/workloads.py                    # default sizes, meant to stay under ~30 min on 2 cores
    python python/bench/workloads.py --workloads agg-uniform,join-inner --providers sparkstate-heap,hdfs
    python python/bench/workloads.py --out results.json --chart ratios.png     # --chart '' for no chart

Workloads (`--workloads`, comma-separated; default all). Every query writes to the `noop` sink, so what is
measured is the stateful operator and its state store plus Spark's fixed per-batch work.

    agg-uniform             groupBy(key).agg(count, sum), update mode; keys uniform over --keys. State grows.
    agg-zipf                the same, keys Zipf-distributed (exponent 1.1, bounded to --keys; key 0 hottest).
    dedup                   withWatermark(ts).dropDuplicates([key, ts]), append; 40% of the rows repeat an
                            event of this batch or the previous one. Evicted once the watermark passes ts.
    dedup-within-watermark  dropDuplicatesWithinWatermark([key]) on the same input; evicted at ts + delay.
    join-inner              stream-stream inner join on key, right ts in [left ts, left ts + 5 s], watermarks
                            on both sides; 60% of left rows have a partner (some in the next batch).
    join-left-outer         the same, left outer: unmatched left rows are emitted when evicted.
    session-window          groupBy(session_window(ts, 5 s), key).agg(count, sum), append; bursts of 8 events
                            per key, so sessions close once the watermark passes them.
    pandas-state            applyInPandasWithState running totals per key with an event-time timeout 10 s
                            after a key's last event; each key is active in two batches, then times out.
    small-batches           agg-uniform with --small-rows-per-batch (1k) rows and --small-batches batches.

Event time advances 10 s per micro-batch and every watermark delay is 10 s, so no row is late and each
batch evicts what earlier ones made old. Input is pre-generated parquet, one file per micro-batch
(maxFilesPerTrigger=1; joins read one file per side per batch), written once per invocation and shared
by every provider; the uniform datasets come from aggregation.py's generator.

Providers (`--providers`; default all):

    sparkstate-rocksdb      ours, backend=rocksdb
    sparkstate-heap         ours, backend=heap
    hdfs                    Spark's HDFSBackedStateStoreProvider
    rocksdb                 Spark's RocksDBStateStoreProvider
    rocksdb-changelog       the same with changelog checkpointing

Each provider runs in its own fresh Python process and JVM (this file with `--run-one`), one after the
other. That process runs the workloads in the order given, each as a new query with its own checkpoint:
one JVM start per provider, not per workload, which would be most of a --quick run; every provider gets
the same order, so the same warm-up.

Columns, per workload and provider. Batch 0 (JIT warm-up, code generation, store creation) and batches
without input rows are left out of the first four:

    rows/s          input rows (both sides for joins) / the sum of their durationMs.triggerExecution
    batch p50, p99  durationMs.triggerExecution, nearest rank (the p99 of a few batches is their maximum)
    commit p50      median commitTimeMs, summed over the stateful operators (Spark sums it over the
                    partitions); '-' when a provider reports none
    ckpt/batch      growth of <checkpoint>/state on disk (apparent size, .crc files included) from the end of
                    batch 0 to the end of the query, / the batches after batch 0 (watermark workloads end with
                    a batch without input, which still commits); minBatchesToRetain is raised above the
                    batch count so nothing is deleted meanwhile
    settled         with --settle: the same growth, measured once the state directory has not changed for
                    two state store maintenance intervals after the query ended (at most five). A provider
                    may write an image of the state after the last batch, for versions of the run: Spark's
                    RocksDB provider uploads in maintenance the snapshot a commit created. ckpt/batch leaves
                    those out, settled counts them
    state memory    memoryUsedBytes summed over the stateful operators, last batch with input; each provider
                    measures its own way (HDFS its JVM maps, RocksDB native memory, ours what the workers report)
    state rows      numRowsTotal summed over the stateful operators, last batch with input: the input and the
                    watermarks are the same, so a WARNING says when providers disagree (as when the rows read
                    differ from the rows generated)

Then, per workload, sparkstate-rocksdb / rocksdb-changelog and sparkstate-heap / hdfs of throughput (> 1:
ours faster), p99 batch time and state memory (< 1: ours lower). Results go to `--out` as JSON, the
throughput ratios to a bar chart, `--chart` (needs matplotlib: `pip install .[bench]`). The exit status is 1
when a run failed or a WARNING was printed.

A ratio moves between invocations on this kind of machine, so quote several: `--median-of a.json,b.json,...`
runs nothing and prints each ratio's median over those invocations' results, with each one's in brackets,
and charts the medians.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator

if not __package__:  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # python/
    from _checkout import ensure_sparkstate_jobs

    ensure_sparkstate_jobs()

from sparkstate_jobs.bench import latency_probe  # noqa: E402
from sparkstate_jobs.bench.aggregation import (  # noqa: E402
    ProbeDuringRun,
    dir_size,
    fmt_bytes,
    fmt_ms,
    fmt_rate,
    generate_input,
    run_header,
    summarize_batches,
    tail,
)
from sparkstate_jobs.progress import BatchStats, median  # noqa: E402
from sparkstate_jobs.session import ProviderUnavailable, new_session, parse_conf_pairs  # noqa: E402

# name -> (session.py provider, sparkstate backend)
PROVIDERS: dict[str, tuple[str, str | None]] = {
    "sparkstate-rocksdb": ("sparkstate", "rocksdb"),
    "sparkstate-heap": ("sparkstate", "heap"),
    "hdfs": ("hdfs", None),
    "rocksdb": ("rocksdb", None),
    "rocksdb-changelog": ("rocksdb-changelog", None),
}
# (ours, theirs): each backend against the Spark provider it is closest to
RATIO_PAIRS = (("sparkstate-rocksdb", "rocksdb-changelog"), ("sparkstate-heap", "hdfs"))
RATIO_METRICS = (("rows_per_s", "throughput"), ("p99_batch_ms", "p99 batch"), ("state_memory_bytes", "state memory"))

DEFAULTS = {"batches": 10, "rows_per_batch": 20_000, "keys": 1_000_000, "pandas_rows_per_batch": 4_000,
            "small_batches": 60, "small_rows_per_batch": 1_000}
QUICK = {"batches": 4, "rows_per_batch": 5_000, "keys": 100_000, "pandas_rows_per_batch": 1_000,
         "small_batches": 20, "small_rows_per_batch": 1_000}
SIZE_HELP = {"batches": "micro-batches per workload except small-batches",
             "rows_per_batch": "input rows per batch (joins: both sides together)",
             "keys": "key space of the aggregations and session windows",
             "pandas_rows_per_batch": "rows per batch of pandas-state (a Python call per key and batch)",
             "small_batches": "micro-batches of small-batches",
             "small_rows_per_batch": "rows per batch of small-batches"}

SEED = 20250311
BASE_US = 1_700_000_000 * 1_000_000   # where batch 0's event time starts (µs)
SPAN_S = 10                           # event time per micro-batch
DELAY = "10 seconds"                  # every watermark; = SPAN_S, so no row is ever late
ZIPF_EXPONENT = 1.1
JOIN_RANGE_S = 5                      # a right row matches a left row with the same key up to 5 s after it
JOIN_MATCHED = 0.6                    # share of left rows with a right partner
SESSION_GAP_S = 5
SESSION_EVENTS = 8                    # events per session, within 3 s: one session per burst
TIMEOUT_S = 10                        # pandas-state: a key's state expires 10 s of event time after its last event
DUPLICATES = 0.4                      # dedup: share of rows repeating an event (half of them the previous batch's)

DONE_MARK = "@@workload-done "       # child -> parent: a workload's result file is written

KEY_VALUE = "key LONG, value LONG"
EVENTS = "key LONG, value LONG, ts TIMESTAMP"


# ---------------------------------------------------------------------------------------------- input

@dataclass(frozen=True)
class Sizes:
    batches: int
    rows: int
    keys: int


def _times(rng: Any, batch: int, n: int) -> Any:
    """n event times (µs, millisecond steps) inside batch `batch`'s span of event time."""
    return BASE_US + batch * SPAN_S * 1_000_000 + rng.integers(0, SPAN_S * 1000, n) * 1000


def _table(keys: Any, values: Any, ts_us: Any = None) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    columns = {"key": pa.array(keys, pa.int64()), "value": pa.array(values, pa.int64())}
    if ts_us is not None:  # UTC-adjusted, so Spark reads it as TIMESTAMP (not TIMESTAMP_NTZ)
        columns["ts"] = pa.array(ts_us, pa.timestamp("us", tz="UTC"))
    return pa.table(columns)


def _zipf_batches(s: Sizes, rng: Any) -> Iterator[dict[str, Any]]:
    import numpy as np  # noqa: PLC0415

    cdf = np.cumsum(1.0 / np.arange(1, s.keys + 1, dtype=np.float64) ** ZIPF_EXPONENT)
    cdf /= cdf[-1]
    for _ in range(s.batches):
        keys = np.minimum(np.searchsorted(cdf, rng.random(s.rows)), s.keys - 1)  # rank - 1: key 0 is the hottest
        yield {"events": _table(keys, rng.integers(0, 1000, s.rows))}


def _dedup_batches(s: Sizes, rng: Any) -> Iterator[dict[str, Any]]:
    """New events (unique key, ts in this batch) plus copies of this batch's and the previous batch's events."""
    import numpy as np  # noqa: PLC0415

    prev_keys = prev_ts = None
    next_key = 0
    for b in range(s.batches):
        n_new = max(1, round(s.rows * (1 - DUPLICATES)))
        keys = np.arange(next_key, next_key + n_new, dtype=np.int64)
        next_key += n_new
        ts = _times(rng, b, n_new)
        n_copies = s.rows - n_new
        n_prev = n_copies // 2 if prev_keys is not None else 0
        same = rng.integers(0, n_new, n_copies - n_prev)
        parts_k, parts_t = [keys, keys[same]], [ts, ts[same]]
        if n_prev:
            prev = rng.integers(0, len(prev_keys), n_prev)
            parts_k.append(prev_keys[prev])
            parts_t.append(prev_ts[prev])
        k, t = np.concatenate(parts_k), np.concatenate(parts_t)
        order = rng.permutation(len(k))
        yield {"events": _table(k[order], rng.integers(0, 1000, len(k)), t[order])}
        prev_keys, prev_ts = keys, ts


def _join_batches(s: Sizes, rng: Any) -> Iterator[dict[str, Any]]:
    """Left: unique keys. Right: partners up to JOIN_RANGE_S later (possibly in the next batch) and strays."""
    import numpy as np  # noqa: PLC0415

    n_left = max(1, s.rows // 2)
    n_stray = max(1, n_left - round(n_left * JOIN_MATCHED))
    carried_k = carried_t = np.empty(0, dtype=np.int64)
    for b in range(s.batches):
        lkeys = np.arange(b * n_left, (b + 1) * n_left, dtype=np.int64)
        lts = _times(rng, b, n_left)
        matched = rng.random(n_left) < JOIN_MATCHED
        rts = lts[matched] + rng.integers(0, JOIN_RANGE_S * 1000, int(matched.sum())) * 1000
        rkeys = lkeys[matched]
        next_batch = rts >= BASE_US + (b + 1) * SPAN_S * 1_000_000
        stray_k = -1 - np.arange(b * n_stray, (b + 1) * n_stray, dtype=np.int64)  # no left row has them
        rk = np.concatenate([carried_k, rkeys[~next_batch], stray_k])
        rt = np.concatenate([carried_t, rts[~next_batch], _times(rng, b, n_stray)])
        carried_k, carried_t = rkeys[next_batch], rts[next_batch]   # after the last batch: never delivered
        order = rng.permutation(len(rk))
        yield {"left": _table(lkeys, rng.integers(0, 1000, n_left), lts),
               "right": _table(rk[order], rng.integers(0, 1000, len(rk)), rt[order])}


def _session_batches(s: Sizes, rng: Any) -> Iterator[dict[str, Any]]:
    """Bursts of SESSION_EVENTS events within 3 s for random keys; a burst starts at least 3 s before the span ends."""
    import numpy as np  # noqa: PLC0415

    n_sessions = max(1, s.rows // SESSION_EVENTS)
    for b in range(s.batches):
        keys = rng.integers(0, s.keys, n_sessions)
        start = BASE_US + b * SPAN_S * 1_000_000 + rng.integers(0, (SPAN_S - 3) * 1000, n_sessions) * 1000
        k = np.repeat(keys, SESSION_EVENTS)
        t = np.repeat(start, SESSION_EVENTS) + rng.integers(0, 3000, len(k)) * 1000
        yield {"events": _table(k, rng.integers(0, 1000, len(k)), t)}


def _pandas_batches(s: Sizes, rng: Any) -> Iterator[dict[str, Any]]:
    """Keys from a window that slides by half its width per batch: each key is active in two batches, then times out."""
    groups = max(1, s.rows // 10)   # ~10 rows per key and batch
    for b in range(s.batches):
        keys = b * groups + rng.integers(0, 2 * groups, s.rows)
        yield {"events": _table(keys, rng.integers(0, 1000, s.rows), _times(rng, b, s.rows))}


# dataset -> its batches; "uniform" and "small" come from aggregation.generate_input instead
GENERATORS: dict[str, Callable[[Sizes, Any], Iterator[dict[str, Any]]]] = {
    "zipf": _zipf_batches, "dedup": _dedup_batches, "join": _join_batches,
    "sessions": _session_batches, "pandas": _pandas_batches,
}


def dataset_sizes(dataset: str, args: argparse.Namespace) -> Sizes:
    if dataset == "small":
        return Sizes(args.small_batches, args.small_rows_per_batch, args.keys)
    if dataset == "pandas":
        return Sizes(args.batches, args.pandas_rows_per_batch, args.keys)
    return Sizes(args.batches, args.rows_per_batch, args.keys)


def order_files(source_dir: str) -> None:
    """mtimes 1 s apart in name order: Spark's file source takes the oldest file first."""
    names = sorted(n for n in os.listdir(source_dir) if n.endswith(".parquet"))
    now = time.time()
    for i, name in enumerate(names):
        stamp = now - len(names) + i
        os.utime(os.path.join(source_dir, name), (stamp, stamp))


def prepare_dataset(root: str, dataset: str, sizes: Sizes) -> dict[str, Any]:
    """Write `dataset` under root/<dataset>/<source>/ (reused when its manifest matches); its row counts."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    data_dir = os.path.join(root, dataset)
    if dataset in ("uniform", "small"):
        generate_input(os.path.join(data_dir, "events"), sizes.batches, sizes.rows, sizes.keys)
        order_files(os.path.join(data_dir, "events"))
        return {"sources": ["events"], "batches": sizes.batches, "rows": sizes.batches * sizes.rows}
    manifest_path = os.path.join(data_dir, "_manifest.json")
    wanted = {"dataset": dataset, "batches": sizes.batches, "rows_per_batch": sizes.rows, "keys": sizes.keys,
              "seed": SEED}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            manifest = json.load(fh)
        if manifest["wanted"] == wanted:
            return manifest["written"]
    shutil.rmtree(data_dir, ignore_errors=True)
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng([SEED, sorted(GENERATORS).index(dataset)])
    rows = 0
    sources: list[str] = []
    for b, tables in enumerate(GENERATORS[dataset](sizes, rng)):
        for source, table in tables.items():
            os.makedirs(os.path.join(data_dir, source), exist_ok=True)
            pq.write_table(table, os.path.join(data_dir, source, f"batch-{b:05d}.parquet"))
            rows += table.num_rows
            if source not in sources:
                sources.append(source)
    for source in sources:
        order_files(os.path.join(data_dir, source))
    written = {"sources": sources, "batches": sizes.batches, "rows": rows}
    with open(manifest_path, "w", encoding="utf-8") as fh:
        json.dump({"wanted": wanted, "written": written}, fh)
    return written


# -------------------------------------------------------------------------------------------- queries

def _stream(spark: Any, path: str, schema: str = EVENTS) -> Any:
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)


def _aggregate(spark: Any, src: dict[str, str]) -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415

    agg = _stream(spark, src["events"], KEY_VALUE).groupBy("key").agg(
        F.count("*").alias("n"), F.sum("value").alias("total"))
    return agg.writeStream.format("noop").outputMode("update")


def _dedup(spark: Any, src: dict[str, str]) -> Any:
    return (_stream(spark, src["events"]).withWatermark("ts", DELAY).dropDuplicates(["key", "ts"])
            .writeStream.format("noop").outputMode("append"))


def _dedup_within_watermark(spark: Any, src: dict[str, str]) -> Any:
    return (_stream(spark, src["events"]).withWatermark("ts", DELAY).dropDuplicatesWithinWatermark(["key"])
            .writeStream.format("noop").outputMode("append"))


def _join(how: str) -> Callable[[Any, dict[str, str]], Any]:
    def build(spark: Any, src: dict[str, str]) -> Any:
        from pyspark.sql import functions as F  # noqa: PLC0415

        left = _stream(spark, src["left"]).select(
            F.col("key").alias("lkey"), F.col("value").alias("lvalue"), F.col("ts").alias("lts")
        ).withWatermark("lts", DELAY)
        right = _stream(spark, src["right"]).select(
            F.col("key").alias("rkey"), F.col("value").alias("rvalue"), F.col("ts").alias("rts")
        ).withWatermark("rts", DELAY)
        cond = (F.col("lkey") == F.col("rkey")) & F.expr(
            f"rts BETWEEN lts AND lts + INTERVAL {JOIN_RANGE_S} SECONDS")
        return left.join(right, cond, how).writeStream.format("noop").outputMode("append")

    return build


def _session_window(spark: Any, src: dict[str, str]) -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415

    return (_stream(spark, src["events"]).withWatermark("ts", DELAY)
            .groupBy(F.session_window("ts", f"{SESSION_GAP_S} seconds"), "key")
            .agg(F.count("*").alias("n"), F.sum("value").alias("total"))
            .writeStream.format("noop").outputMode("append"))


def _running_totals_fn() -> Callable[..., Any]:
    """Built inside a function so cloudpickle ships it by value to the Python workers."""
    timeout_ms = TIMEOUT_S * 1000

    def running_totals(key: tuple, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd  # noqa: PLC0415

        if state.hasTimedOut:
            n, total, _last = state.get
            state.remove()
            yield pd.DataFrame({"key": [key[0]], "n": [n], "total": [total], "expired": [True]})
            return
        n, total, last = state.get if state.exists else (0, 0, 0)
        for pdf in pdfs:
            n += len(pdf)
            total += int(pdf["value"].sum())
            last = max(last, int(pdf["t_ms"].max()))
        state.update((n, total, last))
        state.setTimeoutTimestamp(last + timeout_ms)
        yield pd.DataFrame({"key": [key[0]], "n": [n], "total": [total], "expired": [False]})

    return running_totals


def _pandas_state(spark: Any, src: dict[str, str]) -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.streaming.state import GroupStateTimeout  # noqa: PLC0415

    return (_stream(spark, src["events"]).withWatermark("ts", DELAY).withColumn("t_ms", F.unix_millis("ts"))
            .groupBy("key")
            .applyInPandasWithState(_running_totals_fn(), "key long, n long, total long, expired boolean",
                                    "n long, total long, last long", "update", GroupStateTimeout.EventTimeTimeout)
            .writeStream.format("noop").outputMode("update"))


@dataclass(frozen=True)
class Workload:
    name: str
    about: str
    dataset: str
    query: Callable[[Any, dict[str, str]], Any]   # (spark, source dirs) -> DataStreamWriter


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("agg-uniform", "groupBy(key).agg(count, sum), update; uniform keys", "uniform", _aggregate),
    Workload("agg-zipf", f"groupBy(key).agg(count, sum), update; Zipf({ZIPF_EXPONENT}) keys", "zipf", _aggregate),
    Workload("dedup", "dropDuplicates([key, ts]) with watermark", "dedup", _dedup),
    Workload("dedup-within-watermark", "dropDuplicatesWithinWatermark([key])", "dedup", _dedup_within_watermark),
    Workload("join-inner", f"stream-stream inner join, rts in [lts, lts + {JOIN_RANGE_S} s]", "join", _join("inner")),
    Workload("join-left-outer", f"stream-stream left outer join, rts in [lts, lts + {JOIN_RANGE_S} s]", "join",
             _join("left_outer")),
    Workload("session-window", f"session_window({SESSION_GAP_S} s) count, sum; append", "sessions", _session_window),
    Workload("pandas-state", f"applyInPandasWithState, event-time timeout {TIMEOUT_S} s", "pandas", _pandas_state),
    Workload("small-batches", "agg-uniform with small batches", "small", _aggregate),
)}


# ----------------------------------------------------------------------------- one run (child)

def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): an observed value, so p99 of 20 batches is their maximum."""
    if not values:
        return None
    s = sorted(values)
    return float(s[max(0, math.ceil(q / 100 * len(s)) - 1)])


def watch(query: Any, state_dir: str, poll_s: float = 0.05) -> list[tuple[int, int]]:
    """(batch id, bytes under state_dir) each time a new batch's progress appears, until the query ends."""
    samples: list[tuple[int, int]] = []
    while query.isActive:
        progress = query.lastProgress
        if progress is not None and (not samples or progress.batchId != samples[-1][0]):
            samples.append((progress.batchId, dir_size(state_dir)[0]))
        time.sleep(poll_s)
    query.awaitTermination()   # raises the query's error, if it failed
    return samples


def checkpoint_growth(samples: list[tuple[int, int]], last_batch: int, final_bytes: int) -> float | None:
    """Bytes per batch added to the state directory after the first sampled batch (batch 0 unless missed)."""
    if not samples or last_batch <= samples[0][0]:
        return None
    first_batch, first_bytes = samples[0]
    return (final_bytes - first_bytes) / (last_batch - first_batch)


def settled_size(path: str, quiet_s: float, limit_s: float, poll_s: float = 0.5) -> int:
    """Bytes under `path` once they have not changed for `quiet_s` (or after `limit_s`, whichever is first)."""
    start = changed = time.monotonic()
    last = dir_size(path)
    while time.monotonic() - changed < quiet_s and time.monotonic() - start < limit_s:
        time.sleep(poll_s)
        now = dir_size(path)
        if now != last:
            last, changed = now, time.monotonic()
    return last[0]


def maintenance_interval_s(spark: Any) -> float:
    """The session's state store maintenance interval, in seconds (Spark's default 60 s; a bare number is ms)."""
    value = spark.conf.get("spark.sql.streaming.stateStore.maintenanceInterval", "60s").strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("min", 60.0), ("m", 60.0), ("h", 3600.0)):
        if value.endswith(suffix):
            return float(value[:-len(suffix)]) * scale
    return float(value) / 1000


def run_workload(spark: Any, workload: Workload, data_root: str, checkpoint: str, settle: bool = False) -> dict:
    """Drain one workload's input through a fresh query on `spark`; the measurements."""
    state_dir = os.path.join(checkpoint, "state")
    sources = {s: os.path.join(data_root, workload.dataset, s) for s in ("events", "left", "right")}
    started = time.monotonic()
    query = (workload.query(spark, sources).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    samples = watch(query, state_dir)
    wall = time.monotonic() - started
    final_bytes, final_files = dir_size(state_dir)
    batches = [BatchStats.from_progress(p) for p in query.recentProgress]
    result = summarize_batches(batches, wall, final_bytes, final_files,
                               spark.conf.get("spark.sql.streaming.stateStore.providerClass"))
    durations = [b.duration_ms for b in batches if b.input_rows > 0][1:]
    result.update(
        p50_batch_ms=percentile(durations, 50), p99_batch_ms=percentile(durations, 99),
        median_commit_ms=result["median_commit_ms"] or None,   # 0: the provider does not report it
        ckpt_bytes_per_batch=checkpoint_growth(samples, batches[-1].batch_id if batches else 0, final_bytes),
        all_batches=len(batches), state_bytes_samples=samples,
        rows_dropped_by_watermark=sum(op.rows_dropped_by_watermark for b in batches for op in b.operators),
    )
    if settle:
        interval = maintenance_interval_s(spark)
        settled = settled_size(state_dir, 2 * interval, 5 * interval)
        result["ckpt_bytes_per_batch_settled"] = checkpoint_growth(samples, batches[-1].batch_id if batches else 0,
                                                                   settled)
    return result


def run_one(args: argparse.Namespace) -> int:
    """Child: every selected workload in turn, with provider `args.run_one`, in one session.

    One JVM per provider, not per run: a JVM and its workers take ~10-15 s to start here, which would be most
    of a --quick run. Every provider runs the workloads in the same order, so each gets the same warm-up.
    A result file per workload is written as soon as it is done, so a crash loses only the rest.
    """
    provider, backend = PROVIDERS[args.run_one]
    conf = {"spark.sql.session.timeZone": "UTC",
            "spark.sql.streaming.numRecentProgressUpdates": str(args.expect_batches + 20),
            # nothing deleted during a run: the state directory's growth is what the commits wrote
            "spark.sql.streaming.minBatchesToRetain": str(max(100, args.expect_batches + 20)),
            **parse_conf_pairs(args.conf)}
    try:
        spark = new_session(f"bench-workloads-{args.run_one}", provider, master=args.master,
                            shuffle_partitions=args.shuffle_partitions, backend=backend, conf=conf,
                            driver_memory=args.driver_memory)
    except ProviderUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        for name in args.workload_list:
            try:
                result = {**run_workload(spark, WORKLOADS[name], args.data, os.path.join(args.checkpoint, name),
                                         args.settle), "status": "ok"}
            except Exception as exc:  # noqa: BLE001 - recorded as this run's failure; the next workload still runs
                traceback.print_exc()
                result = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).strip()[:2000]}"}
            with open(os.path.join(args.result, f"{name}.json"), "w", encoding="utf-8") as fh:
                json.dump(result, fh)
            print(f"{DONE_MARK}{name}", flush=True)
            if not args.keep:
                shutil.rmtree(os.path.join(args.checkpoint, name), ignore_errors=True)
    finally:
        spark.stop()
    return 0


# --------------------------------------------------------------------------------- harness (parent)

def run_child(provider: str, args: argparse.Namespace, expect_batches: int) -> dict[str, dict]:
    """Run the selected workloads with one provider in a fresh process; workload -> its measurements."""
    ckpt = os.path.join(args.workdir, "checkpoints", provider)
    result_dir = os.path.join(args.workdir, "results", provider)
    log_path = os.path.join(args.workdir, f"log-{provider}.txt")
    for path in (ckpt, result_dir):
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(result_dir)
    cmd = [sys.executable, os.path.abspath(__file__), "--run-one", provider,
           "--workloads", ",".join(args.workload_list), "--data", os.path.join(args.workdir, "input"),
           "--checkpoint", ckpt, "--result", result_dir, "--expect-batches", str(expect_batches),
           "--master", args.master, "--shuffle-partitions", str(args.shuffle_partitions),
           "--driver-memory", args.driver_memory] + (["--keep"] if args.keep else []) + \
        (["--settle"] if args.settle else [])
    for pair in args.conf or []:
        cmd += ["--conf", pair]
    print(f"[{provider}] starting; log: {log_path}", flush=True)
    before = latency_probe.probe(rounds=500)
    results: dict[str, dict] = {}
    # Own session (process group): on timeout the child's JVM and workers go with it.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    timed_out = threading.Event()
    timer = threading.Timer(args.timeout * len(args.workload_list), _kill_group, (proc.pid, timed_out))
    timer.start()
    with open(log_path, "w", encoding="utf-8") as log, ProbeDuringRun() as during:
        for line in proc.stdout:
            log.write(line)
            if line.startswith(DONE_MARK):
                log.flush()
                name = line[len(DONE_MARK):].strip()
                with open(os.path.join(result_dir, f"{name}.json"), encoding="utf-8") as fh:
                    results[name] = {"provider": provider, **json.load(fh)}
                print(f"  {name:<24} {describe(results[name])}", flush=True)
    rc = proc.wait()
    timer.cancel()
    latency = {"latency_mode_before": before.mode, "latency_before_us": before.p50_us,
               "latency_during_us": median(during.samples) if during.samples else None}
    missing = [n for n in args.workload_list if n not in results]
    if missing:
        why = "timeout" if timed_out.is_set() else f"exit {rc}"
        error = tail(log_path, 15)
        print(f"  FAILED ({why}) before {', '.join(missing)}; last lines of {log_path}:\n    "
              + "\n    ".join(error.splitlines()), flush=True)
        for name in missing:
            results[name] = {"provider": provider, "status": f"failed ({why})", "error": error}
    if not args.keep:
        shutil.rmtree(ckpt, ignore_errors=True)
    return {name: {**results[name], **latency} for name in args.workload_list}


def _kill_group(pid: int, fired: threading.Event) -> None:
    """The child's process group (it, its JVM and workers), once its time is up."""
    fired.set()
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # ended meanwhile


def describe(result: dict) -> str:
    if result["status"] != "ok":
        return f"FAILED: {result.get('error', '').splitlines()[0] if result.get('error') else result['status']}"
    return (f"{fmt_rate(result['rows_per_s']):>9} rows/s, batch p50 {fmt_ms(result['p50_batch_ms'])} / "
            f"p99 {fmt_ms(result['p99_batch_ms'])} ms, wall {result['wall_s']} s")


def check_results(workload: str, expected: dict[str, Any], results: list[dict]) -> list[str]:
    """Warnings: input rows or batches not as generated, late rows, providers disagreeing on the state rows."""
    warnings = []
    ok = [r for r in results if r["status"] == "ok"]
    for r in ok:
        if r["rows"] != expected["rows"] or r["batches"] != expected["batches"]:
            warnings.append(f"{workload}/{r['provider']}: read {r['rows']:,} rows in {r['batches']} batches, "
                            f"input has {expected['rows']:,} rows in {expected['batches']} files per source")
        if r.get("rows_dropped_by_watermark"):   # event time only moves forward, by design
            warnings.append(f"{workload}/{r['provider']}: {r['rows_dropped_by_watermark']:,} rows dropped as late")
    state_rows = {r["provider"]: r["state_rows"] for r in ok}
    if len(set(state_rows.values())) > 1:
        warnings.append(f"{workload}: providers disagree on state rows {state_rows} (same input and watermarks, "
                        "so they should not; 0 can also mean a provider does not report numRowsTotal)")
    return warnings


def ratio(ours: dict | None, theirs: dict | None, key: str) -> float | None:
    if not ours or not theirs or ours["status"] != "ok" or theirs["status"] != "ok":
        return None
    a, b = ours.get(key), theirs.get(key)
    return a / b if a and b else None   # 0 / None: not reported


def compute_ratios(results: dict[str, list[dict]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """workload -> "ours/theirs" -> metric -> ratio, for the RATIO_PAIRS that ran."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for workload, rows in results.items():
        by_name = {r["provider"]: r for r in rows}
        out[workload] = {f"{ours}/{theirs}": {key: ratio(by_name.get(ours), by_name.get(theirs), key)
                                              for key, _ in RATIO_METRICS}
                         for ours, theirs in RATIO_PAIRS if ours in by_name and theirs in by_name}
    return out


def workload_table(rows: list[dict]) -> str:
    settled = any("ckpt_bytes_per_batch_settled" in r for r in rows)
    lines = ["| provider | rows/s | batch p50 ms | batch p99 ms | commit p50 ms | ckpt/batch "
             + ("| settled " if settled else "") + "| state memory | state rows | status |",
             "|---|---:|---:|---:|---:|---:|" + ("---:|" if settled else "") + "---:|---:|---|"]
    for r in rows:
        rows_total = r.get("state_rows")
        lines.append(
            f"| {r['provider']} | {fmt_rate(r.get('rows_per_s'))} | {fmt_ms(r.get('p50_batch_ms'))} "
            f"| {fmt_ms(r.get('p99_batch_ms'))} | {fmt_ms(r.get('median_commit_ms'))} "
            f"| {fmt_bytes(r.get('ckpt_bytes_per_batch'))} "
            + (f"| {fmt_bytes(r.get('ckpt_bytes_per_batch_settled'))} " if settled else "")
            + f"| {fmt_bytes(r.get('state_memory_bytes'))} "
            f"| {'-' if rows_total is None else f'{rows_total:,}'} | {r['status']} |")
    return "\n".join(lines)


def ratio_table(ratios: dict[str, dict[str, dict[str, float | None]]], pair: str) -> str:
    """One pair's ratios per workload, for one invocation."""
    return median_table(ratios, None, pair)


def median_ratios(runs: list[dict[str, dict[str, dict[str, float | None]]]]
                  ) -> tuple[dict[str, dict[str, dict[str, float | None]]], dict[str, dict[str, dict[str, list[float]]]]]:
    """The per-cell median of several invocations' ratios, and each cell's values in invocation order.
    A cell an invocation did not report (a failed provider) is left out of its median."""
    medians: dict[str, dict[str, dict[str, float | None]]] = {}
    values: dict[str, dict[str, dict[str, list[float]]]] = {}
    for run in runs:
        for workload, pairs in run.items():
            for pair, metrics in pairs.items():
                for key, v in metrics.items():
                    cell = values.setdefault(workload, {}).setdefault(pair, {}).setdefault(key, [])
                    if v is not None:
                        cell.append(v)
    for workload, pairs in values.items():
        medians[workload] = {pair: {key: statistics.median(vs) if vs else None for key, vs in metrics.items()}
                             for pair, metrics in pairs.items()}
    return medians, values


def median_table(medians: dict[str, dict[str, dict[str, float | None]]],
                 values: dict[str, dict[str, dict[str, list[float]]]] | None, pair: str) -> str:
    """One pair's ratios per workload; with `values` (median_ratios), each is a median in bold followed by
    the invocations' own in brackets."""
    lines = ["| workload | " + " | ".join(label for _, label in RATIO_METRICS) + " |",
             "|---|" + "---:|" * len(RATIO_METRICS)]
    for workload, pairs in medians.items():
        if pair not in pairs:
            continue
        cells = []
        for key, _ in RATIO_METRICS:
            m = pairs[pair][key]
            if m is None:
                cells.append("-")
            elif values is None:
                cells.append(f"{m:.2f}x")
            else:
                cells.append(f"**{m:.2f}x** ({', '.join(f'{v:.2f}' for v in values[workload][pair][key])})")
        lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def print_median_of(paths: list[str], chart: str) -> int:
    """`--median-of`: the median ratios of earlier invocations' JSON results, and their chart."""
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                runs.append(json.load(fh)["ratios"])
        except (OSError, ValueError, KeyError) as exc:
            print(f"cannot read the ratios of {path}: {exc}", file=sys.stderr)
            return 2
    medians, values = median_ratios(runs)
    for ours, theirs in RATIO_PAIRS:
        pair = f"{ours}/{theirs}"
        if any(pair in r for r in medians.values()):
            print(f"\n### {ours} ÷ {theirs}, median of {len(runs)} (each in brackets)\n")
            print(median_table(medians, values, pair))
    if chart and write_chart(chart, medians):
        print(f"chart: {os.path.abspath(chart)}")
    return 0


def write_chart(path: str, ratios: dict[str, dict[str, dict[str, float | None]]]) -> bool:
    """Grouped bars of the throughput ratios per workload; False (and a hint) without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 - optional: pip install .[bench]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("no chart: matplotlib is not installed (`pip install .[bench]`)")
        return False
    workloads = list(ratios)
    pairs = [f"{o}/{t}" for o, t in RATIO_PAIRS if any(f"{o}/{t}" in ratios[w] for w in workloads)]
    if not workloads or not pairs:
        print("no chart: no workload ran both providers of a ratio")
        return False
    width = 0.8 / len(pairs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(workloads) + 2), 4.5))
    for i, pair in enumerate(pairs):
        values = [(ratios[w].get(pair) or {}).get("rows_per_s") for w in workloads]
        xs = [j + (i - (len(pairs) - 1) / 2) * width for j in range(len(workloads))]
        bars = ax.bar(xs, [v if v is not None else 0 for v in values], width, label=pair.replace("/", " ÷ "))
        for bar, v in zip(bars, values):
            ax.annotate("n/a" if v is None else f"{v:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    shown = [v for pair in pairs for w in workloads if (v := (ratios[w].get(pair) or {}).get("rows_per_s"))]
    ax.set_ylim(0, 1.3 * max([1.0, *shown]))   # headroom: the legend stays clear of the bars and the 1.0 line
    ax.set_xticks(range(len(workloads)), workloads, rotation=25, ha="right")
    ax.set_ylabel("throughput ratio (rows/s, > 1: sparkstate faster)")
    ax.set_title("sparkstate vs Spark's state store providers, per workload")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _names(value: str, known: list[str], what: str, p: argparse.ArgumentParser) -> list[str]:
    """Comma-separated names, in the given order without repeats; unknown ones are a usage error."""
    names = list(dict.fromkeys(x.strip() for x in value.split(",") if x.strip()))
    unknown = [x for x in names if x not in known]
    if unknown:
        p.error(f"unknown {what}(s): {', '.join(unknown)}; expected some of: {', '.join(known)}")
    if not names:
        p.error(f"no {what} selected; expected some of: {', '.join(known)}")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench-workloads", description=__doc__.split("\n\n", 1)[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small preset: " + ", ".join(f"{k.replace('_', '-')} {v:,}" for k, v in QUICK.items()))
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help="comma-separated subset of " + ", ".join(WORKLOADS) + " (default: all)")
    p.add_argument("--providers", default=",".join(PROVIDERS),
                   help="comma-separated subset of " + ", ".join(PROVIDERS) + " (default: all)")
    for key, text in SIZE_HELP.items():
        p.add_argument("--" + key.replace("_", "-"), type=int, help=f"{text} (default {DEFAULTS[key]:,})")
    p.add_argument("--shuffle-partitions", type=int, default=4, help="state store partitions (default 4)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="2g")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark conf for every run")
    p.add_argument("--workdir", help="input data, checkpoints and logs (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep each run's checkpoint")
    p.add_argument("--settle", action="store_true",
                   help="also measure ckpt/batch once the state directory settles after each query (see above)")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds per workload and provider before giving up on that provider (default 900)")
    p.add_argument("--out", default="bench-workloads.json", help="JSON results (default: %(default)s)")
    p.add_argument("--chart", default="bench-workloads.png",
                   help="PNG of the throughput ratios (default: %(default)s; '' for none)")
    p.add_argument("--median-of", metavar="JSON,...",
                   help="run nothing: print the median ratios of these earlier --out files (each invocation's in "
                        "brackets) and chart them (--chart)")
    # Internal: one workload with one provider in this process (spawned by the harness).
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--expect-batches", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    preset = QUICK if args.quick else DEFAULTS
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.workload_list = _names(args.workloads, list(WORKLOADS), "workload", p)
    args.provider_list = _names(args.providers, list(PROVIDERS), "provider", p)
    for key, minimum in (("batches", 2), ("small_batches", 2), ("rows_per_batch", 2), ("keys", 1),
                         ("pandas_rows_per_batch", 1), ("small_rows_per_batch", 1), ("shuffle_partitions", 1)):
        if getattr(args, key) < minimum:  # batch 0 is left out of the figures: two batches at least
            p.error(f"--{key.replace('_', '-')} must be >= {minimum}, got {getattr(args, key)}")
    try:
        parse_conf_pairs(args.conf)
    except ValueError as exc:
        p.error(str(exc))
    if args.run_one and (args.run_one not in PROVIDERS or not (args.data and args.checkpoint and args.result)):
        p.error("--run-one needs a known provider, --data, --checkpoint and --result")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_one:
        return run_one(args)
    if args.median_of:
        return print_median_of([x for x in args.median_of.split(",") if x.strip()], args.chart)

    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sparkstate-workloads-"))
    print(f"workdir {args.workdir}; {args.shuffle_partitions} partitions, {args.master}; sizes: "
          + ", ".join(f"{k.replace('_', '-')} {getattr(args, k):,}" for k in DEFAULTS), flush=True)
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    datasets: dict[str, dict[str, Any]] = {}
    for name in args.workload_list:
        dataset = WORKLOADS[name].dataset
        if dataset not in datasets:
            datasets[dataset] = prepare_dataset(os.path.join(args.workdir, "input"), dataset,
                                                dataset_sizes(dataset, args))
    print(f"input ready in {time.monotonic() - t0:.1f} s: "
          + ", ".join(f"{d} {v['rows']:,} rows" for d, v in datasets.items()), flush=True)

    expect_batches = max(d["batches"] for d in datasets.values())
    per_provider = {provider: run_child(provider, args, expect_batches) for provider in args.provider_list}
    results = {name: [per_provider[p][name] for p in args.provider_list] for name in args.workload_list}
    warnings = [w for name in args.workload_list
                for w in check_results(name, datasets[WORKLOADS[name].dataset], results[name])]
    elapsed = time.monotonic() - t0
    ratios = compute_ratios(results)

    for name, rows in results.items():
        expected = datasets[WORKLOADS[name].dataset]
        print(f"\n### {name}: {WORKLOADS[name].about} ({expected['batches']} batches, {expected['rows']:,} rows)\n")
        print(workload_table(rows))
    for ours, theirs in RATIO_PAIRS:
        pair = f"{ours}/{theirs}"
        if any(pair in r for r in ratios.values()):
            print(f"\n### {ours} ÷ {theirs} (throughput > 1: ours faster; p99 batch and memory < 1: ours lower)\n")
            print(ratio_table(ratios, pair))
    for line in warnings:
        print(f"\nWARNING: {line}")
    after = latency_probe.probe()
    modes = sorted({r["latency_mode_before"] for rows in results.values() for r in rows})
    print(f"\nlatency mode before runs: {', '.join(modes)}; after: {after.describe()}; "
          f"load average {os.getloadavg()[0]:.2f}; total {elapsed / 60:.1f} min")

    report = {
        **run_header(started),
        "params": {k: getattr(args, k) for k in (*DEFAULTS, "shuffle_partitions", "master", "driver_memory", "conf")},
        "workloads": {n: {"about": WORKLOADS[n].about, "input": datasets[WORKLOADS[n].dataset]}
                      for n in args.workload_list},
        "elapsed_s": round(elapsed, 1),
        "results": results,
        "ratios": ratios,
        "warnings": warnings,
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(f"JSON results: {os.path.abspath(args.out)}")
    if args.chart and write_chart(args.chart, ratios):
        print(f"chart: {os.path.abspath(args.chart)}")
    ok = all(r["status"] == "ok" for rows in results.values() for r in rows)
    return 0 if ok and not warnings else 1


if __name__ == "__main__":
    sys.exit(main())
