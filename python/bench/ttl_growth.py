"""Idle-state expiry over an ever-growing key space: state that stays flat with a ttl and grows without.

    python python/bench/ttl_growth.py                          # 60 batches, ttl 10s, both backends
    python python/bench/ttl_growth.py --batches 120 --ttl 20s --backends rocksdb --out growth.json
    python python/bench/ttl_growth.py --chart ttl-growth.png   # needs matplotlib: pip install .[bench]

One `groupBy(key).count()` query (update mode, `noop` sink) over `--batches` input files of `--rows` rows,
every row a key no batch saw before, plus `--hot` keys that every batch writes again. Each backend runs it
twice with an availableNow trigger (batches back to back), once with `ttl` and once without, in one
SparkSession of this process. Per batch, from the query's progress: the keys the stores hold
(`numRowsTotal`: expired keys not deleted yet included), their memory (`memoryUsedBytes`), the bytes of the
committed versions (`sparkstateCheckpointBytes`) and the keys expiry deleted (`sparkstateTtlExpiredKeys`),
summed over the partitions. Counts do not depend on the machine's speed; how many batches fit in the
duration does (batch times are the commits' clocks), so the figures name the batches' mean interval.
`--chart` draws the keys held and the checkpoint bytes per batch, one column per backend, with and without
the ttl.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime

FIELDS = ("keys", "memory", "checkpoint_bytes", "expired")


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _write_inputs(path: str, batches: int, rows: int, hot: int) -> None:
    os.makedirs(path, exist_ok=True)
    base = time.time() - 3600
    for b in range(batches):
        name = os.path.join(path, f"part-{b:05d}.json")
        with open(name, "w") as f:
            for i in range(rows):
                f.write(json.dumps({"k": f"new-{b}-{i}"}) + "\n")
            for i in range(hot):
                f.write(json.dumps({"k": f"hot-{i}"}) + "\n")
        os.utime(name, (base + b, base + b))  # the file source takes files in modification-time order


def write_chart(path: str, results: dict[str, dict], ttl: str) -> bool:
    """Keys held and checkpoint bytes per batch: a row per metric, a column per backend, a line per ttl
    setting. False (and a hint) without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 - optional: pip install .[bench]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("no chart: matplotlib is not installed (`pip install .[bench]`)")
        return False
    backends = list(dict.fromkeys(run["backend"] for run in results.values()))
    if not backends:
        print("no chart: no run")
        return False
    metrics = (("keys", "keys held (numRowsTotal)", 1), ("checkpoint_bytes", "checkpoint bytes (MiB)", 2 ** 20))
    fig, axes = plt.subplots(len(metrics), len(backends), figsize=(5.0 * len(backends), 7.0),
                             sharex=True, squeeze=False)
    for col, backend in enumerate(backends):
        for row, (field, label, scale) in enumerate(metrics):
            ax = axes[row][col]
            for run in results.values():
                if run["backend"] != backend:
                    continue
                ax.plot([r["batch"] for r in run["batches"]], [r[field] / scale for r in run["batches"]],
                        label=f"ttl {run['ttl']}" if run["ttl"] else "no ttl",
                        linestyle="-" if run["ttl"] else "--")
            ax.set_ylim(bottom=0)
            ax.grid(True, linewidth=0.3)
            if row == 0:
                ax.set_title(f"{backend} backend")
            if row == len(metrics) - 1:
                ax.set_xlabel("batch")
            if col == 0:
                ax.set_ylabel(label)
            ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"groupBy(key).count() over a growing key space, with and without ttl {ttl}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _run(spark, inputs: str, checkpoint: str, conf: dict[str, str]) -> list[dict]:
    from pyspark.sql.types import StringType, StructField, StructType

    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        stream = (spark.readStream.schema(StructType([StructField("k", StringType())]))
                  .option("maxFilesPerTrigger", 1).json(inputs))
        query = (stream.groupBy("k").count().writeStream.format("noop").outputMode("update")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        rows = []
        for p in query.recentProgress:
            ops = p["stateOperators"]
            if not ops:
                continue
            custom = ops[0]["customMetrics"]
            started = datetime.fromisoformat(p["timestamp"]).timestamp() * 1000
            rows.append({"batch": p["batchId"], "time_ms": started,
                         "keys": ops[0]["numRowsTotal"], "memory": ops[0]["memoryUsedBytes"],
                         "checkpoint_bytes": custom.get("sparkstateCheckpointBytes", 0),
                         "expired": custom.get("sparkstateTtlExpiredKeys", 0)})
        return rows
    finally:
        for key in conf:
            spark.conf.unset(key)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--rows", type=int, default=2000, help="new keys per batch")
    ap.add_argument("--hot", type=int, default=100, help="keys every batch writes again")
    ap.add_argument("--ttl", default="10s")
    ap.add_argument("--backends", default="rocksdb,heap")
    ap.add_argument("--every", type=int, default=10, help="print every N-th batch")
    ap.add_argument("--out", help="write every batch's figures as JSON")
    ap.add_argument("--chart", metavar="FILE.png",
                    help="draw keys held and checkpoint bytes per batch (needs matplotlib: pip install .[bench])")
    args = ap.parse_args(argv)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import sparkstate
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("sparkstate-ttl-growth")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "3")
               .config("spark.sql.streaming.numRecentProgressUpdates", str(args.batches + 10))
               .config("spark.sql.adaptive.enabled", "false"))
    spark = sparkstate.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ttl-growth-") as work:
        inputs = os.path.join(work, "in")
        _write_inputs(inputs, args.batches, args.rows, args.hot)
        for backend in args.backends.split(","):
            for ttl in (args.ttl, None):
                name = f"{backend}, ttl {ttl or 'unset'}"
                conf = {sparkstate.PREFIX + "backend": backend}
                if ttl:
                    conf[sparkstate.PREFIX + "ttl"] = ttl
                rows = _run(spark, inputs, os.path.join(work, name.replace(", ", "-")), conf)
                results[name] = {"backend": backend, "ttl": ttl, "batches": rows}
    spark.stop()
    for name, run in results.items():
        rows = run["batches"]
        span = (rows[-1]["time_ms"] - rows[0]["time_ms"]) if len(rows) > 1 else 0
        print(f"\n{name}: {len(rows)} batches, {span / max(len(rows) - 1, 1) / 1000:.2f} s apart on average")
        print(f"{'batch':>6} {'keys':>10} {'memory':>12} {'checkpoint':>12} {'expired':>9}")
        for r in rows:
            if r["batch"] % args.every == 0 or r is rows[-1]:
                print(f"{r['batch']:>6} {r['keys']:>10,} {_human(r['memory']):>12} "
                      f"{_human(r['checkpoint_bytes']):>12} {r['expired']:>9,}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    if args.chart and write_chart(args.chart, results, args.ttl):
        print(f"chart: {os.path.abspath(args.chart)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
