"""How a RocksDB version is committed: incrementally, as new SST files or as a change log.
The backend is the strategy of its commits and uses these functions for its three phases.

A version is a set of SST files (with RocksDB's small private files) plus the change logs of the versions
committed after that set was flushed, in version order (`rocksdb.flushEveryVersions`). Both kinds are
shared files of the manifest; a change log is told apart by its name (`delta-<v>.arrow`, arrow_files.py).

`take_checkpoint` (prepare, synchronous) of a flushed version: flush the memtables, then
  `Checkpoint.create_checkpoint` into a fresh local directory: SSTs are hard links (no copy),
  MANIFEST/CURRENT/log are small copies (the OPTIONS file is not kept: NOT_KEPT_PREFIXES).
  `take_logged` of a logged version: nothing to copy, the version is its change log on top of the
  committed SST set.
`upload_checkpoint` (upload): SSTs whose local name is in the current lineage (the files of the version
  this database was restored from or last committed) are referenced again; the others are uploaded under
  fresh unique names, and the private files with them, packed into one (private_files.py). The manifest
  is written last. Only after it is durable do the new files join the local cache (and the lineage: the
  manifest's files).
  The version's change log (the journal of its writes, backend.py) is finished first and listed too.
`drop_checkpoint` (release): delete the local checkpoint directory.

`BackgroundSstSet` writes the SST set of a version already committed as change logs: maintenance flushes
an idle database and uploads its new SST files on a background thread, publishing no manifest. The next
commit that finds the set ready builds on it (its manifest lists that set and the change logs after the
set's version only: its own, and those of commits made while the set was uploading), so a version that
the change logs would have made long to open is short again, without a flush in any commit.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import rocksdict

from ...checkpoint import Manifest, PrivateFile, SharedFileRef
from ...checkpoint.file_manager import new_attempt_id
from ..backend_contract import BackendContext, SnapshotOutcome, SnapshotResources, publish_commit
from .. import arrow_files as hf
from .private_files import PACK_NAME, pack_private_files

if TYPE_CHECKING:
    from ..journal import DeltaJournal

# Immutable files that may be shared between versions; everything else is per-version and small.
SHARED_SUFFIXES = (".sst", ".blob")
# Files of a checkpoint a version does not keep. RocksDB writes its OPTIONS file (7.5 KB, most of a
# manifest) from the options it is opened with, which the backend always gives (options.py), so a restored
# database opens the same without it.
NOT_KEPT_PREFIXES = ("OPTIONS-",)


@dataclass
class SstSnapshotResources(SnapshotResources):
    ckpt_dir: str = ""
    shared_names: list[str] = field(default_factory=list)
    private_names: list[str] = field(default_factory=list)
    num_keys: int = 0
    flush_ms: int = 0
    changes: "DeltaJournal | None" = None  # the journal of the version's writes (None: none recorded)
    changes_kept: bool = False             # every write of the version is in `changes`
    changes_finished: bool = False
    flushed: bool = True  # False: the version is its change log on the committed SST set (take_logged)
    base: "CommittedFiles | None" = None  # what the committed version is made of, as prepare saw it
    base_sst_set: "SstSet | None" = None  # the SST set written in maintenance that `base` is, if any


@dataclass(frozen=True)
class CommittedFiles:
    """What a committed version is made of: its SST set (by local name), the private files of that set
    (packed in `pack`, or embedded in the manifest by formats v1 to v3), and the change logs of the
    versions after it as (version, file), oldest first."""
    ssts: dict[str, SharedFileRef]
    private: tuple[PrivateFile, ...]
    logs: tuple[tuple[int, SharedFileRef], ...]
    pack: SharedFileRef | None = None

    @staticmethod
    def of(manifest: Manifest | None) -> "CommittedFiles":
        if manifest is None:
            return CommittedFiles({}, (), ())
        return CommittedFiles.of_files(manifest.shared_files, manifest.private_files)

    @staticmethod
    def of_files(refs: Iterable[SharedFileRef], private: tuple[PrivateFile, ...] = ()) -> "CommittedFiles":
        """The files of a manifest's `sharedFiles` (and `privateFiles`), each by its kind."""
        ssts: dict[str, SharedFileRef] = {}
        logs: list[tuple[int, SharedFileRef]] = []
        pack = None
        for ref in refs:
            parsed = hf.parse_local_name(ref.local)
            if parsed is not None and parsed[0] == hf.KIND_DELTA:
                logs.append((parsed[1], ref))
            elif ref.local == PACK_NAME:
                pack = ref
            else:
                ssts[ref.local] = ref
        return CommittedFiles(ssts, private, tuple(sorted(logs, key=lambda vr: vr[0])), pack)

    @property
    def set_files(self) -> tuple[SharedFileRef, ...]:
        """The SST set's remote files: its SSTs by local name, then its private files' pack."""
        ssts = tuple(sorted(self.ssts.values(), key=lambda r: r.local))
        return ssts + ((self.pack,) if self.pack is not None else ())

    @property
    def sst_bytes(self) -> int:
        return sum(ref.size for ref in self.ssts.values())

    @property
    def log_bytes(self) -> int:
        return sum(ref.size for _, ref in self.logs)


def take_checkpoint(ctx: BackendContext, db: rocksdict.Rdict, version: int,
                    num_keys: int) -> SstSnapshotResources:
    t0 = time.perf_counter()
    db.flush(wait=True)
    flush_ms = int(round((time.perf_counter() - t0) * 1000))
    ckpt_dir = ctx.layout.new_ckpt_dir()
    res = SstSnapshotResources(version=version, attempt_id=new_attempt_id(), ckpt_dir=ckpt_dir,
                               num_keys=num_keys, flush_ms=flush_ms)
    rocksdict.Checkpoint(db).create_checkpoint(ckpt_dir)
    for name in sorted(os.listdir(ckpt_dir)):
        if not name.startswith(NOT_KEPT_PREFIXES):
            (res.shared_names if name.endswith(SHARED_SUFFIXES) else res.private_names).append(name)
    return res


def _fresh_files(res: SstSnapshotResources, lineage: dict[str, SharedFileRef],
                 with_pack: bool) -> tuple[list[SharedFileRef], list[str]]:
    """The checkpoint's SST files already uploaded (their refs), and the files to upload (local names): the
    other SST files and, `with_pack`, the pack of its private files, which is new with every checkpoint.
    A pack pays for itself where versions between flushes name it (`rocksdb.flushEveryVersions` above 1);
    a store that flushes at every commit embeds its private files in the manifest instead, in the one
    write it makes anyway."""
    reused, fresh = _split_by_lineage(res, lineage)
    if with_pack and res.private_names:
        fresh.append(pack_private_files(res.ckpt_dir, res.private_names))
    return reused, fresh


def _private_files(res: SstSnapshotResources) -> tuple[PrivateFile, ...]:
    private = []
    for name in res.private_names:
        with open(os.path.join(res.ckpt_dir, name), "rb") as f:
            private.append(PrivateFile(name, f.read()))
    return tuple(private)


def take_logged(version: int, num_keys: int) -> SstSnapshotResources:
    """A version committed as its change log alone: no flush, no local files."""
    return SstSnapshotResources(version=version, attempt_id=new_attempt_id(), num_keys=num_keys, flushed=False)


def _split_by_lineage(res: SstSnapshotResources,
                      lineage: dict[str, SharedFileRef]) -> tuple[list[SharedFileRef], list[str]]:
    """The checkpoint's SST files already uploaded (their refs) and the ones to upload (local names)."""
    reused: list[SharedFileRef] = []
    fresh: list[str] = []
    for name in res.shared_names:
        ref = lineage.get(name)
        # Same local name in the same lineage means the same immutable file; the size check only
        # guards against a bookkeeping bug turning into a silently wrong checkpoint.
        if ref is not None and ref.size == os.path.getsize(os.path.join(res.ckpt_dir, name)):
            reused.append(ref)
        else:
            fresh.append(name)
    return reused, fresh


def upload_checkpoint(ctx: BackendContext, res: SstSnapshotResources, committed: CommittedFiles) -> SnapshotOutcome:
    """The outcome; the new committed files are its manifest's (`committed` itself is not modified)."""
    if not res.flushed:
        return _publish_logged(ctx, res, committed)
    with_pack = ctx.settings.rocksdb_flush_every > 1
    reused, fresh = _fresh_files(res, committed.ssts, with_pack)
    fm = ctx.file_manager
    change_log = None
    if res.changes is not None:
        res.changes_finished = True  # from here a failure may be ambiguous: the file stays for gc
        change_log = res.changes.finish()
    uploaded = fm.upload_new_files(res.version, res.attempt_id, res.ckpt_dir, fresh)
    shared = tuple(sorted(reused + uploaded.refs, key=lambda r: r.local))
    manifest = _publish(ctx, res, shared, () if with_pack else _private_files(res), change_log)
    fm.add_to_cache(ctx.layout.cache_dir, res.ckpt_dir, uploaded.refs)
    logged = (1, change_log.size) if change_log is not None else (0, 0)
    outcome = SnapshotOutcome(manifest=manifest, files_uploaded=len(uploaded.refs) + logged[0],
                              files_reused=len(reused), bytes_uploaded=uploaded.bytes_uploaded + logged[1])
    return outcome


@dataclass(frozen=True)
class SstSet:
    """What `BackgroundSstSet` wrote: the committed version's files as an SST set, and what it uploaded, of
    the database in `db_dir` (its files are that database's: only it may build on them)."""
    files: CommittedFiles
    files_uploaded: int
    bytes_uploaded: int
    db_dir: str


class BackgroundSstSet:
    """The SST set of the committed version an idle database holds (SnapshotStrategy, run in the
    background): prepare flushes and takes a checkpoint on the caller's thread, upload sends the SST files
    `lineage` lacks, and no manifest is written."""

    def __init__(self, ctx: BackendContext, db: rocksdict.Rdict, db_dir: str, num_keys: int,
                 lineage: CommittedFiles) -> None:
        self.ctx, self._db, self._db_dir, self._num_keys, self._lineage = ctx, db, db_dir, num_keys, lineage

    def prepare_snapshot(self, version: int) -> SstSnapshotResources:
        return take_checkpoint(self.ctx, self._db, version, self._num_keys)

    def upload_snapshot(self, res: SstSnapshotResources) -> SstSet:
        reused, fresh = _fresh_files(res, self._lineage.ssts, with_pack=True)
        fm = self.ctx.file_manager
        uploaded = fm.upload_new_files(res.version, res.attempt_id, res.ckpt_dir, fresh)
        fm.add_to_cache(self.ctx.layout.cache_dir, res.ckpt_dir, uploaded.refs)
        files = CommittedFiles.of_files(reused + uploaded.refs)
        return SstSet(files, len(uploaded.refs), uploaded.bytes_uploaded, self._db_dir)

    def release_snapshot(self, res: SstSnapshotResources) -> None:
        drop_checkpoint(res)


def _publish_logged(ctx: BackendContext, res: SstSnapshotResources, committed: CommittedFiles) -> SnapshotOutcome:
    """Publish a version as the committed SST set plus the change logs up to and including its own."""
    assert res.changes_kept, "a logged version needs every write of it in its change log"
    change_log = None
    if res.changes is not None:
        res.changes_finished = True
        change_log = res.changes.finish(ctx.layout.cache_dir)  # a rewind replays it from the cache
    logs = tuple(ref for _, ref in committed.logs) + ((change_log,) if change_log is not None else ())
    shared = committed.set_files + logs
    manifest = _publish(ctx, res, shared, committed.private, change_log)
    return SnapshotOutcome(manifest=manifest, files_uploaded=1 if change_log is not None else 0,
                           files_reused=len(shared) - (1 if change_log is not None else 0),
                           bytes_uploaded=change_log.size if change_log is not None else 0)


def _publish(ctx: BackendContext, res: SstSnapshotResources, shared: tuple[SharedFileRef, ...],
             private: tuple[PrivateFile, ...], change_log: SharedFileRef | None) -> Manifest:
    """Write the version's manifest, last (publish_commit); its files are durable already."""
    manifest = Manifest(version=res.version, backend="rocksdb", num_keys=res.num_keys,
                        writer_instance_id=ctx.instance_id, query_run_id=ctx.query_run_id,
                        created_ms=int(time.time() * 1000), shared_files=shared, private_files=private,
                        store=ctx.store, change_log=change_log, changes_kept=res.changes_kept)
    return publish_commit(ctx, manifest)


def drop_checkpoint(res: SstSnapshotResources) -> None:
    if res.ckpt_dir:
        shutil.rmtree(res.ckpt_dir, ignore_errors=True)
