"""History of a store for Spark's state data source: the writes each version made (the change feed,
`readChangeFeed`), and a version rebuilt from a chosen snapshot plus those writes (`snapshotStartBatchId`).

Both read what every commit records anyway, nothing else: a version's manifest names its change log
(`changeLog`: the journal of the batch's writes, journal.py; for the heap backend the version's delta).
A version's changes are the last write of each key in its batch, in the order of those last writes; a
remove is a write of None. A snapshot is a complete image of one version: for RocksDB every version's
checkpoint is one; for the heap backend its full snapshots (`full-<s>.arrow`), which Spark's maintenance
starts once `heap.snapshotEveryVersions` versions or more follow the last one
(`heap.snapshotMinDeltaPercent`). Version v is the state after batch v-1. Under checkpoint format v2 both follow the lineage of the end version's attempt
(`CheckpointFileManager.lineage`), the attempts Spark's commit log recorded. The writes of a version
with idle-state stamps (engine/ttl.py) come without them, as Spark wrote them; the deletes of expired
keys are deletes like any other.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterator

from ..checkpoint import CheckpointFileManager, Manifest
from ..errors import ChangeFeedError, VersionNotFoundError
from . import arrow_files as hf
from .ttl import strip_stamps


@dataclass(frozen=True)
class VersionChanges:
    version: int
    rows: list[tuple[bytes, bytes | None]]  # (storage key, value; None: removed)


def read_changes(fm: CheckpointFileManager, start: int, end: int, scratch_root: str,
                 end_checkpoint_id: str | None = None, *, as_stored: bool = False) -> Iterator[VersionChanges]:
    """The changes of versions `start`..`end` (inclusive), in version order; `scratch_root` is a local
    directory for the files while they are read. With `end_checkpoint_id` (format v2), those of the
    attempts `end`'s attempt was built on. `as_stored`: values with their idle-state stamps (a replay
    into a store), not as Spark wrote them."""
    if start < 1 or end < start:
        raise ChangeFeedError(f"versions {start}..{end} are not a range of committed versions (1 <= start <= end)")
    manifests = _lineage(fm, end, end_checkpoint_id, start, "changes")
    _refuse_versions_without_change_logs(fm, manifests, start, end)
    scratch = tempfile.mkdtemp(prefix="changes-", dir=_ensure(scratch_root))
    try:
        for manifest in reversed(manifests):
            yield VersionChanges(manifest.version, _changes_of(fm, manifest, scratch, as_stored))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _refuse_versions_without_change_logs(fm: CheckpointFileManager, manifests: list[Manifest], start: int,
                                        end: int) -> None:
    """Name the newest of the versions asked for whose batch kept no change log, and the batches that can
    be read: those after it."""
    lacking = [m.version for m in manifests if m.change_log is None and not m.changes_kept]
    if not lacking:
        return
    v = max(lacking)
    later = (f"Read the changes of the batches after it (changeStartBatchId >= {v})" if v < end else
             f"None of batches {start - 1}..{end - 1} keeps one after it")
    raise ChangeFeedError(
        f"version {v} (batch {v - 1}) at {fm.manifest_path(v)} keeps no change log: it was written by a "
        "rescale, or by the rocksdb backend without spark.sql.streaming.stateStore.sparkstate.rocksdb."
        f"changeLog=true (set it for the query so that the batches after that keep theirs). {later}")


def _changes_of(fm: CheckpointFileManager, manifest: Manifest, scratch: str,
                as_stored: bool) -> list[tuple[bytes, bytes | None]]:
    v = manifest.version
    if manifest.change_log is None:
        return []  # the batch wrote nothing (versions without a change log are refused up front)
    path = fm.fetch_to_cache(manifest.change_log, scratch, v)
    try:
        last: dict[bytes, bytes | None] = {}
        for keys, values in hf.read(path, hf.KIND_DELTA, v, fm.file_path(manifest.change_log.remote)):
            for key, value in zip(keys, values):
                last.pop(key, None)  # re-inserted: ordered by each key's last write
                last[key] = value
        rows = list(last.items())
        return strip_stamps(rows) if manifest.ttl_stamps and not as_stored else rows
    finally:
        os.remove(path)


def _lineage(fm: CheckpointFileManager, end: int, end_checkpoint_id: str | None, start: int,
             what: str) -> list[Manifest]:
    """The manifests of versions `end` down to `start` that `end` was built on: under checkpoint format v2
    each manifest names the attempt of its base (`baseCheckpointId`), which is followed; a version without
    an id is read as its `<v>.manifest`."""
    out: list[Manifest] = []
    checkpoint_id = end_checkpoint_id
    for version in range(end, start - 1, -1):
        try:
            manifest = fm.read_manifest(version, checkpoint_id)
        except VersionNotFoundError:
            retained = fm.versions()
            held = (f"versions {retained[0]}..{retained[-1]} (batches {retained[0] - 1}..{retained[-1] - 1})"
                    if retained else "no versions")
            attempt = f" attempt {checkpoint_id}" if checkpoint_id else ""
            raise ChangeFeedError(
                f"version {version} (batch {version - 1}){attempt}, needed for the {what} of batches {start - 1}.."
                f"{end - 1}, is not in the checkpoint at {fm.root}: it holds {held}; Spark keeps "
                "spark.sql.streaming.minBatchesToRetain versions") from None
        out.append(manifest)
        checkpoint_id = manifest.base_checkpoint_id
    return out


def snapshot_lineage(fm: CheckpointFileManager, snapshot: int, end: int,
                     end_checkpoint_id: str | None = None) -> list[Manifest]:
    """The manifests of versions `end` down to `snapshot` for a replay from the snapshot of `snapshot` to
    `end` (RocksDB: every version is a snapshot, the last one listed)."""
    return _lineage(fm, end, end_checkpoint_id, snapshot, "snapshot replay")


def _ensure(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path
