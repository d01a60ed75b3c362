"""Shared helpers for the end-to-end operator tests.

The pattern every test follows:

1. write some input files (`InputDir.add`), one file per micro-batch (`maxFilesPerTrigger=1`);
2. run a streaming query to completion with `trigger(availableNow=True)` (`run_available_now`);
3. add more files and run the *same* query again from the *same* checkpoint, so state written by the
   first run has to be restored by the second;
4. compare what the sink received with the same computation done in batch over all the input
   (`assert_same_rows`).

Sinks: `BatchCollector` is a foreachBatch sink (foreachBatch turns on Spark's state store commit
validation) that keeps each micro-batch's rows on the driver, keyed by batch id so a replayed batch
overwrites instead of duplicating. `read_parquet_sink` reads a file sink back through its
`_spark_metadata` log (exactly-once view).
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import StructType

PREFIX = "spark.sql.streaming.stateStore.sparkstate."

# Files get explicit, strictly increasing modification times so the file source picks them in the
# order they were written (it orders by mtime; files written within one clock tick would tie).
_MTIME_BASE = time.time() - 3600


class InputDir:
    """A directory of JSON-lines files read as a stream (one file per trigger) and in batch."""

    def __init__(self, spark: SparkSession, path: str, schema: StructType):
        self.spark = spark
        self.path = path
        self.schema = schema
        self.files: list[list[dict[str, Any]]] = []
        os.makedirs(path, exist_ok=True)

    def add(self, rows: Sequence[dict[str, Any]]) -> str:
        """Write one new file (atomically: write a hidden temp file, then rename)."""
        index = len(self.files)
        name = os.path.join(self.path, f"part-{index:05d}.json")
        tmp = os.path.join(self.path, f".part-{index:05d}.json.tmp")
        with open(tmp, "w") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
        os.utime(tmp, (_MTIME_BASE + index, _MTIME_BASE + index))
        os.rename(tmp, name)
        self.files.append(list(rows))
        return name

    def add_all(self, files: Iterable[Sequence[dict[str, Any]]]) -> None:
        for rows in files:
            self.add(rows)

    def stream(self) -> DataFrame:
        return (self.spark.readStream.schema(self.schema)
                .option("maxFilesPerTrigger", 1)
                .json(self.path))

    def batch(self) -> DataFrame:
        return self.spark.read.schema(self.schema).json(self.path)

    def all_rows(self) -> list[dict[str, Any]]:
        return [row for rows in self.files for row in rows]


class BatchCollector:
    """A foreachBatch sink keeping every micro-batch's rows on the driver, by batch id.

    The same collector is passed to every run of a query, so results accumulate across restarts.
    """

    def __init__(self) -> None:
        self.batches: dict[int, list[Row]] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.batches[batch_id] = df.collect()

    def attach(self, writer: DataStreamWriter) -> DataStreamWriter:
        return writer.foreachBatch(self)

    def batch_ids(self) -> list[int]:
        return sorted(self.batches)

    def appended(self) -> list[Row]:
        """Append mode: every row of every batch, in batch order."""
        return [row for batch_id in self.batch_ids() for row in self.batches[batch_id]]

    def updated(self, key: Sequence[str]) -> list[Row]:
        """Update mode: the last row emitted per key (a key may appear only once per batch)."""
        latest: dict[tuple, Row] = {}
        for batch_id in self.batch_ids():
            seen_in_batch: set[tuple] = set()
            for row in self.batches[batch_id]:
                k = tuple(_freeze(row[c]) for c in key)
                assert k not in seen_in_batch, f"key {k} emitted twice in batch {batch_id}"
                seen_in_batch.add(k)
                latest[k] = row
        return list(latest.values())

    def completed(self) -> list[Row]:
        """Complete mode: the rows of the last batch that emitted anything."""
        non_empty = [b for b in self.batch_ids() if self.batches[b]]
        return list(self.batches[non_empty[-1]]) if non_empty else []


def run_available_now(writer: DataStreamWriter, checkpoint: str, timeout_s: float = 180) -> dict:
    """Start `writer` with an availableNow trigger, wait until it drains its input, stop it.

    Returns the last progress (dict) so callers can assert on batch ids. Raises if the query failed.
    """
    progress = run_available_now_progress(writer, checkpoint, timeout_s)
    return progress[-1] if progress else {}


def run_available_now_progress(writer: DataStreamWriter, checkpoint: str, timeout_s: float = 180) -> list[dict]:
    """`run_available_now`, returning every batch's progress (the query's recentProgress)."""
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    try:
        finished = query.awaitTermination(timeout_s)
        assert finished, f"query did not finish within {timeout_s}s"
        exc = query.exception()
        if exc is not None:
            raise AssertionError(f"streaming query failed: {exc}")
        return query.recentProgress
    finally:
        query.stop()


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set session confs for a block, then put back what was there (a value the session was built
    with, such as the provider class, is restored, not unset)."""
    missing = object()
    saved = {key: spark.conf.get(key, None) if spark.conf.get(key, None) is not None else missing for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is missing:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def checkpoint_loads_per_batch(spark: SparkSession, writer: DataStreamWriter, checkpoint: str,
                               conf: dict[str, str]) -> list[int]:
    """Run `writer` to completion (availableNow) with session `conf` set for the run; per batch with
    state, how many stores were restored from the checkpoint (our `sparkstateCheckpointLoads`)."""
    with session_conf(spark, conf):
        progress = run_available_now_progress(writer, checkpoint)
    return [sum(op["customMetrics"]["sparkstateCheckpointLoads"] for op in p["stateOperators"])
            for p in progress if p["stateOperators"]]


def committed_batches(checkpoint: str) -> list[int]:
    """Batch ids recorded in the checkpoint's commit log."""
    commits = os.path.join(checkpoint, "commits")
    if not os.path.isdir(commits):
        return []
    return sorted(int(n) for n in os.listdir(commits) if n.isdigit())


def read_parquet_sink(spark: SparkSession, path: str) -> list[Row]:
    return spark.read.parquet(path).collect()


# ----------------------------------------------------------------------------------- comparison

def _freeze(value: Any) -> Any:
    """Rows and lists to plain (hashable, comparable) tuples."""
    if isinstance(value, Row):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _sort_key(value: Any) -> Any:
    """A total order over frozen values that tolerates None (None sorts first)."""
    if isinstance(value, tuple):
        return (1, tuple(_sort_key(v) for v in value))
    if value is None:
        return (0, ())
    return (1, (type(value).__name__, value))


def normalize(rows: Iterable[Any]) -> list[tuple]:
    frozen = [_freeze(r) for r in rows]
    return sorted(frozen, key=_sort_key)


def assert_same_rows(actual: Iterable[Any], expected: Iterable[Any], *, min_rows: int = 1) -> None:
    """Multiset equality of two row collections; also guards against a vacuous comparison."""
    got, want = normalize(actual), normalize(expected)
    assert len(want) >= min_rows, f"expected result has only {len(want)} rows; the test data is too thin"
    if got != want:
        missing = [r for r in want if r not in got]
        extra = [r for r in got if r not in want]
        raise AssertionError(
            f"streaming result differs from batch: {len(got)} rows vs {len(want)} expected\n"
            f"missing ({len(missing)}): {missing[:10]}\nunexpected ({len(extra)}): {extra[:10]}")


def run_in_two_phases(
    source: InputDir,
    files: Sequence[Sequence[dict[str, Any]]],
    split: int,
    start: Callable[[], dict],
) -> tuple[dict, dict]:
    """Write files[:split], run; write files[split:], run again on the same checkpoint."""
    assert 0 < split < len(files)
    source.add_all(files[:split])
    first = start()
    source.add_all(files[split:])
    second = start()
    return first, second


# ----------------------------------------------------------------------------------- a standard case

class AggregationCase:
    """A count and a sum per key over generated event files, into a foreachBatch sink: the workhorse of
    the failure tests. `run(conf)` sets session confs for that run only (the session is shared)."""

    def __init__(self, spark: SparkSession, tmp_path: Any, seed: int, n_files: int = 4, per_file: int = 40,
                 n_keys: int = 10) -> None:
        from datagen import EVENT_SCHEMA, random_events

        self.spark = spark
        self.source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
        self.checkpoint = str(tmp_path / "ckpt")
        self.files = random_events(seed=seed, n_files=n_files, per_file=per_file, n_keys=n_keys)
        self.n_keys = n_keys
        self.sink = BatchCollector()

    def writer(self) -> DataStreamWriter:
        agg = self.source.stream().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        return self.sink.attach(agg.writeStream.outputMode("update"))

    def run(self, conf: Mapping[str, str] | None = None) -> dict:
        with session_conf(self.spark, conf or {}):
            return run_available_now(self.writer(), self.checkpoint)

    def failure_of_run(self, conf: Mapping[str, str] | None = None) -> str:
        """The error of a run expected to fail (awaitTermination raises, or the harness reports it)."""
        try:
            self.run(conf)
        except Exception as err:  # noqa: BLE001 - the failure is what the caller inspects
            return str(err)
        raise AssertionError("the run was expected to fail but succeeded")

    def assert_matches_batch(self) -> None:
        expected = self.source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        assert_same_rows(self.sink.updated(["k"]), expected.collect(), min_rows=self.n_keys)

    def store_dirs(self) -> list[str]:
        import glob

        return sorted(glob.glob(os.path.join(self.checkpoint, "state", "0", "*", "sparkstate")))
