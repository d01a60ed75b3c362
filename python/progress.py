"""Flatten `StreamingQueryProgress` into the few numbers the demo prints and the benchmarks aggregate.

Spark reports state per stateful operator (`progress.stateOperators[i]`); a query with a deduplication
and a session window has two. `BatchStats` sums the per-operator numbers and keeps each operator's row
so the demo can show both. Custom metrics whose name starts with `sparkstate` come from our provider
(the built-in providers report their own, e.g. `rocksdbCommitFlushLatency`, which we keep too).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

OUR_METRIC_PREFIX = "sparkstate"


def progress_dict(progress: Any) -> dict[str, Any]:
    """A plain dict from a `StreamingQueryProgress` object, a JSON string, or a dict."""
    if isinstance(progress, dict):
        return progress
    if isinstance(progress, str):
        return json.loads(progress)
    return json.loads(progress.json)


@dataclass(frozen=True)
class OperatorStats:
    name: str
    rows_total: int
    rows_updated: int
    rows_removed: int
    rows_dropped_by_watermark: int
    memory_bytes: int
    commit_ms: int
    updates_ms: int           # allUpdatesTimeMs: gets and puts of the batch's rows, summed over tasks
    removals_ms: int          # allRemovalsTimeMs: the watermark's eviction, summed over tasks
    custom: dict[str, int] = field(default_factory=dict)

    @property
    def ours(self) -> dict[str, int]:
        return {k: v for k, v in self.custom.items() if k.startswith(OUR_METRIC_PREFIX)}


@dataclass(frozen=True)
class BatchStats:
    batch_id: int
    input_rows: int
    duration_ms: int          # durationMs.triggerExecution: the whole micro-batch
    add_batch_ms: int         # durationMs.addBatch: running the plan, including state store commits
    watermark: str | None
    operators: tuple[OperatorStats, ...]

    @property
    def state_rows(self) -> int:
        return sum(op.rows_total for op in self.operators)

    @property
    def state_memory_bytes(self) -> int:
        return sum(op.memory_bytes for op in self.operators)

    @property
    def commit_ms(self) -> int:
        return sum(op.commit_ms for op in self.operators)

    @property
    def updates_ms(self) -> int:
        return sum(op.updates_ms for op in self.operators)

    @property
    def removals_ms(self) -> int:
        return sum(op.removals_ms for op in self.operators)

    @classmethod
    def from_progress(cls, progress: Any) -> "BatchStats":
        p = progress_dict(progress)
        ops = tuple(
            OperatorStats(
                name=op.get("operatorName", "?"),
                rows_total=int(op.get("numRowsTotal", 0)),
                rows_updated=int(op.get("numRowsUpdated", 0)),
                rows_removed=int(op.get("numRowsRemoved", 0)),
                rows_dropped_by_watermark=int(op.get("numRowsDroppedByWatermark", 0)),
                memory_bytes=int(op.get("memoryUsedBytes", 0)),
                commit_ms=int(op.get("commitTimeMs", 0)),
                updates_ms=int(op.get("allUpdatesTimeMs", 0)),
                removals_ms=int(op.get("allRemovalsTimeMs", 0)),
                custom={k: int(v) for k, v in (op.get("customMetrics") or {}).items()},
            )
            for op in p.get("stateOperators") or []
        )
        durations = p.get("durationMs") or {}
        return cls(
            batch_id=int(p["batchId"]),
            input_rows=int(p.get("numInputRows", 0)),
            duration_ms=int(durations.get("triggerExecution", 0)),
            add_batch_ms=int(durations.get("addBatch", 0)),
            watermark=(p.get("eventTime") or {}).get("watermark"),
            operators=ops,
        )


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def median(values: list[float]) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
