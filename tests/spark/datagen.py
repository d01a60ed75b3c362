"""Deterministic input data for the operator tests.

Event times are whole seconds in column `t` (a long), turned into a timestamp by `event_time()`.
File `i` holds events with `t` in `[BASE + BUCKET*i, BASE + BUCKET*(i+1))`, so with a watermark
delay of at least 10 s no row is ever late: the watermark during batch `i` is at most
`BASE + BUCKET*i - 1 - delay`. Tests then account only for rows the watermark has not yet released.
"""
from __future__ import annotations

import random
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

BASE = 1_700_000_000  # seconds
BUCKET = 20           # seconds of event time per input file

EVENT_SCHEMA = StructType([
    StructField("id", StringType()),
    StructField("k", StringType()),
    StructField("v", LongType()),
    StructField("t", LongType()),
])


def event_time(name: str = "t") -> Column:
    return F.timestamp_seconds(F.col(name))


def bucket_of(t: int, n_files: int) -> int:
    return min(max((t - BASE) // BUCKET, 0), n_files - 1)


def into_files(rows: list[dict[str, Any]], n_files: int, column: str = "t") -> list[list[dict[str, Any]]]:
    """Distribute rows into files by event-time bucket (each file keeps the generation order)."""
    files: list[list[dict[str, Any]]] = [[] for _ in range(n_files)]
    for row in rows:
        files[bucket_of(row[column], n_files)].append(row)
    assert all(files), "every file needs at least one row so the watermark advances per batch"
    return files


def random_events(seed: int, n_files: int, per_file: int, n_keys: int, v_range: int = 100
                  ) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n_files):
        for j in range(per_file):
            rows.append({"id": f"e{i}-{j}", "k": f"k{rng.randrange(n_keys)}", "v": rng.randrange(v_range),
                         "t": BASE + BUCKET * i + rng.randrange(BUCKET)})
    return into_files(rows, n_files)


def advance_row(n_files: int, key: str = "zz-advance", offset: int = 10_005) -> dict[str, Any]:
    """A row far in event time, to push the watermark past everything before it.

    The offset is deliberately not a multiple of 10 so the final watermark never equals a window end.
    """
    return {"id": f"adv-{key}", "k": key, "v": 0, "t": BASE + BUCKET * n_files + offset}


def max_t(files: list[list[dict[str, Any]]]) -> int:
    return max(row["t"] for rows in files for row in rows)
