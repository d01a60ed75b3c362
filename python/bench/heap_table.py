"""Heap backend, in process (no Spark): per-operation cost and memory of the live table layouts.

Fills each `heap.layout` with `--keys` keys (20-byte keys, 24-byte values, like one store's share of
the aggregation benchmark), then times `--ops` random gets and same-size puts of existing keys (fresh
key objects, as the data channel hands them over), median of `--repeats`; memory per key is measured
with tracemalloc while the table is filled by puts.

    python python/bench/heap_table.py
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=250_000)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from sparkstate.config import HEAP_LAYOUTS
    from sparkstate.engine.heap.live_table import new_live_table

    rnd = random.Random(3)
    keys = [rnd.randbytes(20) for _ in range(args.keys)]
    values = [rnd.randbytes(24) for _ in range(args.keys)]
    probes = [bytes(bytearray(k)) for k in rnd.sample(keys, min(args.ops, args.keys))]
    new_value = b"y" * 24
    for layout in HEAP_LAYOUTS:
        tracemalloc.start()
        table = new_live_table(layout)
        for k, v in zip(keys, values):
            table.put(bytes(bytearray(k)), bytes(bytearray(v)))
        allocated = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        get, put = table.get, table.put
        gets, puts = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for k in probes:
                get(k)
            t1 = time.perf_counter()
            for k in probes:
                put(k, new_value)
            t2 = time.perf_counter()
            gets.append((t1 - t0) / len(probes) * 1e6)
            puts.append((t2 - t1) / len(probes) * 1e6)
        print(f"layout={layout} keys={len(table):,} get {statistics.median(gets):.2f} us, "
              f"put {statistics.median(puts):.2f} us, memory {allocated / len(table):.1f} B/key "
              f"(tracemalloc; the table's own estimate {table.memory_bytes() / len(table):.1f})")
        del table


if __name__ == "__main__":
    main()
