"""Benchmark: one streaming aggregation, run through every state store provider in one invocation.

    python python/bench/aggregation.py --quick                 # 5 x 50k rows, all four providers
    python python/bench/aggregation.py                         # 20 x 200k rows over 1M keys
    python python/bench/aggregation.py --providers hdfs,rocksdb --out results.json

The query is `groupBy(key).agg(count(*), sum(value))` in update mode to the `noop` sink, so the cost
measured is the state store's (get + put per key, commit, checkpoint) plus Spark's fixed per-batch work.
Input is pre-generated parquet, one file per micro-batch (`maxFilesPerTrigger=1`), written once and
shared by all providers; keys are uniform over `--keys`.

Each provider runs in its own fresh Python process and JVM (this file with `--run-one`), one after the
other, so no provider inherits another's warm JIT, page cache of its own files, or heap. Results go to
stdout as a markdown table and to `--out` as JSON. See docs/benchmarks/aggregation.md for what each column means.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time


if not __package__:  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # python/
    from _checkout import ensure_sparkstate_jobs

    ensure_sparkstate_jobs()

from sparkstate_jobs.bench import latency_probe  # noqa: E402
from sparkstate_jobs.progress import BatchStats, human_bytes, median  # noqa: E402
from sparkstate_jobs.session import PROVIDERS, STATE_PREFIX, ProviderUnavailable, new_session, parse_conf_pairs  # noqa: E402

DEFAULTS = {"batches": 20, "rows_per_batch": 200_000, "keys": 1_000_000}
QUICK = {"batches": 5, "rows_per_batch": 50_000, "keys": 1_000_000}
SEED = 20250106


# ---------------------------------------------------------------------------------------------- input

def generate_input(data_dir: str, batches: int, rows: int, keys: int) -> None:
    """One parquet file per batch of (key, value) longs; reused when the parameters match."""
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    manifest_path = os.path.join(data_dir, "_manifest.json")
    wanted = {"batches": batches, "rows_per_batch": rows, "keys": keys, "seed": SEED}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            if json.load(fh) == wanted:
                return
        shutil.rmtree(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for b in range(batches):
        table = pa.table({"key": rng.integers(0, keys, rows, dtype=np.int64),
                          "value": rng.integers(0, 1000, rows, dtype=np.int64)})
        pq.write_table(table, os.path.join(data_dir, f"batch-{b:05d}.parquet"))
    with open(manifest_path, "w", encoding="utf-8") as fh:   # '_' prefix: ignored by Spark's file source
        json.dump(wanted, fh)


# ----------------------------------------------------------------------------- one provider (child)

def dir_size(path: str) -> tuple[int, int]:
    """(bytes, files) under path, like `du --apparent-size`; includes Hadoop's .crc siblings."""
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(root, name))
                files += 1
            except OSError:
                pass  # removed by maintenance while walking
    return total, files


def run_one(args: argparse.Namespace) -> dict:
    """Run the aggregation once with `args.run_one` as provider; return the measurements."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    conf = parse_conf_pairs(args.conf)
    conf["spark.sql.streaming.numRecentProgressUpdates"] = str(max(100, args.batches + 10))
    spark = new_session(f"bench-aggregation-{args.run_one}", args.run_one, master=args.master,
                        shuffle_partitions=args.shuffle_partitions, backend=args.backend, conf=conf,
                        driver_memory=args.driver_memory)
    try:
        source = (spark.readStream.schema("key LONG, value LONG")
                  .option("maxFilesPerTrigger", 1).parquet(args.data))
        agg = source.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"))
        started = time.monotonic()
        query = (agg.writeStream.format("noop").outputMode("update")
                 .option("checkpointLocation", args.checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        wall = time.monotonic() - started
        batches = [BatchStats.from_progress(p) for p in query.recentProgress]
        provider_class = spark.conf.get("spark.sql.streaming.stateStore.providerClass")
    finally:
        spark.stop()
    state_bytes, state_files = dir_size(os.path.join(args.checkpoint, "state"))
    return summarize_batches(batches, wall, state_bytes, state_files, provider_class)


def summarize_batches(batches: list[BatchStats], wall: float, state_bytes: int, state_files: int,
                      provider_class: str) -> dict:
    data = [b for b in batches if b.input_rows > 0]
    steady = data[1:]   # batch 0 pays for JIT warm-up, first store creation, code generation
    last = data[-1] if data else None
    custom = {k: v for op in (last.operators if last else ()) for k, v in op.custom.items()}

    def rate(bs: list[BatchStats]) -> float | None:
        ms = sum(b.duration_ms for b in bs)
        return sum(b.input_rows for b in bs) / (ms / 1000) if ms else None

    return {
        "provider_class": provider_class,
        "batches": len(data),
        "rows": sum(b.input_rows for b in data),
        "wall_s": round(wall, 2),
        "rows_per_s": rate(steady),
        "rows_per_s_all": rate(data),
        "batch0_ms": data[0].duration_ms if data else None,
        "median_batch_ms": median([b.duration_ms for b in steady]) if steady else None,
        "median_commit_ms": median([b.commit_ms for b in steady]) if steady else None,
        # sparkstate only (its custom metric, summed over partitions by Spark): what one commit writes
        "median_uploaded_bytes": median(uploaded) if (uploaded := [
            u for b in steady if b.operators and (u := b.operators[0].custom.get("sparkstateBytesUploaded"))
        ]) else None,
        "state_rows": last.state_rows if last else None,
        "state_memory_bytes": last.state_memory_bytes if last else None,
        "checkpoint_state_bytes": state_bytes,
        "checkpoint_state_files": state_files,
        "custom_metrics": custom,
        "per_batch": [{"batch": b.batch_id, "rows": b.input_rows, "ms": b.duration_ms,
                       "add_batch_ms": b.add_batch_ms, "commit_ms": b.commit_ms,
                       "updates_ms": b.updates_ms, "removals_ms": b.removals_ms,
                       "state_rows": b.state_rows, "memory_bytes": b.state_memory_bytes,
                       "rows_updated": sum(op.rows_updated for op in b.operators),
                       "custom_metrics": dict(b.operators[0].custom) if b.operators else {}} for b in data],
    }


# --------------------------------------------------------------------------------- harness (parent)

class ProbeDuringRun:
    """Probes the latency mode every few seconds while a child runs (the parent is idle anyway)."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(every_s,), daemon=True)

    def _loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.samples.append(latency_probe.probe(rounds=300).p50_us)

    def __enter__(self) -> "ProbeDuringRun":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_provider(provider: str, args: argparse.Namespace, data_dir: str, tag: str = "") -> dict:
    """Run one provider (or a `--variant` of sparkstate) in a child process; its measurements."""
    base, variant_conf = ("sparkstate", args.variants[provider]) if provider in args.variants else (provider, [])
    ckpt = os.path.join(args.workdir, "checkpoints", provider)
    shutil.rmtree(ckpt, ignore_errors=True)
    result_path = os.path.join(args.workdir, f"result-{provider}{tag}.json")
    log_path = os.path.join(args.workdir, f"log-{provider}{tag}.txt")
    if os.path.exists(result_path):
        os.remove(result_path)
    cmd = [sys.executable, os.path.abspath(__file__), "--run-one", base, "--data", data_dir,
           "--checkpoint", ckpt, "--result", result_path, "--master", args.master,
           "--shuffle-partitions", str(args.shuffle_partitions), "--batches", str(args.batches),
           "--driver-memory", args.driver_memory]
    if args.backend and base == "sparkstate":
        cmd += ["--backend", args.backend]
    for pair in (args.conf or []) + variant_conf:
        cmd += ["--conf", pair]
    before = latency_probe.probe()
    print(f"[{provider}] starting (latency mode before: {before.describe()}); log: {log_path}", flush=True)
    with open(log_path, "w", encoding="utf-8") as log, ProbeDuringRun() as during:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    outcome: dict = {"provider": provider, "latency_before_us": before.p50_us,
                     "latency_mode_before": before.mode,
                     "latency_during_us": median(during.samples) if during.samples else None}
    if rc == 0 and os.path.exists(result_path):
        with open(result_path, encoding="utf-8") as fh:
            outcome.update(json.load(fh), status="ok")
        print(f"[{provider}] done: {fmt_rate(outcome['rows_per_s'])} rows/s, "
              f"median batch {outcome['median_batch_ms']} ms", flush=True)
    else:
        outcome.update(status=f"failed (exit {rc})", error_tail=tail(log_path, 15))
        print(f"[{provider}] FAILED (exit {rc}); last lines of {log_path}:", flush=True)
        print("    " + "\n    ".join(outcome["error_tail"].splitlines()), flush=True)
    if not args.keep:
        shutil.rmtree(ckpt, ignore_errors=True)
    return outcome


MEDIAN_FIELDS = ("rows_per_s", "rows_per_s_all", "batch0_ms", "median_batch_ms", "median_commit_ms",
                 "median_uploaded_bytes", "checkpoint_state_bytes", "state_memory_bytes", "wall_s", "latency_during_us",
                 "latency_before_us")


def combine_rounds(outcomes: list[dict]) -> dict:
    """One row per provider: the median of each number over its successful rounds; all rounds kept."""
    if len(outcomes) == 1:
        return outcomes[0]
    ok = [o for o in outcomes if o["status"] == "ok"]
    if not ok:
        return {**outcomes[-1], "rounds": outcomes}
    combined = {**ok[-1], "rounds": outcomes,
                "status": "ok" if len(ok) == len(outcomes) else f"ok in {len(ok)}/{len(outcomes)} rounds"}
    for key in MEDIAN_FIELDS:
        values = [o[key] for o in ok if o.get(key) is not None]
        combined[key] = median(values) if values else None
    combined.pop("per_batch", None)   # per round, under "rounds"
    return combined


def succeeded(result: dict) -> bool:
    return result["status"].startswith("ok")


def tail(path: str, lines: int) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        interesting = [l.rstrip() for l in fh if l.strip() and not l.startswith("\tat ")]
    return "\n".join(interesting[-lines:])


def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt_bytes(v: int | None) -> str:
    return "-" if v is None else human_bytes(v)


def markdown_table(results: list[dict]) -> str:
    rows = ["| provider | rows/s (excl. batch 0) | rows/s (all) | median batch ms | median commit ms "
            "| uploaded per commit | checkpoint on disk | state memory | state rows | status |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        rows.append(
            f"| {r['provider']} | {fmt_rate(r.get('rows_per_s'))} | {fmt_rate(r.get('rows_per_s_all'))} "
            f"| {fmt_ms(r.get('median_batch_ms'))} | {fmt_ms(r.get('median_commit_ms'))} "
            f"| {fmt_bytes(r.get('median_uploaded_bytes'))} "
            f"| {fmt_bytes(r.get('checkpoint_state_bytes'))} | {fmt_bytes(r.get('state_memory_bytes'))} "
            f"| {r.get('state_rows', '-') if r.get('state_rows') is not None else '-'} | {r['status']} |")
    return "\n".join(rows)


RATIO_FIELDS = (("rows_per_s", "throughput"), ("median_batch_ms", "median batch"),
                ("median_commit_ms", "median commit"), ("median_uploaded_bytes", "uploaded per commit"),
                ("checkpoint_state_bytes", "checkpoint bytes"),
                ("state_memory_bytes", "state memory"))


def ratio_table(results: list[dict], baseline: str) -> str:
    """`baseline ÷ other` for each metric: >1 means the baseline has more of it (better only for rows/s)."""
    base = next((r for r in results if r["provider"] == baseline and succeeded(r)), None)
    if base is None:
        return f"(no ratios: baseline '{baseline}' did not run successfully)"
    rows = [f"| {baseline} ÷ … | " + " | ".join(label for _, label in RATIO_FIELDS) + " |",
            "|---|" + "---:|" * len(RATIO_FIELDS)]
    for other in results:
        if other is base or not succeeded(other):
            continue
        cells = []
        for key, _ in RATIO_FIELDS:
            a, b = base.get(key), other.get(key)
            cells.append(f"{a / b:.2f}x" if a and b else "-")   # 0 = not reported by the provider
        rows.append(f"| {other['provider']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench-aggregation", description=__doc__.split("\n\n", 1)[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"small preset: {QUICK['batches']} batches x {QUICK['rows_per_batch']:,} rows")
    p.add_argument("--batches", type=int, help=f"micro-batches (default {DEFAULTS['batches']})")
    p.add_argument("--rows-per-batch", type=int, help=f"rows per batch (default {DEFAULTS['rows_per_batch']:,})")
    p.add_argument("--keys", type=int, help=f"key space (default {DEFAULTS['keys']:,})")
    p.add_argument("--shuffle-partitions", type=int, default=4, help="state store partitions (default 4)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="2g")
    p.add_argument("--providers", default=",".join(PROVIDERS),
                   help="comma-separated subset of " + ", ".join(PROVIDERS) + " (default: all)")
    p.add_argument("--baseline", default="sparkstate",
                   help="provider the ratios are computed for (default sparkstate; hdfs if it did not run)")
    p.add_argument("--backend", help="sparkstate backend setting (passed through)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark conf for every provider")
    p.add_argument("--variant", action="append", metavar="NAME:SETTING=VALUE[,SETTING=VALUE]",
                   help="a sparkstate run under another NAME with these sparkstate settings (keys without "
                        "the spark.sql.streaming.stateStore.sparkstate. prefix; a key starting with spark. is any "
                        "Spark conf), to list in --providers; e.g. --variant sparkstate-dict:heap.layout=dict, "
                        "--variant v2:spark.sql.streaming.stateStore.checkpointFormatVersion=2")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every provider this many times (order rotated each round) and report medians")
    p.add_argument("--workdir", help="input data, checkpoints and logs (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep each provider's checkpoint after its run")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per provider before giving up")
    p.add_argument("--out", default="bench-aggregation.json", help="JSON results (default: %(default)s)")
    # Internal: one provider in this process (spawned by the harness).
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    preset = QUICK if args.quick else DEFAULTS
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.provider_list = [x.strip() for x in args.providers.split(",") if x.strip()]
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    args.variants = {}
    for spec in args.variant or []:
        name, sep, settings = spec.partition(":")
        pairs = [x.strip() for x in settings.split(",") if x.strip()]
        if not sep or not name.strip() or name.strip() in PROVIDERS or not all("=" in x for x in pairs):
            p.error(f"--variant expects NAME:SETTING=VALUE[,SETTING=VALUE] with a new NAME, got {spec!r}")
        # a setting names a sparkstate setting, or with a `spark.` prefix any Spark conf
        args.variants[name.strip()] = [x if x.startswith("spark.") else STATE_PREFIX + "sparkstate." + x for x in pairs]
    unknown = [x for x in args.provider_list if x not in PROVIDERS and x not in args.variants]
    if unknown:
        p.error(f"unknown provider(s) {unknown}; expected {', '.join(PROVIDERS)}")
    return args


def run_header(started: dt.datetime) -> dict:
    """What every results file starts with: when, the command, and the machine with its load at the end."""
    return {
        "started_utc": started.isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "loadavg_end": os.getloadavg()},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_one:
        try:
            result = run_one(args)
        except ProviderUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        with open(args.result, "w", encoding="utf-8") as fh:
            json.dump(result, fh)
        return 0

    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sparkstate-bench-"))
    data_dir = os.path.join(args.workdir, "input")
    print(f"workdir {args.workdir}: {args.batches} batches x {args.rows_per_batch:,} rows over "
          f"{args.keys:,} keys, {args.shuffle_partitions} partitions, {args.master}", flush=True)
    t0 = time.monotonic()
    generate_input(data_dir, args.batches, args.rows_per_batch, args.keys)
    print(f"input ready in {time.monotonic() - t0:.1f} s", flush=True)

    started = dt.datetime.now(dt.timezone.utc)
    rounds: dict[str, list[dict]] = {p: [] for p in args.provider_list}
    for r in range(args.rounds):
        # Rotate the order each round so no provider always runs first (load on a shared VM drifts).
        order = args.provider_list[r % len(args.provider_list):] + args.provider_list[:r % len(args.provider_list)]
        if args.rounds > 1:
            print(f"-- round {r + 1}/{args.rounds}: {', '.join(order)}", flush=True)
        for provider in order:
            tag = f"-round{r + 1}" if args.rounds > 1 else ""
            rounds[provider].append(run_provider(provider, args, data_dir, tag))
    results = [combine_rounds(rounds[p]) for p in args.provider_list]
    baseline = args.baseline
    if not any(r["provider"] == baseline and succeeded(r) for r in results):
        fallback = "hdfs" if any(r["provider"] == "hdfs" and succeeded(r) for r in results) else None
        if fallback and fallback != baseline:
            print(f"\nbaseline {baseline!r} has no result; ratios are computed for {fallback!r} instead")
            baseline = fallback
    after = latency_probe.probe()
    state_rows = {r["provider"]: r.get("state_rows") for r in results if succeeded(r)}
    if len(set(state_rows.values())) > 1:
        print(f"\nWARNING: providers disagree on state rows {state_rows} (same input, so they should not; "
              "0 can also mean the provider does not report numRowsTotal)")

    print("\n" + markdown_table(results))
    print("\nratios (" + baseline + " ÷ other; throughput >1 = faster, the other columns >1 = more):\n")
    print(ratio_table(results, baseline))
    before = {r["provider"]: r.get("latency_mode_before") for r in results}
    during = {r["provider"]: round(r["latency_during_us"], 1) if r.get("latency_during_us") else None
              for r in results}
    print(f"\nlatency mode: before runs {before}; UDS ping p50 during runs (us) {during}; "
          f"after: {after.describe()}; load average {os.getloadavg()[0]:.2f}")

    report = {
        **run_header(started),
        "params": {k: getattr(args, k) for k in ("batches", "rows_per_batch", "keys", "shuffle_partitions",
                                                  "master", "driver_memory", "backend", "conf", "rounds")},
        "latency_after": {"p50_us": after.p50_us, "mode": after.mode},
        "baseline": baseline,
        "results": results,
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(f"JSON results: {os.path.abspath(args.out)}")
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
