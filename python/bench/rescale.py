"""Benchmark: rescale 1M keys of aggregation state from 4 to 8 partitions, ours vs Spark's, in one run.

    PYTHONPATH=$PWD/provider:$PWD/python python python/bench/rescale.py     # 1M keys, 4 -> 8
    python python/bench/rescale.py --keys 100000 --out rescale.json          # smaller

For each side, in its own fresh Python process and JVM (this file with `--run-one`), one after the other:
1. run `groupBy(key).agg(count(*), sum(value))` (update mode, `noop` sink) over `--keys` distinct keys
   (two parquet files, two micro-batches) with `--from` shuffle partitions, so the checkpoint holds
   `--keys` entries of aggregation state;
2. time the offline rescale to `--to` partitions:
   - `sparkstate`: `sparkstate.rescale(spark, checkpoint, to)` on a query run with our provider (RocksDB
     backend unless `--backend`);
   - `spark`: `spark._streamingCheckpointManager.repartition(checkpoint, to)` on the same query run with
     Spark's `RocksDBStateStoreProvider`;
3. restart the unchanged query over one more small file and check that it ran with `--to` partitions and
   wrote state in exactly `--to` partitions (a sanity check; not timed).
Both time only step 2, from the call to its return, with a warm JVM (step 1 ran in it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

SPARK_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def write_input(data_dir: str, keys: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(data_dir, exist_ok=True)
    half = keys // 2
    for i, (lo, hi) in enumerate([(0, half), (half, keys)]):
        table = pa.table({"key": pa.array(range(lo, hi), pa.int64()), "value": pa.array(range(lo, hi), pa.int64())})
        pq.write_table(table, os.path.join(data_dir, f".tmp-{i}"))
        os.utime(os.path.join(data_dir, f".tmp-{i}"), (1_000_000 + i, 1_000_000 + i))
        os.rename(os.path.join(data_dir, f".tmp-{i}"), os.path.join(data_dir, f"part-{i:03d}.parquet"))


def run_one(side: str, args: argparse.Namespace) -> dict:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    work = tempfile.mkdtemp(prefix=f"bench-rescale-{side}-", dir=args.workdir)
    data, checkpoint = os.path.join(work, "input"), os.path.join(work, "checkpoint")
    shutil.copytree(args.data, data)
    builder = (SparkSession.builder.master(args.master).appName(f"bench-rescale-{side}")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", args.driver_memory)
               .config("spark.sql.shuffle.partitions", str(args.from_partitions))
               .config("spark.sql.adaptive.enabled", "false"))
    if side == "sparkstate":
        import sparkstate
        builder = sparkstate.configure(builder, backend=args.backend)
    else:
        builder = builder.config("spark.sql.streaming.stateStore.providerClass", SPARK_ROCKSDB)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def run_query() -> None:
        df = spark.readStream.schema("key long, value long").option("maxFilesPerTrigger", 1).parquet(data)
        q = (df.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"))
             .writeStream.outputMode("update").format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        if q.exception():
            raise RuntimeError(str(q.exception()))

    t0 = time.perf_counter()
    run_query()
    build_s = time.perf_counter() - t0
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    if side == "sparkstate":
        import sparkstate
        summary = sparkstate.rescale(spark, checkpoint, args.to_partitions)
        detail = summary.describe() + f"; phases {summary.phases}"
    else:
        spark._streamingCheckpointManager.repartition(checkpoint, args.to_partitions)
        detail = "spark._streamingCheckpointManager.repartition"
    rescale_s = time.perf_counter() - t0
    load_after = os.getloadavg()[0]
    state_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(checkpoint, "state"))
                      for f in fs)
    # sanity: restart the unchanged query over one more file touching 1000 existing keys
    import pyarrow as pa
    import pyarrow.parquet as pq
    extra = pa.table({"key": pa.array(range(0, args.keys, max(1, args.keys // 1000)), pa.int64())})
    extra = extra.append_column("value", pa.array([0] * extra.num_rows, pa.int64()))
    pq.write_table(extra, os.path.join(data, ".tmp-x"))
    os.rename(os.path.join(data, ".tmp-x"), os.path.join(data, "part-999.parquet"))
    run_query()
    with open(os.path.join(checkpoint, "offsets", sorted(
            (n for n in os.listdir(os.path.join(checkpoint, "offsets")) if n.isdigit()), key=int)[-1])) as f:
        pinned = int(json.loads(f.read().split("\n")[1])["conf"]["spark.sql.shuffle.partitions"])
    parts = sorted(int(n) for n in os.listdir(os.path.join(checkpoint, "state", "0")) if n.isdigit())
    ok = pinned == args.to_partitions and parts == list(range(args.to_partitions))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return {"side": side, "keys": args.keys, "from": args.from_partitions, "to": args.to_partitions,
            "buildSeconds": round(build_s, 2), "rescaleSeconds": round(rescale_s, 2),
            "checkpointStateBytes": state_bytes, "restartOk": ok, "detail": detail,
            "loadAvg1mBeforeAfter": [round(load_before, 2), round(load_after, 2)]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--from", dest="from_partitions", type=int, default=4)
    p.add_argument("--to", dest="to_partitions", type=int, default=8)
    p.add_argument("--sides", default="sparkstate,spark", help="comma list of sparkstate, spark (run in this order)")
    p.add_argument("--backend", default="rocksdb", help="sparkstate backend (rocksdb or heap)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="3g")
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--timeout", type=int, default=3600)
    p.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--data", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_one:
        result = run_one(args.run_one, args)
        with open(args.result, "w") as f:
            json.dump(result, f)
        return 0
    base = tempfile.mkdtemp(prefix="bench-rescale-", dir=args.workdir)
    try:
        data = os.path.join(base, "input")
        write_input(data, args.keys)
        results = []
        for side in [s.strip() for s in args.sides.split(",") if s.strip()]:
            out = os.path.join(base, f"{side}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--run-one", side, "--data", data, "--result", out,
                   "--keys", str(args.keys), "--from", str(args.from_partitions), "--to", str(args.to_partitions),
                   "--backend", args.backend, "--master", args.master, "--driver-memory", args.driver_memory]
            if args.workdir:
                cmd += ["--workdir", args.workdir]
            log = os.path.join(base, f"{side}.log")
            with open(log, "w") as lf:
                rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, timeout=args.timeout).returncode
            if rc != 0:
                with open(log) as lf:
                    tail = lf.read()[-3000:]
                print(f"{side}: failed (exit {rc})\n{tail}", file=sys.stderr)
                return 1
            with open(out) as f:
                results.append(json.load(f))
        print(f"rescale {args.from_partitions} -> {args.to_partitions}, {args.keys:,} keys of aggregation state, "
              f"{args.master}, {platform.machine()} / {os.cpu_count()} CPUs")
        print("| side | rescale s | state build s | checkpoint state bytes | restart ok | load avg (1 min) before/after |")
        print("|---|---|---|---|---|---|")
        for r in results:
            load = "/".join(f"{x:.1f}" for x in r["loadAvg1mBeforeAfter"])
            print(f"| {r['side']} | {r['rescaleSeconds']:.2f} | {r['buildSeconds']:.2f} | "
                  f"{r['checkpointStateBytes']:,} | {r['restartOk']} | {load} |")
        for r in results:
            print(f"{r['side']}: {r['detail']}")
        by = {r["side"]: r for r in results}
        if "sparkstate" in by and "spark" in by:
            ratio = by["sparkstate"]["rescaleSeconds"] / by["spark"]["rescaleSeconds"]
            print(f"ratio sparkstate / spark = {ratio:.2f} (target <= 0.50)")
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "results": results},
                          f, indent=2)
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
