"""The one runner of snapshot strategies, for a commit (synchronous) and for a background snapshot.

Every snapshot is a short `prepare_snapshot(version)` on the caller's thread (a RocksDB flush and
checkpoint, an O(1) copy-on-write freeze) that pins what it needs, then `upload_snapshot(resources)`,
which writes the files (and, for a commit, the manifest last), then `release_snapshot(resources)`, called
exactly once whatever happened. `run_snapshot` drives the three for a commit; `BackgroundSnapshotRunner`
runs the upload on a daemon thread (the heap backend's full snapshots) while the next batches go on.
Both time the two phases.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

R = TypeVar("R")
O = TypeVar("O")  # noqa: E741 - the outcome type


class SnapshotStrategy(Protocol[R, O]):
    """The shape of every snapshot (see the module doc); a backend is the strategy of its commits."""

    def prepare_snapshot(self, version: int) -> R: ...

    def upload_snapshot(self, resources: R) -> O: ...

    def release_snapshot(self, resources: R) -> None: ...


@dataclass(frozen=True)
class SnapshotTimings:
    prepare_ms: int
    upload_ms: int


def run_snapshot(strategy: SnapshotStrategy[Any, O], version: int,
                 clock: Callable[[], float] = time.perf_counter) -> tuple[O, SnapshotTimings]:
    """Both phases on this thread, timed; the resources are released whatever happens."""
    t0 = clock()
    resources = strategy.prepare_snapshot(version)
    t1 = clock()
    try:
        outcome = strategy.upload_snapshot(resources)
    finally:
        strategy.release_snapshot(resources)
    t2 = clock()
    return outcome, SnapshotTimings(prepare_ms=_ms(t1 - t0), upload_ms=_ms(t2 - t1))


@dataclass(frozen=True)
class BackgroundResult(Generic[O]):
    version: int
    outcome: O
    timings: SnapshotTimings


class BackgroundSnapshotRunner:
    """At most one snapshot in flight; its result waits in `take_result` for whoever uses it next.

    A strategy whose upload returns None was cancelled (`cancel` calls the strategy's own `cancel`, if
    it has one, and no new snapshot starts); a failed upload is logged and kept in `last_error`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._strategy: Any = None
        self._result: BackgroundResult | None = None
        self._cancelled = False
        self.last_error: BaseException | None = None
        self.last_result: BackgroundResult | None = None  # diagnostics and tests; never consumed
        self.completed = 0

    @property
    def busy(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def start(self, strategy: SnapshotStrategy[Any, Any], version: int) -> bool:
        """Prepare on the caller's thread, upload on a daemon thread; False if one is running."""
        if self.busy or self._cancelled:
            return False
        t0 = time.perf_counter()
        resources = strategy.prepare_snapshot(version)
        prepare_ms = _ms(time.perf_counter() - t0)
        self._strategy = strategy

        def run() -> None:
            t1 = time.perf_counter()
            try:
                outcome = strategy.upload_snapshot(resources)
                if outcome is not None:
                    result = BackgroundResult(version, outcome, SnapshotTimings(prepare_ms, _ms(time.perf_counter() - t1)))
                    with self._lock:
                        self._result = result
                        self.last_result = result
                        self.completed += 1
            except BaseException as e:  # noqa: BLE001 - background: remember, log, retried when due again
                self.last_error = e
                if not self._cancelled:
                    log.warning("background snapshot of version %d failed (the versions committed meanwhile "
                                "stay loadable; it is retried later): %r", version, e)
            finally:
                strategy.release_snapshot(resources)

        self._thread = threading.Thread(target=run, name=f"sparkstate-snapshot-{version}", daemon=True)
        self._thread.start()
        return True

    def take_result(self) -> BackgroundResult | None:
        with self._lock:
            result, self._result = self._result, None
            return result

    def peek_result(self) -> BackgroundResult | None:
        with self._lock:
            return self._result

    def wait(self, timeout: float | None = None) -> bool:
        """True when nothing is in flight (any more)."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return not self.busy

    def cancel(self) -> None:
        """Ask the snapshot in flight to stop (its owner is closing) and start no other; does not wait."""
        self._cancelled = True
        cancel = getattr(self._strategy, "cancel", None)
        if cancel is not None:
            cancel()


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))
