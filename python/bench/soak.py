"""Soak: does anything grow without bound while a stateful query runs for many batches?

    python python/bench/soak.py                          # 300 batches; sparkstate rocksdb and heap, Spark's rocksdb
    python python/bench/soak.py --batches 60 --providers sparkstate

One streaming aggregation (`groupBy(key).count()`, update mode, `noop` sink) over `--batches` small input
files (one per micro-batch, `--rows` rows over `--keys` keys, so the state stops growing after the first
batches), with retention at `--retain` versions and maintenance every 2 s. Each provider runs in its own
Python process and JVM (this file with `--run-one`). A sampler reads, about once a second, with the
query's current batch id:

- the JVM's and the store workers' resident memory (`VmRSS`), open files and threads (the workers are the
  `sparkstate.worker` processes started by this run's JVM);
- the JVM heap in use right after a full GC (`System.gc()` every 10th sample): what the JVM keeps, which
  its RSS does not show while the heap is still finding its size;
- the bytes under the store workers' local directory (`localDir`, set per run) and under the checkpoint's
  `state/`.

It prints, per provider, those figures at the end of warm-up (`--warmup` batches) and at the last batch, and
the growth between the two: bounded growth shows as ~0 after warm-up. Spark's own provider runs the same
query for reference.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

if not __package__:  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # python/
    from _checkout import ensure_sparkstate_jobs

    ensure_sparkstate_jobs()

from sparkstate_jobs import procfs  # noqa: E402
from sparkstate_jobs.progress import human_bytes  # noqa: E402

RUNS = {  # name -> (provider, sparkstate backend)
    "sparkstate": ("sparkstate", "rocksdb"),
    "heap": ("sparkstate", "heap"),
    "rocksdb": ("rocksdb", None),
}
FIELDS = ("jvm_rss", "jvm_heap_after_gc", "worker_rss", "worker_fds", "worker_threads", "local_bytes",
          "state_bytes")


def _tree_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def sample(jvm_pid: int, local_dir: str, state_dir: str) -> dict[str, int]:
    workers = [child for child in procfs.children(jvm_pid) if procfs.is_store_worker(child)]
    out = dict.fromkeys(FIELDS[:1] + FIELDS[2:], 0)
    out["jvm_rss"] = int(procfs.status(jvm_pid)["VmRSS"].split()[0]) * 1024
    for w in workers:
        try:
            status = procfs.status(w)
            out["worker_rss"] += int(status["VmRSS"].split()[0]) * 1024
            out["worker_threads"] += int(status["Threads"])
            out["worker_fds"] += len(os.listdir(f"/proc/{w}/fd"))
        except (OSError, KeyError):
            pass
    out["local_bytes"] = _tree_bytes(local_dir)
    out["state_bytes"] = _tree_bytes(state_dir)
    return out


def run_one(name: str, args: argparse.Namespace) -> dict:
    from sparkstate_jobs.session import new_session

    provider, backend = RUNS[name]
    work = os.path.join(args.workdir, name)
    local_dir = os.path.join(work, "local")
    conf = {"spark.sql.streaming.minBatchesToRetain": str(args.retain),
            "spark.sql.streaming.stateStore.maintenanceInterval": "2s",
            "spark.sql.streaming.stateStore.sparkstate.localDir": local_dir}
    conf.update(item.split("=", 1) for item in args.conf)
    if provider != "sparkstate":
        conf.pop("spark.sql.streaming.stateStore.sparkstate.localDir")
        conf["spark.local.dir"] = local_dir
    spark = new_session(f"soak-{name}", provider, backend=backend, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    checkpoint = os.path.join(work, "checkpoint")
    counts = (spark.readStream.schema("k long, v long").option("maxFilesPerTrigger", 1)
              .json(os.path.join(args.workdir, "input")).groupBy("k").count())
    query = (counts.writeStream.format("noop").outputMode("update").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    samples: list[dict] = []
    jvm = spark.sparkContext._jvm
    heap_after_gc = 0

    def sampler() -> None:
        nonlocal heap_after_gc
        n = 0
        while query.isActive:
            progress = query.lastProgress
            if progress:
                if n % 10 == 0:
                    jvm.java.lang.System.gc()
                    heap_after_gc = int(jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
                                        .getHeapMemoryUsage().getUsed())
                n += 1
                try:
                    samples.append({"batch": int(progress.batchId), "jvm_heap_after_gc": heap_after_gc,
                                    **sample(jvm_pid, local_dir, os.path.join(checkpoint, "state"))})
                except OSError:
                    pass
            time.sleep(1.0)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    query.awaitTermination()
    thread.join(5)
    spark.stop()
    return {"name": name, "samples": samples}


def _at(samples: list[dict], batch: int) -> dict | None:
    after = [s for s in samples if s["batch"] >= batch]
    return after[0] if after else (samples[-1] if samples else None)


def report(results: list[dict], warmup: int) -> None:
    print(f"| run | figure | at batch {warmup} | at the last batch | growth after warm-up |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        start, end = _at(r["samples"], warmup), (r["samples"][-1] if r["samples"] else None)
        if not start or not end:
            print(f"| {r['name']} | no samples | | | |")
            continue
        for field in FIELDS:
            a, b = start[field], end[field]
            fmt = human_bytes if field.endswith(("rss", "bytes", "gc")) else str
            print(f"| {r['name']} (batches {start['batch']}→{end['batch']}) | {field} | {fmt(a)} | {fmt(b)} | "
                  f"{'+' if b >= a else '-'}{fmt(abs(b - a))} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--rows", type=int, default=2000, help="rows per batch")
    p.add_argument("--keys", type=int, default=5000)
    p.add_argument("--retain", type=int, default=20, help="spark.sql.streaming.minBatchesToRetain")
    p.add_argument("--warmup", type=int, default=50, help="batches before growth is measured")
    p.add_argument("--providers", default=",".join(RUNS), help=f"comma list of {', '.join(RUNS)}")
    p.add_argument("--workdir", default=None)
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf, every run")
    p.add_argument("--out", default=None, help="also write every sample as JSON here")
    p.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="sparkstate-soak-")
    if args.run_one:
        print(json.dumps(run_one(args.run_one, args)))
        return 0
    input_dir = os.path.join(args.workdir, "input")
    if not os.path.isdir(input_dir):
        import random

        os.makedirs(input_dir)
        rng = random.Random(11)
        for b in range(args.batches):
            with open(os.path.join(input_dir, f"part-{b:05d}.json"), "w") as f:
                f.writelines(f'{{"k":{rng.randrange(args.keys)},"v":{b}}}\n' for _ in range(args.rows))
    results = []
    for name in args.providers.split(","):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--run-one", name,
                               *sum(([f"--{k}", str(getattr(args, k))] for k in
                                     ("batches", "rows", "keys", "retain", "warmup", "workdir")), []),
                               *sum((["--conf", c] for c in args.conf), [])],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"[{name}] failed (exit {done.returncode}):\n{done.stderr[-3000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"[{name}] {len(results[-1]['samples'])} samples", file=sys.stderr)
    report(results, args.warmup)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
