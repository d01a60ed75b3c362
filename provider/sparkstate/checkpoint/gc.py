"""Orphan collection: delete checkpoint files that no manifest references, left by crashed or losing
commit attempts (retention never lists `files/`, so it cannot see them).

A file under `<store>/sparkstate/files/` is an orphan when
  1. no manifest of the store (`N.manifest`, or a legacy `N.superseded-*` record) references it, and
  2. it is older than the store's newest manifest, and
  3. it is older than `grace_s` (default 1 hour).

Why it is safe while the query runs: a commit uploads its files first and writes the manifest last.
Files of an in-flight commit are newer than every manifest that existed when it started (2), and the
grace period (3) also covers clock skew and a commit slower than that. Manifests are read before
`files/` is listed, so a file published after the manifest scan is too young to be a candidate.
Retention and gc may delete the same file; deletes of missing files are ignored.

Store discovery: a recursive listing of the state root (`<checkpoint>/state`, or `stateLocation`),
done once per gc run - gc is an operator's tool, never on the commit path.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from ..errors import CheckpointError, CorruptCheckpointError
from ..storage import FileIO, fileio_for
from .file_manager import _MANIFEST_RE, _SUPERSEDED_RE, CheckpointFileManager
from .manifest import Manifest

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 3600.0
_MARK = "sparkstate/"


@dataclass
class StoreGc:
    store: str                      # the store's location (above `sparkstate/`)
    versions: int = 0
    files: int = 0
    orphans: list[str] = field(default_factory=list)   # remote names
    orphan_bytes: int = 0
    young_unreferenced: int = 0     # unreferenced but inside the grace period / newer than the newest manifest
    skipped: str | None = None      # why nothing was deleted


@dataclass
class GcReport:
    stores: list[StoreGc] = field(default_factory=list)
    deleted: bool = False

    @property
    def orphans(self) -> int:
        return sum(len(s.orphans) for s in self.stores)

    @property
    def orphan_bytes(self) -> int:
        return sum(s.orphan_bytes for s in self.stores)


def collect_garbage(root: str, fileio: FileIO | None = None, *, dry_run: bool = False,
                    grace_s: float = DEFAULT_GRACE_S, now: float | None = None) -> GcReport:
    """Find (and unless `dry_run`, delete) orphans of every store under `root`."""
    io = fileio if fileio is not None else fileio_for(root)
    now = time.time() if now is None else now
    stores = sorted({info.name[: info.name.index(_MARK)].rstrip("/")
                     for info in io.list_info(root, recursive=True) if _MARK in info.name})
    report = GcReport(deleted=not dry_run)
    for rel in stores:
        location = io.join(root, rel) if rel else root
        report.stores.append(_collect_store(location, io, dry_run, grace_s, now))
    return report


def _collect_store(location: str, io: FileIO, dry_run: bool, grace_s: float, now: float) -> StoreGc:
    fm = CheckpointFileManager(location, io)
    result = StoreGc(store=location)
    # 1. manifests first (see module doc)
    infos = io.list_info(fm.manifests_dir)
    manifest_infos = [i for i in infos if _MANIFEST_RE.match(i.name) or _SUPERSEDED_RE.match(i.name)]
    result.versions = sum(1 for i in manifest_infos if _MANIFEST_RE.match(i.name))
    if not manifest_infos:
        result.skipped = "no manifest: nothing is known to be committed, nothing is deleted"
        return result
    referenced: set[str] = set()
    for info in manifest_infos:
        path = io.join(fm.manifests_dir, info.name)
        try:
            referenced |= Manifest.from_bytes(io.read_bytes(path), path).remote_names()
        except FileNotFoundError:
            continue  # removed by retention meanwhile: its files are being removed too
        except CorruptCheckpointError as e:
            result.skipped = f"unreadable manifest, cannot tell what it references: {e}"
            return result
    newest = max(i.mtime for i in manifest_infos)
    # 2. then the files
    files = io.list_info(fm.files_dir)
    result.files = len(files)
    for info in files:
        if info.name in referenced:
            continue
        if info.mtime < newest and now - info.mtime > grace_s:
            result.orphans.append(info.name)
            result.orphan_bytes += info.size
        else:
            result.young_unreferenced += 1
    if result.orphans and not dry_run:
        io.delete_many(fm.file_path(n) for n in result.orphans)
    return result


def format_report(report: GcReport) -> str:
    verb = "deleted" if report.deleted else "would delete (dry run)"
    lines = []
    for s in report.stores:
        line = (f"{s.store}: {s.versions} versions, {s.files} files, {verb} {len(s.orphans)} orphans "
                f"({s.orphan_bytes} bytes)")
        if s.young_unreferenced:
            line += f", {s.young_unreferenced} unreferenced but too young (kept)"
        if s.skipped:
            line += f"; skipped: {s.skipped}"
        lines.append(line)
    lines.append(f"total: {len(report.stores)} stores, {verb} {report.orphans} orphans ({report.orphan_bytes} bytes)")
    return "\n".join(lines)


__all__ = ["collect_garbage", "format_report", "GcReport", "StoreGc", "CheckpointError"]
