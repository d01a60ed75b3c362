"""Which commit attempt of a version Spark recorded, for the tools that read a checkpoint outside a query
(`sparkstate verify`, `sparkstate inspect`).

Under checkpoint format v2 every commit of a store is an attempt with its own manifest
`<v>_<checkpointId>.manifest`, and `<v>.manifest` is a copy of whichever attempt was published last. That
need not be the attempt Spark kept: a speculative or zombie task can commit after the task whose result
the driver recorded. Spark's commit log entry of batch v-1 names, per operator and partition, one attempt
id per store of that partition (`stateUniqueIds`); a store's own is the one whose attempt manifest it
holds (ids are unique). Without ids (format v1, or no commit log entry for the batch) a version is its
`<v>.manifest`.
"""
from __future__ import annotations

from typing import Iterable

from ..errors import CheckpointError
from .file_manager import CheckpointFileManager, check_checkpoint_id, parse_manifest_name
from .manifest import Manifest
from .spark_logs import SparkLogs


class RecordedAttempts:
    """The attempt ids Spark's commit log records per version, read lazily (one commit entry per batch)."""

    def __init__(self, logs: SparkLogs, commit_batches: Iterable[int]) -> None:
        self._logs = logs
        self._batches = set(commit_batches)
        self._ids: dict[int, dict[str, list[list[str]]] | None] = {}

    def candidates(self, version: int, operator: int, partition: int) -> list[str] | None:
        """The ids recorded for the stores of `partition` of `operator` at `version`, or None when the commit
        log records none (format v1, or batch version-1 has no entry). Raises SparkCheckpointError for an
        unreadable entry."""
        batch = version - 1
        if batch not in self._batches:
            return None
        if batch not in self._ids:
            self._ids[batch] = self._logs.read_commit(batch).state_unique_ids
        ids = self._ids[batch]
        if ids is None:
            return None
        parts = ids.get(str(operator)) or []
        return parts[partition] if partition < len(parts) else []


def held_attempt(fm: CheckpointFileManager, version: int, candidates: list[str],
                 manifest_names: Iterable[str] | None = None) -> int | None:
    """Index in `candidates` of the attempt whose manifest of `version` this store holds, or None when it
    holds none of them. Ids are unique, so at most one matches. `manifest_names` are the names in the
    store's manifests directory when the caller has listed it; without them each candidate is looked up."""
    if manifest_names is not None:
        held = {p[1] for name in manifest_names if (p := parse_manifest_name(name)) and p[0] == version}
        return next((i for i, c in enumerate(candidates) if c in held), None)
    return next((i for i, c in enumerate(candidates)
                 if fm.fileio.exists(fm.manifest_path(version, check_checkpoint_id(c)))), None)


def read_recorded_manifest(fm: CheckpointFileManager, version: int, candidates: list[str] | None,
                           manifest_names: Iterable[str]) -> Manifest:
    """The manifest a reader of `version` must take: the recorded attempt's, i.e. the candidate this store
    holds an attempt manifest of (`manifest_names`: the names in its manifests directory), or `<v>.manifest`
    when nothing is recorded."""
    if candidates is None:
        return fm.read_manifest(version)
    hit = held_attempt(fm, version, candidates, manifest_names)
    if hit is None:
        raise CheckpointError(
            f"Spark's commit log (batch {version - 1}) records the attempts {', '.join(candidates) or 'none'} for "
            f"this store's partition, and {fm.manifests_dir} holds the manifest of none of them for version "
            f"{version}: the state is not the one the commit log was written with")
    return fm.read_manifest(version, candidates[hit])
