"""A stopped query's checkpoint, as the tools that rewrite it name and guard it.

A rewrite changes files the query reads and writes, so it runs only while the query is stopped. Within the
session that runs the rewrite that is checked here (another session's query on the same checkpoint is
caught by the put-if-absent writes of Spark's logs, `batch.py`).
"""
from __future__ import annotations

import os
from typing import Any

from ..checkpoint.spark_logs import OffsetEntry, SparkLogs
from ..errors import CheckpointError
from ..storage import FileIO
from ..storage.local import local_path_or_none
from .tool import RewriteTool


def normalize_checkpoint(path: str) -> str:
    """Local paths (plain or `file:` URIs) as absolute paths; other URIs as given."""
    local = local_path_or_none(path)
    if local is None:
        return path.rstrip("/")
    return os.path.abspath(local)


def settled_last_batch(fio: FileIO, checkpoint: str) -> OffsetEntry | None:
    """The offset log entry of the last committed batch when no batch started after it, read from the logs
    alone (what a tool run again checks before it starts Spark); None when one did, or when the logs cannot
    be read (the tool's job reads them again and says what is wrong)."""
    logs = SparkLogs(fio, checkpoint)
    try:
        offsets, commits = logs.committed()
        if offsets[-1] != commits[-1]:
            return None
        return logs.read_offset(commits[-1])
    except (CheckpointError, OSError):
        return None


def refuse_if_running(spark: Any, checkpoint: str, tool: RewriteTool) -> None:
    """Raise the tool's error when one of `spark`'s active queries runs on `checkpoint` (normalized)."""
    for query in spark.streams.active:
        try:
            root = str(query._jsq.streamingQuery().resolvedCheckpointRoot())
        except Exception:  # noqa: BLE001 - best effort; other guards follow
            continue
        if normalize_checkpoint(root) == checkpoint:
            raise tool.error(f"query {query.name or query.id} is running on {checkpoint}; stop it "
                             f"(query.stop()) before {tool.gerund} its state")
