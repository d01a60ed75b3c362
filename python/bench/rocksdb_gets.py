"""RocksDB backend, in process (no Spark): the cost of a get as a store outgrows its block cache, per read
setting.

For each key count and setting, fills one database with the backend's options (`make_options`) and
20-byte keys with 24-byte values in random order, flushing every 400k writes, waits for its
compactions, then times `--gets` random gets of existing keys, median of `--repeats` rounds. 2.5M keys
is one store's share of a 10M-key query in four partitions; 250k of a 1M-key one.

    python python/bench/rocksdb_gets.py            # --keys 250000,2500000
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import statistics
import tempfile
import time

# setting name -> Settings fields it changes
SETTINGS: dict[str, dict[str, object]] = {
    "defaults": {},
    "uncompressed": {"rocksdb_compression": "none"},
    "mapped": {"rocksdb_mmap_reads": True},
    "mapped+uncompressed": {"rocksdb_mmap_reads": True, "rocksdb_compression": "none"},
    "cache 256 MiB": {"rocksdb_block_cache_mb": 256},
}
FLUSH_EVERY = 400_000


def _key(i: int) -> bytes:
    """A storage key: a key group spread over the 32 bits, then a 16-byte body."""
    from sparkstate.keygroups import storage_key

    group = i * 2654435761 % 2**32
    return storage_key(group - 2**32 if group >= 2**31 else group, bytes(8) + i.to_bytes(8, "little"))


def _time_gets(n: int, fields: dict[str, object], gets: int, repeats: int) -> tuple[list[float], int]:
    """Microseconds per get for each round, and the database's SST bytes."""
    import rocksdict

    from sparkstate.config import Settings
    from sparkstate.engine.rocksdb.block_cache import BlockCacheLease
    from sparkstate.engine.rocksdb.options import make_options

    settings = dataclasses.replace(Settings(), **fields)
    lease = BlockCacheLease(settings.rocksdb_block_cache_mb)  # the worker's cache, as the backend takes it
    path = tempfile.mkdtemp(prefix="sparkstate-gets-")
    db = rocksdict.Rdict(path, make_options(settings, lease.cache))
    try:
        wo = rocksdict.WriteOptions()
        wo.disable_wal = True
        db.set_write_options(wo)
        order = list(range(n))
        random.Random(2).shuffle(order)
        value = bytes(8) + b"v" * 16
        for start in range(0, n, 100_000):
            batch = rocksdict.WriteBatch(raw_mode=True)
            for i in order[start:start + 100_000]:
                batch.put(_key(i), value)
            db.write(batch)
            if (start + 100_000) % FLUSH_EVERY == 0:
                db.flush()
        db.flush()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (db.property_int_value("rocksdb.num-running-compactions")
                                               or db.property_int_value("rocksdb.estimate-pending-compaction-bytes")):
            time.sleep(0.1)
        rnd = random.Random(1)
        rounds = []
        for _ in range(repeats):
            probes = [_key(rnd.randrange(n)) for _ in range(gets)]
            get = db.get
            t = time.perf_counter()
            for k in probes:
                get(k)
            rounds.append((time.perf_counter() - t) / gets * 1e6)
        return rounds, db.property_int_value("rocksdb.live-sst-files-size") or 0
    finally:
        db.close()
        lease.release()
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="250000,2500000", help="comma-separated key counts per store")
    ap.add_argument("--gets", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated subset of: "
                    + ", ".join(SETTINGS))
    args = ap.parse_args()
    chosen = [s.strip() for s in args.settings.split(",") if s.strip()]
    for name in chosen:
        if name not in SETTINGS:
            ap.error(f"unknown setting {name!r}; choose from: {', '.join(SETTINGS)}")
    print("| keys | setting | µs per get, median (min-max) | ÷ defaults | SST MiB |")
    print("|---:|---|---:|---:|---:|")
    for n in (int(k) for k in args.keys.split(",")):
        base = None
        for name in chosen:
            rounds, sst = _time_gets(n, SETTINGS[name], args.gets, args.repeats)
            median = statistics.median(rounds)
            base = median if name == "defaults" else base
            ratio = f"{median / base:.2f}x" if base else "-"
            print(f"| {n:,} | {name} | {median:.2f} ({min(rounds):.2f}-{max(rounds):.2f}) | {ratio} | "
                  f"{sst / 2**20:.0f} |", flush=True)


if __name__ == "__main__":
    main()
