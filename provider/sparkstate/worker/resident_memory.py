"""A worker process's resident memory, and each store's share of it, for the query's custom metrics.

The stores' memory lives in the worker processes beside the executor JVM, where a cluster manager counts it
in the container (not in the JVM heap). Each store reports `sparkstateWorkerRssBytes`: its worker's resident
set size divided by the stores that worker holds, so that the shares of all stores sum to the workers'
resident memory (Spark sums a custom metric over the operator's tasks).
"""
from __future__ import annotations

import os

METRIC = "sparkstateWorkerRssBytes"


def process_rss_bytes(statm_path: str = "/proc/self/statm") -> int:
    """Resident set size of the process whose `statm` this is, in bytes; 0 where /proc cannot be read."""
    try:
        with open(statm_path, "rb") as f:
            fields = f.read().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def store_share(rss_bytes: int, stores: int) -> int:
    """One store's share of its worker's resident memory."""
    return rss_bytes // max(1, stores)
