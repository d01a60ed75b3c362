"""How the heap backend writes versions: a delta with every commit, a full snapshot in the background.

Commit of version v (synchronous: a commit is durable only once its delta is; the backend is the
strategy of its commits and uses these two functions):
  `freeze_version`   freeze v as a copy-on-write view (O(1)) and take over the journal of v (journal.py),
                     which already holds every write since v-1;
  `publish_version`  finish the journal (end of stream, fsync; upload if staged), then the manifest
                     listing the chain of v (chain.py): [full snapshot] + deltas.

`HeapFullSnapshot` (when due: HeapBackend._full_due; a SnapshotStrategy run in the background by the
snapshot runner):
  prepare  pin the committed view of version s (O(1));
  upload   stream the view's rows into `full-<s>.arrow` (the file manager's `new_file`, like a journal).
           No manifest is written: the next commit whose chain contains the chain of s swaps that prefix
           for the full snapshot. A crash before that leaves an unreferenced file, never a broken version.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from ...checkpoint import Manifest, SharedFileRef
from ...checkpoint.file_manager import new_attempt_id
from ..backend_contract import BackendContext, SnapshotOutcome, SnapshotResources, publish_commit
from .. import arrow_files as hf
from .chain import Chain
from ..journal import DeltaJournal
from .versioned_map import VersionedMap, View


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


# ---- per-commit delta ---------------------------------------------------------------------------

@dataclass
class DeltaResources(SnapshotResources):
    journal: DeltaJournal | None = None
    base: Chain | None = None       # the chain of the new version without its own delta
    new_view: View | None = None
    num_keys: int = 0
    prepare_ms: int = 0
    changes_kept: bool = True  # the delta is the batch's writes (not a bulk load's), the version's change log


def freeze_version(m: VersionedMap, version: int, base: Chain, journal: DeltaJournal | None) -> DeltaResources:
    """O(1): freeze `version`; the journal (None: nothing was written) already holds its delta."""
    t0 = time.perf_counter()
    view = m.freeze(version)
    return DeltaResources(version=version, attempt_id=journal.attempt_id if journal else new_attempt_id(),
                          journal=journal, base=base, new_view=view, num_keys=len(m),
                          prepare_ms=_ms(time.perf_counter() - t0))


def publish_version(ctx: BackendContext, res: DeltaResources) -> tuple[SnapshotOutcome, Chain, int]:
    """Make the version durable: (outcome, its chain, ms spent finishing the delta file)."""
    assert res.base is not None
    t0 = time.perf_counter()
    # A version without changes has no delta file: its chain is its parent's. A finished journal is never
    # deleted here, even if the manifest fails: the failure may be ambiguous (written anyway).
    chain = res.base
    delta = None
    if res.journal is not None:
        delta = res.journal.finish()
        chain = chain.with_delta(res.version, delta)
    delta_ms = _ms(time.perf_counter() - t0)
    manifest = Manifest(version=res.version, backend="heap", num_keys=res.num_keys,
                        writer_instance_id=ctx.instance_id, query_run_id=ctx.query_run_id,
                        created_ms=int(time.time() * 1000), shared_files=chain.refs, store=ctx.store,
                        # a later commit may adopt a background full snapshot of any version after the base
                        adoptable_from=chain.full_version + 1,
                        change_log=delta if res.changes_kept else None, changes_kept=res.changes_kept)
    manifest = publish_commit(ctx, manifest)
    new = len(chain.refs) - len(res.base.refs)
    outcome = SnapshotOutcome(manifest=manifest, files_uploaded=new, files_reused=len(res.base.refs),
                              bytes_uploaded=sum(r.size for r in chain.refs[len(chain.refs) - new:]))
    return outcome, chain, delta_ms


# ---- background full snapshot -----------------------------------------------------------------------

@dataclass
class FullResources(SnapshotResources):
    view: View | None = None
    chain: Chain | None = None      # the chain of version s when it was pinned (what the snapshot replaces)


@dataclass(frozen=True)
class FullSnapshot:
    """A durable full snapshot of `version`, not yet in any manifest."""

    version: int
    ref: SharedFileRef
    replaces: frozenset[str]        # remote names of the chain it stands for
    rows: int


class HeapFullSnapshot:
    """Writes a committed version's whole contents as one file (SnapshotStrategy, run in the background)."""

    def __init__(self, ctx: BackendContext, m: VersionedMap, view_of: Callable[[int], View]) -> None:
        self.ctx = ctx
        self.map = m
        self._view_of = view_of
        self._cancelled = threading.Event()

    def prepare_snapshot(self, version: int) -> FullResources:
        view = self._view_of(version)
        self.map.pin(view)
        return FullResources(version=version, attempt_id=new_attempt_id(), view=view, chain=view.chain)

    def upload_snapshot(self, res: FullResources) -> FullSnapshot | None:
        assert res.view is not None and res.chain is not None
        name = hf.local_name(hf.KIND_FULL, res.version)
        f = self.ctx.file_manager.new_file(res.version, res.attempt_id, name, self.ctx.layout.staging_dir)
        try:
            writer = hf.StreamingWriter(f, hf.KIND_FULL, res.version, self.ctx.settings.heap_compression)
            # Columns built in C and numpy, never a Python loop per row: this thread shares the GIL with
            # the data server's thread (or the task threads, transport=embedded).
            for keys, values in self.map.view_batches(res.view, hf.BATCH_ROWS):
                if self._cancelled.is_set():
                    f.discard()
                    return None
                writer.write_arrays(keys, values)
            writer.close()
            if self._cancelled.is_set():
                f.discard()
                return None
            return FullSnapshot(res.version, f.finish(), res.chain.remote_names(), writer.rows)
        except BaseException:
            f.discard()
            raise

    def release_snapshot(self, res: FullResources) -> None:
        if res.view is not None:
            self.map.unpin(res.view)

    def cancel(self) -> None:
        """Stop at the next chunk (the backend is closing); what was written is discarded."""
        self._cancelled.set()
