"""transport=embedded: workers inside the executor JVM's own CPython, reached through Jep.

The JVM shim (EmbeddedWorker, EmbeddedDataChannel) calls the functions of this module. A worker here is
what a worker process is (a store registry and a `WorkerControl`), minus the process: control calls go
to the same control object, and data frames to the same `Session`, so both transports run the same
engine code. A data channel is a pair of direct buffers the JVM shares with us: it writes frames after a
length prefix into one and calls `pump()`; the sync response goes back through the other.

All task threads of an executor share this interpreter and its GIL; each Jep call holds the GIL only
while it runs. The workers share one store table, so a store stays live whichever task thread (and so
whichever worker) its partition's next task runs on; the shim knows (`Worker.reaches`).
"""
from __future__ import annotations

import itertools
import struct
import sys
import threading

from . import protocol as p
from .control import WorkerControl
from .dispatcher import Session, answer_get
from .registry import StoreRegistry, StoreTable

# Python threads of the engine (uploads, background snapshots) give the GIL back to task threads sooner.
GIL_SWITCH_INTERVAL_S = 0.0005

_INT = p.INT
_HEADER_SIZE = p.HEADER.size
_FIRST = struct.Struct("<i" + p.HEADER.format.lstrip("<"))  # the length prefix and the first frame's header
_GET_ONLY = 4 + _HEADER_SIZE  # bytes before the key of a buffer that holds a single GET frame

_lock = threading.Lock()
_table = StoreTable()  # shared: any embedded worker reaches the stores of every other (registry.py)
_workers: dict[str, tuple[StoreRegistry, WorkerControl]] = {}
_channel_ids = itertools.count(1)
channels: dict[int, "EmbeddedChannel"] = {}  # read by the shim: channels[id].pump


class EmbeddedChannel:
    """One worker's frame stream from the JVM (the embedded counterpart of a socket connection)."""

    def __init__(self, worker_id: str, registry: StoreRegistry, out: object, response: object):
        self.worker_id = worker_id
        self._session = Session(registry.get)
        self._store_of = registry.get
        self._oversized = b""
        self.bind(out, response)

    def bind(self, out: object, response: object) -> None:
        self._out = memoryview(out).cast("B")  # Jep hands direct ByteBuffers over as signed bytes
        self._response = memoryview(response).cast("B")

    def pump(self) -> int:
        """Handle the frames in the shared buffer; the size of the sync response (negative: too large)."""
        out = self._out
        size, op, handle, length = _FIRST.unpack_from(out, 0)
        if op == p.OP_GET and size == _HEADER_SIZE + length and self._session.pending_error is None:
            # The per-row state lookup: no frame loop.
            return self._answer(answer_get(self._store_of, handle, bytes(out[_GET_ONLY:_GET_ONLY + length])))
        end = 4 + size
        pos = 4
        apply = self._session.handle
        answer = None
        while pos < end:
            op, handle, length = p.HEADER.unpack_from(out, pos)
            start = pos + _HEADER_SIZE
            pos = start + length
            answer = apply(op, handle, bytes(out[start:pos])) or answer
        return 0 if answer is None else self._answer(answer)

    def _answer(self, answer: bytes) -> int:
        """Put a sync answer where the JVM reads it: the response buffer, or the oversized slot."""
        size = len(answer)
        if size > len(self._response):
            self._oversized = answer
            return -size
        self._response[:size] = answer
        return size

    def take_oversized(self) -> bytes:
        response, self._oversized = self._oversized, b""
        return response

    def close(self) -> None:
        self._session.close()
        self._out.release()
        self._response.release()


def start_worker(worker_id: str) -> str:
    if sys.getswitchinterval() > GIL_SWITCH_INTERVAL_S:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    registry = StoreRegistry(table=_table)
    control = WorkerControl(registry, on_shutdown=lambda: None, own_process=False)
    with _lock:
        if worker_id in _workers:
            raise ValueError(f"embedded worker {worker_id} is already running")
        _workers[worker_id] = (registry, control)
    return control.hello()


def call(worker_id: str, method: str, *args: object) -> object:
    """One control call (the methods of io.sparkstate.WorkerControl)."""
    return getattr(_worker(worker_id)[1], method)(*args)


def stop_worker(worker_id: str) -> None:
    """Close the worker's channels and stores, dropping their local working copies."""
    with _lock:
        entry = _workers.pop(worker_id, None)
        mine = [cid for cid, ch in channels.items() if ch.worker_id == worker_id]
        closing = [channels.pop(cid) for cid in mine]
    for channel in closing:
        channel.close()
    if entry is not None:
        entry[0].close_all()


def open_channel(worker_id: str, out: object, response: object) -> int:
    registry = _worker(worker_id)[0]
    channel = EmbeddedChannel(worker_id, registry, out, response)
    with _lock:
        channel_id = next(_channel_ids)
        channels[channel_id] = channel
    return channel_id


def rebind(channel_id: int, out: object, response: object) -> None:
    channels[channel_id].bind(out, response)


def take_oversized(channel_id: int) -> bytes:
    return channels[channel_id].take_oversized()


def close_channel(channel_id: int) -> None:
    with _lock:
        channel = channels.pop(channel_id, None)
    if channel is not None:
        channel.close()


def _worker(worker_id: str) -> tuple[StoreRegistry, WorkerControl]:
    entry = _workers.get(worker_id)
    if entry is None:
        raise KeyError(f"embedded worker {worker_id} is not running")
    return entry
