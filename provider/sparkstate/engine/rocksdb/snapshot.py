"""How a RocksDB version is committed: incrementally, uploading only SST files not yet checkpointed.
The backend is the strategy of its commits and uses these three functions for its three phases.

`take_checkpoint` (prepare, synchronous): flush the memtables, then `Checkpoint.create_checkpoint` into
  a fresh local directory: SSTs are hard links (no copy), MANIFEST/CURRENT/OPTIONS/log are small copies.
`upload_checkpoint` (upload): SSTs whose local name is in the current lineage (the files of the version
  this database was restored from or last committed) are referenced again; the others are uploaded under
  fresh unique names. Private files are embedded in the manifest, which is written last. Only after the
  manifest is durable do the new files join the local cache (and the lineage: the manifest's files).
  The version's change log (the journal of its writes, backend.py) is finished first and listed too.
`drop_checkpoint` (release): delete the local checkpoint directory.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import rocksdict

from ...checkpoint import Manifest, PrivateFile, SharedFileRef
from ...checkpoint.file_manager import new_attempt_id
from ..backend import BackendContext, SnapshotOutcome, SnapshotResources, publish_commit

if TYPE_CHECKING:
    from ..journal import DeltaJournal

# Immutable files that may be shared between versions; everything else is per-version and small.
SHARED_SUFFIXES = (".sst", ".blob")


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
        (res.shared_names if name.endswith(SHARED_SUFFIXES) else res.private_names).append(name)
    return res


def upload_checkpoint(ctx: BackendContext, res: SstSnapshotResources,
                      lineage: dict[str, SharedFileRef]) -> SnapshotOutcome:
    """The outcome; the new lineage is its manifest's files (`lineage` itself is not modified)."""
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
    fm = ctx.file_manager
    change_log = None
    if res.changes is not None:
        res.changes_finished = True  # from here a failure may be ambiguous: the file stays for gc
        change_log = res.changes.finish()
    uploaded = fm.upload_new_files(res.version, res.attempt_id, res.ckpt_dir, fresh)
    private = []
    for name in res.private_names:
        with open(os.path.join(res.ckpt_dir, name), "rb") as f:
            private.append(PrivateFile(name, f.read()))
    shared = tuple(sorted(reused + uploaded.refs, key=lambda r: r.local))
    manifest = Manifest(version=res.version, backend="rocksdb", num_keys=res.num_keys,
                        writer_instance_id=ctx.instance_id, query_run_id=ctx.query_run_id,
                        created_ms=int(time.time() * 1000), shared_files=shared,
                        private_files=tuple(private), store=ctx.store,
                        change_log=change_log, changes_kept=res.changes_kept)
    manifest = publish_commit(ctx, manifest)
    fm.add_to_cache(ctx.layout.cache_dir, res.ckpt_dir, uploaded.refs)
    logged = (1, change_log.size) if change_log is not None else (0, 0)
    outcome = SnapshotOutcome(manifest=manifest, files_uploaded=len(uploaded.refs) + logged[0],
                              files_reused=len(reused), bytes_uploaded=uploaded.bytes_uploaded + logged[1])
    return outcome


def drop_checkpoint(res: SstSnapshotResources) -> None:
    shutil.rmtree(res.ckpt_dir, ignore_errors=True)
