"""Heap backend, no Spark: what restoring one store costs a new worker process, in time and memory.

One heap store is written like a store of the recovery benchmark's query: version 1 writes `--keys` keys
(20-byte keys, 24-byte values, in `apply_batch` calls of 100,000), then `--deltas` versions each
rewrite `--written` random keys (and delete `--deletes` of them). Then each of `--runs` new Python
processes restores the last version (`Store.load`) and reports: the load's wall time, its user and
system CPU (the system part is mostly the kernel zeroing pages the process touches for the first
time), the process's peak resident memory, its resident memory after the load, the table's own
`memoryUsedBytes`, and whether pandas got imported. Medians over the runs are printed last.

With `--against DIR` every run is repeated, alternating, with the `provider/` package of another
checkout (e.g. `git worktree add /tmp/base <commit>`), so that one invocation compares two versions of
the restore on the same checkpoint and the same machine state; the two take turns at going first.

    python python/bench/heap_restore.py                          # 2.5M keys (a 10M-key query's store)
    python python/bench/heap_restore.py --keys 250000 --runs 7
    python python/bench/heap_restore.py --against /tmp/base      # this checkout against another
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

if not __package__:  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # python/
    from _checkout import ensure_sparkstate_jobs

    ensure_sparkstate_jobs()

from sparkstate_jobs import procfs  # noqa: E402

FIELDS = ("load_s", "user_s", "sys_s", "peak_mb", "resident_mb", "table_mb")


def _spec(checkpoint: str, instance: str, layout: str | None):
    from sparkstate.config import Settings
    from sparkstate.engine.spec import StoreSpec
    settings = dataclasses.replace(Settings(), backend="heap", **({"heap_layout": layout} if layout else {}))
    return StoreSpec.standalone("file:" + checkpoint, settings, instance, num_partitions=4)


def _key(i: int) -> bytes:
    return (i % 4096).to_bytes(4, "big") + b"\x00" * 8 + i.to_bytes(8, "big")  # key group, then the key


def write_checkpoint(args: argparse.Namespace, workdir: str) -> int:
    """The store's checkpoint in `workdir`/checkpoint; returns the last version."""
    from sparkstate.engine import Store
    store = Store(_spec(os.path.join(workdir, "checkpoint"), "writer", args.layout), os.path.join(workdir, "writer"))
    rnd = random.Random(args.seed)
    order = list(range(args.keys))
    rnd.shuffle(order)
    store.load(0)
    for i in range(0, args.keys, 100_000):
        store.apply_batch([(_key(j), b"v" * 16 + j.to_bytes(8, "big")) for j in order[i:i + 100_000]])
    store.commit()
    for v in range(1, args.deltas + 1):
        store.load(v)
        keys = [_key(rnd.randrange(args.keys)) for _ in range(args.written)]
        store.apply_batch([(k, b"w" * 16 + v.to_bytes(8, "big")) for k in keys])
        store.apply_batch([(k, None) for k in keys[:args.deletes]])
        store.commit()
    store.close()
    return args.deltas + 1


def _resident_mb(field: str = "VmRSS") -> float:
    return int(procfs.status(os.getpid())[field].split()[0]) / 1024   # "<n> kB"


def restore_once(workdir: str, version: int, layout: str | None) -> dict:
    """In this (new) process: restore the store and measure."""
    from sparkstate.engine import Store
    local = tempfile.mkdtemp(prefix="reader-", dir=workdir)
    store = Store(_spec(os.path.join(workdir, "checkpoint"), "reader", layout), local)
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    store.load(version)
    load_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    result = {"load_s": load_s, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
              "peak_mb": _resident_mb("VmHWM"), "resident_mb": _resident_mb(),
              "table_mb": store.metrics().memory_used_bytes / 2 ** 20, "pandas": "pandas" in sys.modules}
    store.close()
    shutil.rmtree(local, ignore_errors=True)
    return result


def _run_child(provider_dir: str, workdir: str, version: int, layout: str | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--restore", workdir, "--version", str(version)]
    if layout:
        cmd += ["--layout", layout]
    env = {**os.environ, "PYTHONPATH": provider_dir + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"restore with {provider_dir} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(label: str, r: dict) -> str:
    return (f"{label:<10} {r['load_s']:8.2f} {r['user_s']:8.2f} {r['sys_s']:8.2f} {r['peak_mb']:9.0f} "
            f"{r['resident_mb']:9.0f} {r['table_mb']:9.0f}  {'yes' if r.get('pandas') else 'no'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=2_500_000, help="keys of the store (default 2,500,000)")
    ap.add_argument("--deltas", type=int, default=5, help="versions after the fill (default 5)")
    ap.add_argument("--written", type=int, default=50_000, help="keys rewritten per version (default 50,000)")
    ap.add_argument("--deletes", type=int, default=0, help="of those, keys then deleted (default 0)")
    ap.add_argument("--runs", type=int, default=5, help="restores, each in a new process (default 5)")
    ap.add_argument("--layout", default=None, help="heap.layout (default: the setting's default)")
    ap.add_argument("--against", default=None, help="another checkout whose provider/ package also restores")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--restore", help=argparse.SUPPRESS)
    ap.add_argument("--version", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.restore:
        print(json.dumps(restore_once(args.restore, args.version, args.layout)))
        return 0
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "provider")
    sys.path.insert(0, here)
    workdir = tempfile.mkdtemp(prefix="heap-restore-")
    try:
        t = time.perf_counter()
        version = write_checkpoint(args, workdir)
        print(f"checkpoint: {args.keys:,} keys, {args.deltas} deltas of {args.written:,} writes "
              f"({args.deletes:,} deletes) in {time.perf_counter() - t:.1f} s; restoring version {version}, "
              f"{args.runs} runs each in a new process", flush=True)
        sides = [("this", here)] + ([("against", os.path.join(os.path.abspath(args.against), "provider"))]
                                    if args.against else [])
        print(f"{'':<10} {'load s':>8} {'user s':>8} {'sys s':>8} {'peak MB':>9} {'after MB':>9} "
              f"{'table MB':>9}  pandas")
        results: dict[str, list[dict]] = {label: [] for label, _ in sides}
        for run in range(args.runs):
            # The sides take turns at going first: with a fixed order, the side that went first took 0.2-0.3 s
            # more system time in every round here, whichever checkout it was.
            for label, provider_dir in (sides if run % 2 == 0 else sides[::-1]):
                r = _run_child(provider_dir, workdir, version, args.layout)
                results[label].append(r)
                print(_row(label, r), flush=True)
        print("medians")
        medians = {label: {f: statistics.median(r[f] for r in rs) for f in FIELDS} | {"pandas": rs[-1]["pandas"]}
                   for label, rs in results.items()}
        for label, m in medians.items():
            print(_row(label, m))
        if args.against:
            print(f"load ÷ against: {medians['this']['load_s'] / medians['against']['load_s']:.2f}x; "
                  f"peak ÷ against: {medians['this']['peak_mb'] / medians['against']['peak_mb']:.2f}x")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
