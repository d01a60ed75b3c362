"""Heap backend: the state lives in memory in the worker (a packed table or a dict: `heap.layout`),
versioned with copy-on-write views.

Writes after version v (asynchronous to the commit, on the task thread while the batch runs): each
  `apply_batch` is applied to the map and appended to the journal `delta-<v+1>.arrow` (journal.py).
Commit of version v+1 (synchronous part, what Spark waits for):
  freeze v+1 as a view (O(1)), finish the journal (end of stream + fsync; the tail is at most one
  record batch already written), write the manifest. Nothing proportional to the state size, or to the
  number of keys written, happens here. If the journal was lost (a write failed to append, or writes
  survived a failed commit), the commit falls back to gathering the changes since v (O(keys written)).
Background (one runner): Spark's maintenance starts a full snapshot of the committed version once
  `heap.snapshotEveryVersions` deltas follow the last one and hold `heap.snapshotMinDeltaPercent` of its
  bytes, as Spark's HDFS provider writes its snapshots, so at most one starts per maintenance interval
  whatever the batch rate. A commit starts one itself only once FULL_AFTER_EVERY_TIMES as many deltas
  wait (maintenance not keeping up). The pinned view is written while the next micro-batches run; the
  first commit after it completes uses it as the new base of the chain (see snapshot.py, chain.py).
  Retention then drops the older deltas with their manifests.
Load of v: the current head (Store fast path), else a retained view rolled back in place (`rewind`,
  O(keys changed since v)), else restore the manifest's chain from the checkpoint.
Memory: the live table, the before images of retained views (at most `heap.maxVersionsInMemory`, plus a
  view a background snapshot still reads), and the prefix index of PrefixKeyScan stores.
"""
from __future__ import annotations

import logging
from typing import Sequence

from ...checkpoint import Manifest
from ...errors import StoreStateError
from ..backend_contract import Backend, BackendContext, Cursor, SnapshotOutcome, SnapshotResources
from ..journal import DeltaJournal
from ..snapshot_runner import BackgroundResult, BackgroundSnapshotRunner
from .chain import Chain
from .cursors import HeapPrefixCursor, HeapScanCursor
from .live_table import LiveTable, new_live_table
from .restore import FullSnapshotRestore, choose_restore, find_full_snapshot
from .snapshot import DeltaResources, HeapFullSnapshot, freeze_version, publish_version
from .versioned_map import VersionedMap, View

log = logging.getLogger(__name__)

# A full snapshot is written once this many times heap.snapshotEveryVersions deltas follow the last one,
# whatever their bytes, and started by the commit if maintenance has not: it bounds the files a restore
# reads and a manifest lists.
FULL_AFTER_EVERY_TIMES = 4


class HeapBackend(Backend):
    def __init__(self, ctx: BackendContext, table: LiveTable, version: int, chain: Chain) -> None:
        self.ctx = ctx
        self._runner = BackgroundSnapshotRunner()
        self._cursors: set[Cursor] = set()
        self._closed = False
        self._last_full_ms = 0
        self._fulls_reported = 0
        self._journal: DeltaJournal | None = None  # delta of head+1 being written; None: no writes yet
        self._journal_lost = False                # writes after the head that no journal holds
        self._foreign = False                     # writes after the head are not a batch's (bulk, replay)
        self._reset(table, version, chain)

    def _reset(self, table: LiveTable, version: int, chain: Chain) -> None:
        self._close_cursors()
        self._drop_journal()
        self._foreign = False
        self._map = VersionedMap(table, prefix_index=self.ctx.num_cols_prefix_key > 0,
                                 layout=self.ctx.settings.heap_layout)
        self._full = HeapFullSnapshot(self.ctx, self._map, lambda v: self._committed[v])
        self._head: View = self._map.freeze(version)
        self._head.chain = chain
        self._committed: dict[int, View] = {version: self._head}  # commit order == chain order

    def start_empty_at(self, version: int) -> None:
        # The empty state needs no file: the first delta (version+1) replays onto nothing, which is what a
        # chain without a full snapshot means. Based at `version`, no later commit adopts an earlier file.
        self._reset(new_live_table(self.ctx.settings.heap_layout), version, Chain(None, version, ()))

    def _check_open(self) -> None:
        if self._closed:
            raise StoreStateError("heap backend is closed")

    # ---- data -----------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise StoreStateError("heap backend is closed")
        return self._map.get(key)

    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._check_open()
        self._map.take_garbage()  # images of versions evicted by the last commit
        if not records:
            return
        try:
            self._map.apply(records)
        except BaseException:
            self._lose_journal()
            raise
        if self._journal_lost:
            return
        try:
            if self._journal is None:
                self._journal = DeltaJournal(self.ctx, self._head.version + 1)  # type: ignore[operator]
            self._journal.append(records)
        except Exception as e:  # noqa: BLE001 - the commit gathers the delta from memory instead
            log.warning("heap delta journal of version %d failed (%r); this commit will write its delta "
                        "from memory", self._head.version + 1, e)  # type: ignore[operator]
            self._lose_journal()

    # ---- journal of the version being written ----------------------------------------------------
    def _drop_journal(self) -> None:
        """Delete the unfinished journal (its writes were rolled back or are being discarded)."""
        journal, self._journal = self._journal, None
        self._journal_lost = False
        if journal is not None:
            try:
                journal.discard()
            except OSError as e:  # an orphan at worst: never referenced by a manifest
                log.warning("could not delete an aborted heap delta journal: %r", e)

    def _lose_journal(self) -> None:
        self._drop_journal()
        self._journal_lost = True

    def _take_journal(self, version: int) -> DeltaJournal | None:
        """The journal holding every write since the head, rebuilt from memory if it was lost."""
        if not self._journal_lost and (self._journal is None or self._journal.version == version):
            journal, self._journal = self._journal, None
            return journal
        self._drop_journal()  # lost, or journaling another version than the one committed: rebuild
        records = self._map.changes_since(self._head)
        if not records:
            return None
        journal = DeltaJournal(self.ctx, version)
        try:
            journal.append(records)
        except BaseException:
            journal.discard()
            self._journal_lost = True
            raise
        return journal

    def open_cursor(self, prefix: bytes) -> Cursor:
        self._check_open()
        kind = HeapPrefixCursor if self._map.indexes_prefix(prefix) else HeapScanCursor
        cursor = kind(self._map, prefix, self._cursors.discard)
        self._cursors.add(cursor)
        return cursor

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        """The live table's own walk (packed: whole buckets from a bucket index; dict: from an offset)."""
        self._check_open()
        return self._map.walk(position, max_rows)

    def num_keys(self) -> int:
        return 0 if self._closed else len(self._map)

    def sample_keys(self, limit: int) -> list[bytes]:
        self._check_open()
        return self._map.sample_keys(limit)

    def memory_used_bytes(self) -> int:
        return 0 if self._closed else self._map.memory_used_bytes()

    # ---- versions in memory ---------------------------------------------------------------------
    def rewind(self, version: int) -> bool:
        """Roll the live map back to retained version `version` (a retried batch, or after an abort)."""
        view = self._committed.get(version)
        if view is None or self._closed:
            return False
        self._close_cursors()
        if self._map.is_pinned_after(view):
            self._runner.wait()  # the background snapshot reads a later view; it is bounded, let it finish
            if self._map.is_pinned_after(view):
                return False
        self._map.rollback_to(view)
        self._drop_journal()
        self._foreign = False
        order = list(self._committed)
        for v in order[order.index(version) + 1:]:
            del self._committed[v]
        self._head = view
        return True

    def _evict(self) -> None:
        keep = self.ctx.settings.heap_max_versions_in_memory
        while len(self._committed) > keep:
            oldest = next(iter(self._committed))
            self._map.retire(self._committed.pop(oldest))

    # ---- snapshot (commit) -----------------------------------------------------------------------
    @staticmethod
    def _rebased(chain: Chain, version: int, done: BackgroundResult | None) -> Chain | None:
        """`chain` (of `version`) on the full snapshot the runner finished, if that snapshot stands for
        a prefix of it."""
        if done is None:
            return None
        o = done.outcome
        return chain.rebased(version, o.version, o.ref, o.replaces)

    def _base_chain(self, done: BackgroundResult | None) -> Chain:
        """The head's chain, rebased on the full snapshot the runner finished if it stands for a prefix."""
        return self._rebased(self._head.chain, self._head.version, done) or self._head.chain  # type: ignore[arg-type]

    def prepare_snapshot(self, version: int) -> SnapshotResources:
        self._check_open()
        base = self._base_chain(self._runner.peek_result())
        journal = self._take_journal(version)
        res = freeze_version(self._map, version, base, journal)
        res.changes_kept = not self._foreign
        return res

    def bulk_loaded(self) -> None:
        self._foreign = True

    def apply_replayed(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._check_open()
        self._map.apply(records)
        self._lose_journal()
        self._foreign = True

    def upload_snapshot(self, resources: SnapshotResources) -> SnapshotOutcome:
        assert isinstance(resources, DeltaResources) and resources.new_view is not None
        try:
            outcome, chain, delta_ms = publish_version(self.ctx, resources)
        except BaseException:
            self._map.retire(resources.new_view)  # not committed: writes stay on top of the old head
            self._journal_lost = True             # ... and no journal holds them any more
            raise
        done = self._runner.peek_result()
        if done is not None and (done.outcome.ref in chain.refs  # used: the new chain starts with it
                                 or self._rebased(chain, resources.version, done) is None):  # of another lineage
            self._runner.take_result()
        self._foreign = False
        view = resources.new_view
        view.chain = chain
        self._committed[resources.version] = view
        self._head = view
        self._evict()
        self._maybe_start_full(overdue_only=True)
        fulls = self._runner.completed
        new_fulls, self._fulls_reported = fulls - self._fulls_reported, fulls
        if done is not None:
            self._last_full_ms = done.timings.upload_ms
        outcome.flush_ms = resources.prepare_ms + delta_ms
        outcome.custom = {"sparkstateFlushMs": outcome.flush_ms, "sparkstateUploadMs": self._last_full_ms,
                          "sparkstateFilesUploaded": outcome.files_uploaded + new_fulls}
        return outcome

    def release_snapshot(self, resources: SnapshotResources) -> None:
        """Nothing pinned: the new view is either the head now or was dropped on failure."""

    def _full_due(self, overdue_only: bool) -> bool:
        """Once heap.snapshotEveryVersions deltas follow the last full snapshot and hold
        heap.snapshotMinDeltaPercent of its bytes; overdue once FULL_AFTER_EVERY_TIMES as many follow it."""
        chain, settings = self._head.chain, self.ctx.settings
        deltas, every = len(chain.deltas), settings.heap_snapshot_every
        if deltas >= FULL_AFTER_EVERY_TIMES * every:
            return True
        if overdue_only or deltas < every:
            return False
        if chain.full is None:
            return True
        delta_bytes = sum(ref.size for _, ref in chain.deltas)
        return delta_bytes * 100 >= chain.full.size * settings.heap_snapshot_min_delta_percent

    def _maybe_start_full(self, overdue_only: bool = False) -> bool:
        if (self._closed or self._runner.busy or self._runner.peek_result() is not None
                or not self._full_due(overdue_only)):
            return False
        return self._runner.start(self._full, self._head.version)

    def maintenance_snapshot(self) -> None:
        """Start the background full snapshot if one is due and none is running (never waits)."""
        if not self._closed:
            self._map.take_garbage()
        self._maybe_start_full()

    def wait_for_background(self, timeout: float | None = None) -> bool:
        """Tests and benchmarks: wait until no full snapshot is being written."""
        return self._runner.wait(timeout)

    @property
    def runner(self) -> BackgroundSnapshotRunner:
        return self._runner

    # ---- lifecycle ------------------------------------------------------------------------------
    def _close_cursors(self) -> None:
        for cursor in list(self._cursors):
            cursor.close()
        self._cursors.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._close_cursors()
        self._drop_journal()
        self._runner.cancel()  # stops at its next chunk; its staging files are removed, nothing published
        self._closed = True
        self._committed.clear()


def open_heap_backend(ctx: BackendContext, manifest: Manifest | None) -> HeapBackend:
    """BackendBuilder for the heap backend: run the restore that fits and hold the result in memory."""
    restored = choose_restore(ctx, manifest).run()
    return HeapBackend(ctx, restored.table, manifest.version if manifest else 0, restored.chain)


def open_heap_snapshot(ctx: BackendContext, lineage: Sequence[Manifest]) -> HeapBackend:
    """The heap backend at the version of the last manifest of `lineage` (the manifests from a replay's end
    version down to it), read from its full snapshot alone (where snapshot replay starts)."""
    version = lineage[-1].version
    ref = find_full_snapshot(ctx.file_manager, version, lineage)
    restored = FullSnapshotRestore(ctx, ref, version).run()
    return HeapBackend(ctx, restored.table, version, restored.chain)
