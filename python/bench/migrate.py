"""Benchmark: migrate 1M keys of aggregation state from Spark's RocksDB provider into sparkstate and back,
against Spark's own offline repartition of the same checkpoint, in one run.

    PYTHONPATH=$PWD/provider:$PWD/python python python/bench/migrate.py           # 1M keys
    python python/bench/migrate.py --keys 100000 --backend heap                    # smaller, heap backend

In one JVM (warm after step 1), one after the other:
1. run `groupBy(key).agg(count(*), sum(value))` (update mode, `noop` sink) over `--keys` distinct keys (two
   parquet files, two micro-batches) on Spark's `RocksDBStateStoreProvider` with `--partitions` partitions;
2. copy the checkpoint, and time `spark._streamingCheckpointManager.repartition(copy, 2 x partitions)`:
   Spark's closest operation, a full read, shuffle and rewrite of the state;
3. time `sparkstate.migrate(checkpoint, "sparkstate")` (into ours), then `sparkstate.migrate(checkpoint,
   "rocksdb")` (back);
4. restart the unchanged query over one more file on the migrated-back checkpoint (a sanity check).
Prints seconds per step and the ratios migrate / repartition (target: each at most 1.0).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python/bench: the rescale benchmark's input
from rescale import SPARK_ROCKSDB, write_input  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--backend", default="rocksdb", choices=("rocksdb", "heap"))
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="3g")
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import sparkstate

    work = tempfile.mkdtemp(prefix="bench-migrate-", dir=args.workdir)
    data, checkpoint = os.path.join(work, "input"), os.path.join(work, "checkpoint")
    write_input(data, args.keys)
    builder = (SparkSession.builder.master(args.master).appName("bench-migrate")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", args.driver_memory)
               .config("spark.sql.shuffle.partitions", str(args.partitions))
               .config("spark.sql.adaptive.enabled", "false"))
    spark = sparkstate.configure(builder, backend=args.backend).config(
        "spark.sql.streaming.stateStore.providerClass", SPARK_ROCKSDB).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def run_query() -> None:
        df = spark.readStream.schema("key long, value long").option("maxFilesPerTrigger", 1).parquet(data)
        q = (df.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"))
             .writeStream.outputMode("update").format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        if q.exception():
            raise RuntimeError(str(q.exception()))

    try:
        t0 = time.perf_counter()
        run_query()
        build_s = time.perf_counter() - t0
        copy = checkpoint + "-repartition"
        shutil.copytree(checkpoint, copy)
        t0 = time.perf_counter()
        spark._streamingCheckpointManager.repartition(copy, 2 * args.partitions)
        repartition_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        into = sparkstate.migrate(spark, checkpoint, "sparkstate", backend=args.backend)
        into_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = sparkstate.migrate(spark, checkpoint, "rocksdb")
        back_s = time.perf_counter() - t0
        extra = pa.table({"key": pa.array(range(0, args.keys, max(1, args.keys // 1000)), pa.int64())})
        extra = extra.append_column("value", pa.array([0] * extra.num_rows, pa.int64()))
        pq.write_table(extra, os.path.join(data, ".tmp-x"))
        os.rename(os.path.join(data, ".tmp-x"), os.path.join(data, "part-999.parquet"))
        run_query()
        restart_ok = into.rows == args.keys and back.rows == args.keys
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    result = {"keys": args.keys, "partitions": args.partitions, "backend": args.backend,
              "buildSeconds": round(build_s, 2), "sparkRepartitionSeconds": round(repartition_s, 2),
              "migrateIntoSeconds": round(into_s, 2), "migrateBackSeconds": round(back_s, 2),
              "restartOk": restart_ok, "loadAvg1m": round(os.getloadavg()[0], 2)}
    print(f"migrate {args.keys:,} keys of aggregation state, {args.partitions} partitions, {args.master}, "
          f"{platform.machine()} / {os.cpu_count()} CPUs, sparkstate backend {args.backend}")
    print("| step | seconds | / Spark's repartition |")
    print("|---|---|---|")
    print(f"| Spark repartition {args.partitions} -> {2 * args.partitions} (RocksDB provider) "
          f"| {repartition_s:.2f} | 1.00 |")
    print(f"| migrate RocksDB provider -> sparkstate | {into_s:.2f} | {into_s / repartition_s:.2f} |")
    print(f"| migrate sparkstate -> RocksDB provider | {back_s:.2f} | {back_s / repartition_s:.2f} |")
    print(f"state built in {build_s:.1f} s; restart after the round trip ok: {restart_ok}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "result": result}, f,
                      indent=2)
    return 0 if restart_ok else 1


if __name__ == "__main__":
    sys.exit(main())
