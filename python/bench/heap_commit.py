"""Heap backend, in process (no Spark): how long the synchronous part of a commit takes at a large state.

One heap `Store` is filled with `--keys` keys (20-byte keys, 24-byte values) and committed; then
`--commits` micro-batches each write `--written` random existing keys, handed to the store in
`apply_batch` calls of `--batch-records` records (the worker receives the JVM's rows in batches of up
to ~256 KiB: about 5,000 records of this size), and commit. Prints the medians over those commits of:
the O(1) copy-on-write freeze, the prepare phase, sparkstateFlushMs, the whole synchronous `commit()`
(what Spark waits for: delta durable + manifest), its max, the time spent in `apply_batch` per
micro-batch (where journaling, if any, happens), the last background full snapshot time,
`memoryUsedBytes` per key, how much of each commit was spent waiting in `os.fsync`, the commit
median split by whether a background full snapshot was being written at the time, and the median
fsync of a small file in the scratch directory (the disk's floor for any durable commit).

    python python/bench/heap_commit.py                       # 1M keys, 50k written per commit, 12 commits
    python python/bench/heap_commit.py --keys 200000 --written 10000 --commits 6
    python python/bench/heap_commit.py --layout dict         # the other live layout (heap.layout)
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000, help="state size (default 1,000,000)")
    ap.add_argument("--written", type=int, default=50_000, help="keys written per commit (default 50,000)")
    ap.add_argument("--commits", type=int, default=12, help="measured commits (default 12)")
    ap.add_argument("--batch-records", type=int, default=5000,
                    help="records per apply_batch call (default 5,000, ~256 KiB like the JVM's batches)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a new temp dir, removed after)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layout", default=None, help="heap.layout (default: the setting's default)")
    args = ap.parse_args()

    from sparkstate.config import Settings
    from sparkstate.engine import Store, StoreSpec

    scratch = args.dir or tempfile.mkdtemp(prefix="sparkstate-heap-commit-")
    os.makedirs(scratch, exist_ok=True)
    spec = StoreSpec.standalone("file:" + os.path.join(scratch, "ckpt"),
                                dataclasses.replace(Settings(), backend="heap",
                                                    **({"heap_layout": args.layout} if args.layout else {})))
    n, w, step = args.keys, args.written, max(1, args.batch_records)

    def key(i: int) -> bytes:  # 20 bytes: a key group (4 bytes, big-endian) + 16 bytes
        return (i % 977).to_bytes(4, "big") + i.to_bytes(16, "little")

    s = Store(spec, os.path.join(scratch, "local"))
    try:
        s.load(0)
        for c in range(0, n, 100_000):
            s.apply_batch([(key(i), b"\0" * 8 + i.to_bytes(16, "little")) for i in range(c, min(n, c + 100_000))])
        t = time.perf_counter()
        s.commit()
        print(f"initial commit of {n:,} keys: {1000 * (time.perf_counter() - t):.0f} ms")
        backend = s._backend
        prep: list[float] = []
        orig = backend.prepare_snapshot

        def timed(version):
            t0 = time.perf_counter()
            r = orig(version)
            prep.append(1000 * (time.perf_counter() - t0))
            return r

        backend.prepare_snapshot = timed
        in_fsync = [0.0]
        real_fsync = os.fsync

        def timed_fsync(fd):
            t0 = time.perf_counter()
            try:
                return real_fsync(fd)
            finally:
                in_fsync[0] += time.perf_counter() - t0

        os.fsync = timed_fsync  # to split the commit into fsync waits and the rest
        rng = random.Random(args.seed)
        commit, flush, apply, commit_fsync, busy = [], [], [], [], []
        for v in range(2, args.commits + 2):
            s.load(v - 1)
            records = [(key(rng.randrange(n)), b"\1" * 24) for _ in range(w)]
            t = time.perf_counter()
            for i in range(0, len(records), step):
                s.apply_batch(records[i:i + step])
            apply.append(1000 * (time.perf_counter() - t))
            in_fsync[0] = 0.0
            busy.append(backend.runner.busy)
            t = time.perf_counter()
            m = s.commit().metrics
            commit.append(1000 * (time.perf_counter() - t))
            commit_fsync.append(1000 * in_fsync[0])
            flush.append(m["sparkstateFlushMs"])
        os.fsync = real_fsync
        freeze = []
        for _ in range(1000):
            t = time.perf_counter()
            view = backend._map.freeze(None)
            freeze.append(1e6 * (time.perf_counter() - t))
            backend._map.retire(view)
        fsyncs = []  # the disk's floor: a durable commit needs at least the delta and the manifest fsynced
        probe = os.path.join(scratch, "fsync-probe")
        for i in range(20):
            with open(probe, "wb") as f:
                f.write(b"x" * 1024)
                f.flush()
                t = time.perf_counter()
                os.fsync(f.fileno())
                fsyncs.append(1000 * (time.perf_counter() - t))
        os.remove(probe)
        s.load(args.commits + 1)
        backend.wait_for_background(300)
        met = s.metrics()
        last = backend.runner.last_result
        print(f"keys={met.num_keys:,} memoryUsedBytes={met.memory_used_bytes:,} "
              f"({met.memory_used_bytes / max(1, met.num_keys):.0f} B/key)")
        print(f"freeze (O(1) view) median {statistics.median(freeze):.1f} us")
        print(f"prepare median {statistics.median(prep):.2f} ms")
        print(f"sparkstateFlushMs median {statistics.median(flush):.0f} ms")
        print(f"whole sync commit (incl. manifest) median {statistics.median(commit):.2f} ms, "
              f"max {max(commit):.2f} ms over {len(commit)} commits of {w:,} written keys")
        print(f"  of which waiting in os.fsync: median {statistics.median(commit_fsync):.2f} ms; "
              f"the rest: median {statistics.median(c - f for c, f in zip(commit, commit_fsync)):.2f} ms")
        for label, flag in (("idle", False), ("writing", True)):
            sel = [c for c, b in zip(commit, busy) if b == flag]
            if sel:
                print(f"  commits while the background full snapshot was {label}: {len(sel)}, median "
                      f"{statistics.median(sel):.2f} ms")
        print(f"fsync of a 1 KiB file in the scratch directory median {statistics.median(fsyncs):.2f} ms")
        print(f"apply_batch per micro-batch ({w:,} records in calls of {step:,}) median "
              f"{statistics.median(apply):.0f} ms")
        print(f"background full snapshot of {met.num_keys:,} keys: "
              f"{'%d ms' % last.timings.upload_ms if last else 'none completed'}")
    finally:
        s.close()
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
