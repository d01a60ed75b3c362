"""Resident memory of one store worker at a known state size, for each backend: the figures behind the
`spark.executor.memoryOverhead` formula in docs/deploy.md.

    python scripts/measure-worker-memory.py [KEYS ...]      (default: 1000 1000000)

One local[1] session, one state partition, so one worker holds one store. For each backend and each key
count, a streaming aggregation (`groupBy(k).agg(count, sum)`, keys `key-<12 digits>`) runs one batch over a
fresh checkpoint; the worker's resident set (`sparkstateWorkerRssBytes`, the store's share of its worker's
RSS, which with one store is the whole) and the state's own size (`memoryUsedBytes`) are read from the
query's progress, and the worker's peak (VmHWM) from /proc. Each backend runs with fresh workers.
"""
from __future__ import annotations

import os
import sys
import tempfile

from pyspark.sql import SparkSession

import sparkstate

PREFIX = "spark.sql.streaming.stateStore.sparkstate."


def _worker_peaks(spark: SparkSession) -> list[int]:
    jvm = spark.sparkContext._jvm.ProcessHandle.current().pid()
    peaks = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"sparkstate.worker" not in f.read():
                    continue
            with open(f"/proc/{name}/status") as f:
                status = dict(line.split(":", 1) for line in f)
            if int(status["PPid"]) == jvm:
                peaks.append(int(status["VmHWM"].split()[0]) * 1024)
        except (OSError, KeyError, ValueError):
            continue
    return peaks


def measure(backend: str, key_counts: list[int], workdir: str) -> None:
    builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1"))
    spark = sparkstate.configure(builder, backend=backend).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for keys in key_counts:
            source = os.path.join(workdir, f"in-{keys}")
            if not os.path.exists(source):
                spark.range(keys).selectExpr("concat('key-', lpad(cast(id as string), 12, '0')) as k",
                                             "id as v").write.parquet(source)
            checkpoint = os.path.join(workdir, f"ckpt-{backend}-{keys}")
            query = (spark.readStream.schema("k string, v long").parquet(source).groupBy("k")
                     .agg({"v": "sum", "*": "count"}).writeStream.outputMode("update").format("noop")
                     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            query.awaitTermination()
            op = query.lastProgress["stateOperators"][0]
            rss = op["customMetrics"]["sparkstateWorkerRssBytes"]
            peak = max(_worker_peaks(spark))
            print(f"{backend:8} keys={keys:>9}  worker RSS {rss / 2**20:7.1f} MiB  peak {peak / 2**20:7.1f} MiB"
                  f"  state memoryUsedBytes {op['memoryUsedBytes'] / 2**20:7.1f} MiB  rows {op['numRowsTotal']}",
                  flush=True)
    finally:
        spark.stop()


def main() -> None:
    key_counts = [int(a) for a in sys.argv[1:]] or [1000, 1_000_000]
    with tempfile.TemporaryDirectory(prefix="sparkstate-measure-") as workdir:
        for backend in ("rocksdb", "heap"):
            measure(backend, key_counts, workdir)


if __name__ == "__main__":
    main()
