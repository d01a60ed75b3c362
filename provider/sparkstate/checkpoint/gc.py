"""Orphan collection (`sparkstate gc`): what retention never deletes, collected offline.

Retention deletes only the files of the manifests it drops, so three kinds of leftovers need this tool:

- **Orphan files**: files under `<store>/sparkstate/files/` that no manifest lists, left by crashed or
  losing commit attempts. A file is an orphan when all of these hold:
    1. no manifest of the store (`N.manifest`, an attempt's `N_<checkpointId>.manifest` under checkpoint
       format v2, or a legacy `N.superseded-*` record) lists it;
    2. no manifest may still adopt it (`Manifest.may_adopt`): a commit after version v may name a heap
       full snapshot of a version in [adoptableFrom, v] that finished in the background, however long the
       stream then stays idle;
    3. it is older than the store's newest manifest, and older than `grace_s` (default 1 hour): the files
       of a commit in flight are newer than every manifest that existed when it started, and the grace
       period also covers clock skew and a commit slower than that.
  Manifests are read before `files/` is listed, so a file published after the manifest scan is too young.
- **Stray manifests**: with the query's checkpoint (`spark_logs`), manifests of versions beyond what the
  query can have committed or be committing (the newest commit log batch + 2) that are older than the
  grace period, e.g. left behind by a roll-back. Retention ignores them; this deletes them.
- **Abandoned partitions**: stores of partitions at or above the query's partition count (the newest
  offset log entry), left by a rescale to fewer partitions, once every version they hold is older than
  every version the remaining partitions retain (no retained batch can need them any more).

Retention and gc may delete the same file; deletes of missing files are ignored. Store discovery is a
recursive listing of the state root (`<checkpoint>/state`, or the query's directory under
`stateLocation`), done once per run: gc is an operator's tool, never on the commit path.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field

from ..errors import CheckpointError, CorruptCheckpointError
from ..storage import FileIO, fileio_for
from .file_manager import _SUPERSEDED_RE, CheckpointFileManager, parse_manifest_name
from .location import discover_stores
from .manifest import Manifest
from .spark_logs import SparkLogs

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 3600.0
_STORE_RE = re.compile(r"^(\d+)/(\d+)(?:/(.+))?$")  # <op>/<part>[/<storeName>] below the state root


@dataclass
class StoreGc:
    store: str                      # the store's location (above `sparkstate/`)
    versions: int = 0
    files: int = 0
    orphans: list[str] = field(default_factory=list)   # remote names
    orphan_bytes: int = 0
    young_unreferenced: int = 0     # unreferenced but inside the grace period / newer than the newest manifest
    adoptable: int = 0              # unreferenced, but a commit after a kept version may still name them
    stray_manifests: list[int] = field(default_factory=list)  # versions beyond what the query committed
    stray_names: list[str] = field(default_factory=list)      # their manifest files (attempts included)
    abandoned: bool = False         # a partition a rescale left behind, deleted whole
    skipped: str | None = None      # why nothing was deleted


@dataclass
class GcReport:
    stores: list[StoreGc] = field(default_factory=list)
    deleted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def orphans(self) -> int:
        return sum(len(s.orphans) for s in self.stores)

    @property
    def orphan_bytes(self) -> int:
        return sum(s.orphan_bytes for s in self.stores)


@dataclass(frozen=True)
class _QueryState:
    """What Spark's logs say: the newest committed batch and the current state partition count."""

    last_batch: int | None
    num_partitions: int | None


def collect_garbage(root: str, fileio: FileIO | None = None, *, dry_run: bool = False,
                    grace_s: float = DEFAULT_GRACE_S, now: float | None = None,
                    spark_logs: SparkLogs | None = None) -> GcReport:
    """Find (and unless `dry_run`, delete) the leftovers of every store under the state root `root`;
    stray manifests and abandoned partitions only with the query's `spark_logs`."""
    io = fileio if fileio is not None else fileio_for(root)
    now = time.time() if now is None else now
    stores = discover_stores(root, io)
    report = GcReport(deleted=not dry_run)
    query = _query_state(spark_logs, report)
    by_store: dict[str, tuple[StoreGc, dict[int, Manifest]]] = {}
    for rel in stores:
        location = io.join(root, rel) if rel else root
        result, manifests = _collect_store(location, io, dry_run, grace_s, now, query)
        report.stores.append(result)
        by_store[rel] = (result, manifests)
    if query.num_partitions is not None:
        _collect_abandoned(by_store, query.num_partitions, io, dry_run, root)
    return report


def _query_state(logs: SparkLogs | None, report: GcReport) -> _QueryState:
    if logs is None:
        return _QueryState(None, None)
    try:
        commits = logs.commit_batches()
        offsets = logs.offset_batches()
        partitions = logs.read_offset(offsets[-1]).shuffle_partitions if offsets else None
    except (CheckpointError, OSError) as e:
        report.notes.append(f"Spark's logs unreadable ({e}): stray manifests and abandoned partitions not collected")
        return _QueryState(None, None)
    return _QueryState(commits[-1] if commits else None, partitions)


def _collect_store(location: str, io: FileIO, dry_run: bool, grace_s: float, now: float,
                   query: _QueryState) -> tuple[StoreGc, dict[int, Manifest]]:
    fm = CheckpointFileManager(location, io)
    result = StoreGc(store=location)
    # 1. manifests first (see module doc)
    infos = io.list_info(fm.manifests_dir)
    manifest_infos = [i for i in infos if parse_manifest_name(i.name) or _SUPERSEDED_RE.match(i.name)]
    if not manifest_infos:
        result.skipped = "no manifest: nothing is known to be committed, nothing is deleted"
        return result, {}
    newest = max(i.mtime for i in manifest_infos)
    # A query whose newest committed batch is B has committed versions up to B+1 and may be writing B+2.
    limit = query.last_batch + 2 if query.last_batch is not None else None
    referenced: set[str] = set()
    manifests: dict[int, Manifest] = {}
    attempts: list[Manifest] = []
    for info in manifest_infos:
        path = io.join(fm.manifests_dir, info.name)
        parsed = parse_manifest_name(info.name)
        version = parsed[0] if parsed else None
        if version is not None and limit is not None and version > limit and now - info.mtime > grace_s:
            if version not in result.stray_manifests:
                result.stray_manifests.append(version)
            result.stray_names.append(info.name)
            continue
        try:
            manifest = Manifest.from_bytes(io.read_bytes(path), path)
        except FileNotFoundError:
            continue  # removed by retention meanwhile: its files are being removed too
        except CorruptCheckpointError as e:
            result.skipped = f"unreadable manifest, cannot tell what it references: {e}"
            return result, {}
        referenced |= manifest.remote_names()
        if parsed is not None and parsed[1] is None:
            manifests[parsed[0]] = manifest
        elif parsed is not None:
            attempts.append(manifest)
    result.versions = len(manifests)
    result.stray_manifests.sort()
    # 2. then the files
    files = io.list_info(fm.files_dir)
    result.files = len(files)
    for info in files:
        if info.name in referenced:
            continue
        if any(m.may_adopt(info.name) for m in [*manifests.values(), *attempts]):
            result.adoptable += 1
        elif info.mtime < newest and now - info.mtime > grace_s:
            result.orphans.append(info.name)
            result.orphan_bytes += info.size
        else:
            result.young_unreferenced += 1
    if not dry_run:
        # Stray manifests before the files only they listed (those are orphans of the next run).
        io.delete_many(io.join(fm.manifests_dir, n) for n in result.stray_names)
        io.delete_many(fm.file_path(n) for n in result.orphans)
    return result, manifests


def _collect_abandoned(by_store: dict[str, tuple[StoreGc, dict[int, Manifest]]], num_partitions: int,
                       io: FileIO, dry_run: bool, root: str) -> None:
    """Delete whole stores of partitions >= `num_partitions` once the remaining partitions of the same
    operator and store name retain no version as old as any of theirs."""
    groups: dict[tuple[str, str | None], dict[int, str]] = {}
    for rel in by_store:
        m = _STORE_RE.match(rel)
        if m:
            groups.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = rel
    for parts in groups.values():
        live = [by_store[rel] for p, rel in parts.items() if p < num_partitions]
        unknown = any(r.skipped for r, _ in live)  # a partition whose retained versions cannot be read
        oldest_live = None if unknown else min((min(ms) for _, ms in live if ms), default=None)
        for p, rel in parts.items():
            result, manifests = by_store[rel]
            if p < num_partitions or result.skipped:
                continue
            if oldest_live is None or (manifests and max(manifests) >= oldest_live):
                result.skipped = (f"partition {p} is beyond the query's {num_partitions} partitions, but retained "
                                  "versions of the other partitions are as old as its own: kept while those "
                                  "versions are retained")
                continue
            result.abandoned = True
            if not dry_run:
                _delete_store(io, result.store)


def _delete_store(io: FileIO, location: str) -> None:
    tree = io.join(location, "sparkstate")
    infos = io.list_info(tree, recursive=True)
    manifests = [i for i in infos if i.name.startswith("manifests/")]
    io.delete_many(io.join(tree, i.name) for i in manifests)  # versions vanish before their files
    io.delete_many(io.join(tree, i.name) for i in infos if i not in manifests)
    local = io.local_path(tree)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)
        try:
            os.removedirs(os.path.dirname(local))  # the partition's directory, if nothing else is left in it
        except OSError:
            pass


__all__ = ["collect_garbage", "GcReport", "StoreGc", "CheckpointError"]
