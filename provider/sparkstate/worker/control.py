"""The py4j-facing control object: the JVM calls these methods (interface io.sparkstate.WorkerControl).

Arguments and results are JSON strings (docs/internals/bridge.md, "Control calls"). py4j runs each call
on one of its own threads, so these methods may run concurrently with the data server thread; the
engine's per-store lock orders them.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import threading
import traceback
from typing import Any, Callable

from .. import __version__, build_id
from ..engine import StoreSpec
from . import protocol as p
from ..checkpoint.file_manager import check_checkpoint_id
from .change_file import write_change_file
from .dispatcher import Session
from .registry import StoreRegistry
from .resident_memory import METRIC as RSS_METRIC
from .resident_memory import process_rss_bytes, store_share


def _reported(method: Callable[..., Any]) -> Callable[..., Any]:
    """Log the traceback in the worker's stderr; hand the JVM a one-line `Type: message`."""

    @functools.wraps(method)
    def wrapper(self: "WorkerControl", *args: Any) -> Any:
        try:
            return method(self, *args)
        except Exception as exc:
            traceback.print_exc()
            sys.stderr.flush()
            raise RuntimeError(f"{type(exc).__name__}: {exc}") from None

    return wrapper


def _checkpoint_id(value: str | None) -> str | None:
    """A checkpoint id from the JVM (null or empty: none), checked to be a safe file name part."""
    return check_checkpoint_id(str(value)) if value else None


class WorkerControl:
    def __init__(self, registry: StoreRegistry, on_shutdown: Callable[[], None], own_process: bool = True):
        """`own_process`: the stores have this process to themselves (a worker process), so its resident
        memory is theirs to report; false for the embedded worker, which lives in the executor JVM."""
        self._registry = registry
        self._on_shutdown = on_shutdown
        self._own_process = own_process
        # transport=py4j: frames arrive one call at a time from the leasing task, in order.
        self._py4j_session = Session(registry.get)
        self._py4j_lock = threading.Lock()

    def _metrics_doc(self, store: Any) -> dict[str, Any]:
        m = store.metrics()
        custom = dict(m.custom)
        rss = process_rss_bytes() if self._own_process else 0
        custom[RSS_METRIC] = store_share(rss, self._registry.store_count())
        return {"numKeys": m.num_keys, "memoryUsedBytes": m.memory_used_bytes, "custom": custom}

    @_reported
    def hello(self) -> str:
        return json.dumps({"pid": os.getpid(), "python": sys.executable, "version": __version__,
                           "build": build_id(), "package": os.path.dirname(os.path.dirname(__file__))})

    @_reported
    def open(self, spec_json: str) -> str:
        spec = StoreSpec.from_json(json.loads(spec_json))
        return json.dumps({"handle": self._registry.open(spec)})

    @_reported
    def load(self, handle: int, version: int, checkpoint_id: str | None) -> str:
        result = self._registry.get(handle).load(int(version), _checkpoint_id(checkpoint_id))
        return json.dumps({"version": result.version, "loadMs": result.load_ms, "source": result.source})

    @_reported
    def loadEmpty(self, handle: int, version: int) -> str:  # noqa: N802 - the Java interface's name
        result = self._registry.get(handle).load_empty(int(version))
        return json.dumps({"version": result.version, "loadMs": result.load_ms, "source": result.source})

    @_reported
    def replay(self, handle: int, snapshot_version: int, end_version: int, snapshot_checkpoint_id: str | None,
               end_checkpoint_id: str | None) -> str:
        result = self._registry.get(handle).replay(int(snapshot_version), int(end_version),
                                                   _checkpoint_id(snapshot_checkpoint_id),
                                                   _checkpoint_id(end_checkpoint_id))
        return json.dumps({"version": result.version, "loadMs": result.load_ms, "source": result.source})

    @_reported
    def changes(self, handle: int, start_version: int, end_version: int, end_checkpoint_id: str | None) -> str:
        """The changes of versions start..end in a local file the JVM reads and deletes (change_file.py)."""
        store = self._registry.get(handle)
        changes = store.changes(int(start_version), int(end_version), _checkpoint_id(end_checkpoint_id))
        path, rows = write_change_file(changes, store.scratch_dir)
        return json.dumps({"path": path, "rows": rows})

    @_reported
    def commit(self, handle: int) -> str:
        # The metrics ride along in the shape of metrics(): Spark reads them right after every commit,
        # and this spares the shim a second call per store per batch.
        store = self._registry.get(handle)
        result = store.commit()
        return json.dumps({"version": result.version, "checkpointId": result.checkpoint_id,
                           "baseCheckpointId": result.base_checkpoint_id, "metrics": self._metrics_doc(store)})

    @_reported
    def abort(self, handle: int) -> None:
        self._registry.get(handle).abort()

    @_reported
    def metrics(self, handle: int) -> str:
        return json.dumps(self._metrics_doc(self._registry.get(handle)))

    @_reported
    def maintenance(self, handle: int, kind: str) -> None:
        store = self._registry.get(handle)
        if kind == "snapshot":
            store.maintenance_snapshot()
        elif kind == "cleanup":
            store.maintenance_cleanup()
        else:
            raise ValueError(f"unknown maintenance kind {kind!r} (expected snapshot or cleanup)")

    @_reported
    def release(self, handle: int) -> None:
        store = self._registry.pop(handle)
        if store is not None:
            store.release()

    @_reported
    def close(self, handle: int) -> None:
        store = self._registry.pop(handle)
        if store is not None:
            store.close()

    @_reported
    def data(self, frame: bytes) -> bytes:
        frame = bytes(frame)  # py4j hands a bytearray
        op, handle, length = p.HEADER.unpack_from(frame, 0)
        payload = frame[p.HEADER.size:p.HEADER.size + length]
        with self._py4j_lock:
            response = self._py4j_session.handle(op, handle, payload)
        return response if response is not None else b""

    @_reported
    def drainData(self, timeout_ms: int) -> str:
        """Wait until every data connection open now has ended (the JVM abandoned them mid-request and
        closed them), so none of their frames can reach a store after this returns."""
        from .data_server import await_connections_closed
        return json.dumps({"drained": await_connections_closed(int(timeout_ms) / 1000.0)})

    @_reported
    def shutdown(self) -> None:
        threading.Thread(target=self._on_shutdown, daemon=True).start()

    class Java:
        implements = ["io.sparkstate.WorkerControl"]
