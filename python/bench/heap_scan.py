"""Heap backend, in process (no Spark): how long a whole-store scan takes (e.g. watermark eviction).

A heap VersionedMap is filled with `--keys` keys (20-byte keys, 24-byte values), a view is frozen and
`--written` keys are rewritten after it (so the scan reads through a before image), then a scan cursor
is opened and drained in the worker's chunks (4,096 rows / 1 MiB) `--repeats` times per layout.
Prints the median open and drain times per `heap.layout`.

    python python/bench/heap_scan.py                      # 250k keys, 40k written, both layouts
"""
from __future__ import annotations

import argparse
import random
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=250_000, help="state size (default 250,000: one of 4 stores at 1M)")
    ap.add_argument("--written", type=int, default=40_000, help="keys rewritten after the view (default 40,000)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from sparkstate.config import HEAP_LAYOUTS
    from sparkstate.engine.heap.cursors import HeapScanCursor
    from sparkstate.engine.heap.versioned_map import VersionedMap
    from sparkstate.worker.dispatcher import CHUNK_MAX_BYTES, CHUNK_MAX_ROWS

    for layout in HEAP_LAYOUTS:
        rnd = random.Random(1)
        data = {rnd.randbytes(20): rnd.randbytes(24) for _ in range(args.keys)}
        m = VersionedMap(data, prefix_index=False, layout=layout)
        m.freeze(1)
        m.apply([(k, b"x" * 24) for k in list(data)[:args.written]])
        opens, drains = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            cursor = HeapScanCursor(m, b"", None)
            t1 = time.perf_counter()
            rows, done = 0, False
            while not done:
                chunk, done = cursor.next_chunk(CHUNK_MAX_ROWS, CHUNK_MAX_BYTES)
                rows += len(chunk)
            assert rows == len(data)
            opens.append(t1 - t0)
            drains.append(time.perf_counter() - t1)
        print(f"layout={layout} keys={len(data):,} open median {statistics.median(opens) * 1e3:.0f} ms, "
              f"drain median {statistics.median(drains) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
