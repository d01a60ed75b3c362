"""Snapshot strategies of the heap backend, each in two phases (prepare on the caller's thread, upload).

DeltaJournal (while the batch runs): every `apply_batch` after the head version appends its records to
  `delta-<v>.arrow` of the version being written (an Arrow IPC stream, one compressed record batch per
  call), a file of the file manager's (`new_file`): written in place under its final, per-attempt remote
  name `<v>-<attempt>-delta-<v>.arrow` on local storage, staged locally and uploaded at commit elsewhere.
  Only a manifest makes it part of a version: an aborted or rewound attempt's journal is deleted, or,
  after a crash, left unreferenced for `sparkstate gc`.

HeapDeltaSnapshot (every commit, synchronous: a commit is durable only once its delta is):
  prepare  freeze the new version as a copy-on-write view (O(1)); take over the journal;
  upload   finish the journal (end of stream, fsync; upload if staged), then the manifest listing the
           chain [full snapshot] + deltas.

HeapFullSnapshot (every `heap.snapshotEveryVersions` deltas, in the background):
  prepare  pin the committed view of version s (O(1));
  upload   on the runner's thread: stream the view's rows into `full-<s>.arrow` (`new_file`, like a journal).
           No manifest is written: the next commit whose lineage contains s swaps the chain prefix for
           the full snapshot. A crash before that leaves an unreferenced file, never a broken version.

BackgroundSnapshotRunner runs at most one upload at a time, on a daemon thread, and times both phases.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..checkpoint import Manifest, SharedFileRef
from ..checkpoint.file_manager import new_attempt_id
from . import heap_files as hf
from .backend import BackendContext, SnapshotOutcome, SnapshotResources
from .heap_map import VersionedMap, View

log = logging.getLogger(__name__)


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


# ---- per-commit delta ---------------------------------------------------------------------------

class DeltaJournal:
    """The delta of `version`, appended to while its batch runs (see the module docstring), written
    through the file manager (`new_file`: in place on local storage, staged and uploaded elsewhere)."""

    def __init__(self, ctx: BackendContext, version: int) -> None:
        self.version = version
        self.attempt_id = new_attempt_id()
        self._file = ctx.file_manager.new_file(version, self.attempt_id, hf.local_name(hf.KIND_DELTA, version),
                                               ctx.layout.staging_dir)
        try:
            self._writer = hf.JournalWriter(self._file, version, ctx.settings.heap_compression)
        except BaseException:
            self._file.discard()
            raise

    @property
    def rows(self) -> int:
        return self._writer.rows

    def append(self, records) -> None:
        self._writer.append(records)

    def finish(self) -> SharedFileRef:
        """Make the delta durable; returns its reference (not yet in any manifest)."""
        self._writer.finish()
        return self._file.finish()

    def discard(self) -> None:
        """Delete an unfinished journal (abort, rewind, close): no manifest can reference it."""
        self._file.discard()


@dataclass
class DeltaResources(SnapshotResources):
    journal: DeltaJournal | None = None
    base_files: tuple = ()          # chain of the new version without its own delta
    new_view: View | None = None
    num_keys: int = 0
    prepare_ms: int = 0


class HeapDeltaSnapshot:
    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    def prepare(self, m: VersionedMap, version: int, base_files: tuple,
                journal: DeltaJournal | None) -> DeltaResources:
        """O(1): freeze `version`; the journal (None: nothing was written) already holds its delta."""
        t0 = time.perf_counter()
        view = m.freeze(version)
        return DeltaResources(version=version, attempt_id=journal.attempt_id if journal else new_attempt_id(),
                              journal=journal, base_files=base_files, new_view=view, num_keys=len(m),
                              prepare_ms=_ms(time.perf_counter() - t0))

    def upload(self, res: DeltaResources) -> tuple[SnapshotOutcome, int]:
        """Returns (outcome, ms spent finishing the delta file)."""
        t0 = time.perf_counter()
        # A version without changes has no delta file: its chain is its parent's. A finished journal is
        # never deleted here, even if the manifest fails: the failure may be ambiguous (written anyway).
        refs = [res.journal.finish()] if res.journal is not None else []
        delta_ms = _ms(time.perf_counter() - t0)
        shared = tuple(res.base_files) + tuple(refs)
        manifest = Manifest(version=res.version, backend="heap", num_keys=res.num_keys,
                            writer_instance_id=self.ctx.instance_id, query_run_id=self.ctx.query_run_id,
                            created_ms=int(time.time() * 1000), shared_files=shared)
        self.ctx.file_manager.publish_manifest(manifest)
        outcome = SnapshotOutcome(manifest=manifest, files_uploaded=len(refs),
                                  files_reused=len(res.base_files), bytes_uploaded=sum(r.size for r in refs))
        return outcome, delta_ms


# ---- background full snapshot -----------------------------------------------------------------------

@dataclass
class FullResources(SnapshotResources):
    view: View | None = None
    view_files: tuple = ()          # the chain of version s when it was pinned (its lineage identity)


@dataclass
class FullResult:
    version: int
    ref: SharedFileRef
    lineage: frozenset[str]         # remote names of the chain it replaces
    rows: int
    prepare_ms: int
    upload_ms: int


class HeapFullSnapshot:
    def __init__(self, ctx: BackendContext, m: VersionedMap) -> None:
        self.ctx = ctx
        self.map = m

    def prepare(self, view: View) -> FullResources:
        self.map.pin(view)
        return FullResources(version=view.version, attempt_id=new_attempt_id(), view=view,  # type: ignore[arg-type]
                             view_files=view.files)

    def upload(self, res: FullResources, cancelled: threading.Event) -> tuple[SharedFileRef, int] | None:
        assert res.view is not None
        name = hf.local_name(hf.KIND_FULL, res.version)
        f = self.ctx.file_manager.new_file(res.version, res.attempt_id, name, self.ctx.layout.staging_dir)
        try:
            writer = hf.StreamingWriter(f, hf.KIND_FULL, res.version, self.ctx.settings.heap_compression)
            # Columns built in C and numpy, never a Python loop per row: this thread shares the GIL
            # with the data server's thread (or the task threads, transport=embedded).
            for keys, values in self.map.view_batches(res.view, hf.BATCH_ROWS):
                if cancelled.is_set():
                    f.discard()
                    return None
                writer.write_arrays(keys, values)
            writer.close()
            if cancelled.is_set():
                f.discard()
                return None
            return f.finish(), writer.rows
        except BaseException:
            f.discard()
            raise

    def release(self, res: FullResources) -> None:
        if res.view is not None:
            self.map.unpin(res.view)


class BackgroundSnapshotRunner:
    """At most one full snapshot in flight; its result waits in `take_result` for the next commit."""

    def __init__(self, on_done: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._result: FullResult | None = None
        self._cancel = threading.Event()
        self.last_error: BaseException | None = None
        self.last_result: FullResult | None = None
        self.completed = 0

    @property
    def busy(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def start(self, strategy: HeapFullSnapshot, view: View) -> bool:
        """Prepare on the caller's thread, upload on a daemon thread; False if one is running."""
        if self.busy or self._cancel.is_set():
            return False
        t0 = time.perf_counter()
        res = strategy.prepare(view)
        prepare_ms = _ms(time.perf_counter() - t0)

        def run() -> None:
            t1 = time.perf_counter()
            try:
                out = strategy.upload(res, self._cancel)
                if out is not None:
                    ref, rows = out
                    result = FullResult(version=res.version, ref=ref,
                                        lineage=frozenset(r.remote for r in res.view_files), rows=rows,
                                        prepare_ms=prepare_ms, upload_ms=_ms(time.perf_counter() - t1))
                    with self._lock:
                        self._result = result
                        self.last_result = result  # diagnostics and tests; never consumed
                        self.completed += 1
            except BaseException as e:  # noqa: BLE001 - background: remember, log, retry at the next due commit
                self.last_error = e
                if not self._cancel.is_set():
                    log.warning("background full snapshot of version %d failed (deltas keep every version "
                                "loadable; retried later): %r", res.version, e)
            finally:
                strategy.release(res)

        self._thread = threading.Thread(target=run, name=f"sparkstate-heap-snapshot-{res.version}", daemon=True)
        self._thread.start()
        return True

    def take_result(self) -> FullResult | None:
        with self._lock:
            result, self._result = self._result, None
            return result

    def peek_result(self) -> FullResult | None:
        with self._lock:
            return self._result

    def wait(self, timeout: float | None = None) -> bool:
        """True when nothing is in flight (any more)."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return not self.busy

    def cancel(self) -> None:
        """Ask the upload to stop at its next chunk (the backend is closing); does not wait."""
        self._cancel.set()
