"""Synthetic clickstream for the demo: one JSON-lines file per micro-batch, resumable across runs.

Each file covers one minute of event time and holds `rows` events `{event_id, user, page, ts}`:
- users are skewed (a few heavy users, a long tail), so session lengths vary;
- about 4% of events are re-deliveries of an earlier event (same event_id and timestamp), half of them
  from the previous file, so deduplication needs state that survives a micro-batch;
- about 1% of events arrive 5 minutes late, behind the query's watermark, and are dropped by Spark.

The generator's position (next file number, clock, recent events for re-delivery) is saved in
`<workdir>/generator.json`, so running the demo again appends the next chunk instead of repeating one.
Everything is derived from a seed and the file number: the same workdir history gives the same files.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import random
from dataclasses import asdict, dataclass, field

EPOCH = dt.datetime(2025, 1, 6, 9, 0, 0, tzinfo=dt.timezone.utc)
MINUTE = 60.0
DUPLICATE_SHARE = 0.04
LATE_SHARE = 0.01
LATE_BY_SECONDS = 300.0
PAGES = ("/", "/search", "/product", "/product/reviews", "/cart", "/checkout")
PAGE_WEIGHTS = (20, 25, 35, 8, 8, 4)


@dataclass
class GeneratorState:
    seed: int = 7
    next_file: int = 0
    carry: list[dict] = field(default_factory=list)   # recent events of the previous file, for re-delivery
    generated: int = 0
    duplicates: int = 0
    late: int = 0

    @classmethod
    def load(cls, path: str) -> "GeneratorState":
        if not os.path.exists(path):
            return cls()
        with open(path, encoding="utf-8") as fh:
            return cls(**json.load(fh))

    def save(self, path: str) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(asdict(self), fh)
        os.replace(tmp, path)


@dataclass(frozen=True)
class Chunk:
    files: list[str]
    events: int
    duplicates: int
    late: int


def _iso(seconds: float) -> str:
    return (EPOCH + dt.timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _file_events(state: GeneratorState, number: int, rows: int) -> tuple[list[dict], int, int]:
    rng = random.Random(state.seed * 1_000_003 + number)
    n_users = max(50, rows // 5)
    cum_users = list(itertools.accumulate(1.0 / (i + 1) ** 0.8 for i in range(n_users)))
    start = number * MINUTE
    n_dups = int(rows * DUPLICATE_SHARE)
    n_late = int(rows * LATE_SHARE)
    n_fresh = rows - n_dups
    users = rng.choices(range(n_users), cum_weights=cum_users, k=n_fresh)
    pages = rng.choices(PAGES, weights=PAGE_WEIGHTS, k=n_fresh)
    fresh = []
    for i in range(n_fresh):
        offset = rng.random() * MINUTE
        ts = start - LATE_BY_SECONDS + offset if i < n_late else start + offset
        fresh.append({"event_id": f"e{number:05d}-{i:06d}", "user": f"user-{users[i]:05d}",
                      "page": pages[i], "ts": _iso(ts)})
    # Re-deliveries: half from the previous file (the carry), half from this one.
    pool_prev = state.carry or fresh
    dups = [dict(rng.choice(pool_prev if j % 2 == 0 else fresh)) for j in range(n_dups)]
    events = fresh + dups
    rng.shuffle(events)
    return events, n_dups, n_late


def generate(workdir: str, input_dir: str, files: int, rows: int) -> Chunk:
    """Append `files` new input files of `rows` events each to `input_dir`; return what was written."""
    os.makedirs(input_dir, exist_ok=True)
    state_path = os.path.join(workdir, "generator.json")
    state = GeneratorState.load(state_path)
    written, dups_total, late_total = [], 0, 0
    for _ in range(files):
        number = state.next_file
        events, n_dups, n_late = _file_events(state, number, rows)
        path = os.path.join(input_dir, f"events-{number:05d}.json")
        # Write under a hidden name and rename: Spark's file source ignores names starting with '.'.
        tmp = os.path.join(input_dir, f".events-{number:05d}.json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for event in events:
                fh.write(json.dumps(event, separators=(",", ":")) + "\n")
        os.replace(tmp, path)
        written.append(path)
        dups_total += n_dups
        late_total += n_late
        state.next_file = number + 1
        state.carry = [e for e in events if e["event_id"].startswith(f"e{number:05d}-")][-50:]
        state.generated += len(events)
        state.duplicates += n_dups
        state.late += n_late
    state.save(state_path)
    return Chunk(files=written, events=len(written) * rows, duplicates=dups_total, late=late_total)
