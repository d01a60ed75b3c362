"""Turns data frames into store calls; shared by every transport (shm, socket, py4j, embedded).

A `Session` is one ordered stream of frames (one socket connection, or the py4j data path). Errors of
asynchronous frames (BATCH, SCAN_CLOSE) have no reply of their own: the session remembers the first one
and answers the next synchronous frame with it, so a failed put is never silently lost.
"""
from __future__ import annotations

import itertools
import threading
import traceback
from typing import Callable, Protocol

from ..errors import ProtocolError
from . import protocol as p

CHUNK_MAX_ROWS = 4096
_pack_int = p.INT.pack
CHUNK_MAX_BYTES = 1 << 20


class Cursor(Protocol):
    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]: ...
    def close(self) -> None: ...


class StoreLookup(Protocol):
    def __call__(self, handle: int): ...  # returns an engine Store


class Session:
    """Frame handling for one ordered frame stream. Not thread-safe: one stream, one thread."""

    _cursor_ids = itertools.count(1)
    _cursor_ids_lock = threading.Lock()

    def __init__(self, store_of: Callable[[int], object]):
        self._store_of = store_of
        self._cursors: dict[int, Cursor] = {}
        # The first error of an asynchronous frame, not reported yet. While it is None, a transport may
        # answer a lone GET itself instead of calling `handle`.
        self.pending_error: str | None = None

    # -- one frame ---------------------------------------------------------------------------
    def handle(self, op: int, handle: int, payload: bytes) -> bytes | None:
        """Apply one frame; return the response bytes of a synchronous frame, None otherwise. Never
        raises: a frame that fails is answered with an error frame (sync) or becomes the pending error."""
        if op == p.OP_GET and self.pending_error is None:
            return answer_get(self._store_of, handle, payload)
        if op in p.SYNC_OPS:
            if self.pending_error is not None:
                error, self.pending_error = self.pending_error, None
                if op == p.OP_SCAN_NEXT and len(payload) == 4:
                    self._close_cursor(p.INT.unpack(payload)[0])
                return p.encode_error(error)
            try:
                return self._sync(op, handle, payload)
            except Exception as exc:  # reported to the JVM, which fails the task
                return p.encode_error(describe_error(exc, op, handle))
        try:
            self._async(op, handle, payload)
        except Exception as exc:
            if self.pending_error is None:
                self.pending_error = describe_error(exc, op, handle)
        return None

    def _sync(self, op: int, handle: int, payload: bytes) -> bytes:
        if op == p.OP_GET:  # a key without a key group is simply absent: nothing can store one
            return p.encode_value(self._store_of(handle).get(payload))
        if op == p.OP_SCAN_OPEN:
            cursor = self._store_of(handle).open_cursor(payload)
            with Session._cursor_ids_lock:
                cursor_id = next(Session._cursor_ids) & 0x7FFFFFFF
            self._cursors[cursor_id] = cursor
            return self._chunk(cursor_id)
        if op == p.OP_SCAN_NEXT:
            return self._chunk(p.decode_cursor(op, payload))
        if op == p.OP_GET_MANY:
            return p.encode_values(self._store_of(handle).get_many(p.decode_keys(payload)))
        if op == p.OP_SYNC:
            if payload:
                raise ProtocolError(f"SYNC payload has {len(payload)} bytes, expected none")
            return p.OK
        raise ProtocolError(f"{p.op_name(op)} is not a data frame")

    def _async(self, op: int, handle: int, payload: bytes) -> None:
        if op == p.OP_BATCH:
            self._store_of(handle).apply_batch(p.decode_batch(payload))
        elif op == p.OP_SCAN_CLOSE:
            self._close_cursor(p.decode_cursor(op, payload))
        else:
            raise ProtocolError(f"{p.op_name(op)} is not a data frame")

    def _chunk(self, cursor_id: int) -> bytes:
        cursor = self._cursors.get(cursor_id)
        if cursor is None:
            raise ValueError(f"scan cursor {cursor_id} is not open (closed or never opened)")
        try:
            rows, done = cursor.next_chunk(CHUNK_MAX_ROWS, CHUNK_MAX_BYTES)
        except BaseException:
            self._close_cursor(cursor_id)
            raise
        if done:
            self._close_cursor(cursor_id)
        return p.encode_chunk(rows, done, cursor_id)

    def _close_cursor(self, cursor_id: int) -> None:
        cursor = self._cursors.pop(cursor_id, None)
        if cursor is not None:
            cursor.close()

    def close(self) -> None:
        """Close every cursor still open (a live cursor pins the database's files and lock)."""
        for cursor_id in list(self._cursors):
            try:
                self._close_cursor(cursor_id)
            except Exception:
                traceback.print_exc()


def answer_get(store_of: Callable[[int], object], handle: int, key: bytes) -> bytes:
    """The response to a GET: the per-row state lookup of every transport, with no extra call layers
    (`store_of` raises for an unknown handle, answered as an error)."""
    try:
        value = store_of(handle).get(key)  # type: ignore[attr-defined]
    except Exception as exc:
        return p.encode_error(describe_error(exc, p.OP_GET, handle))
    return p.ABSENT if value is None else _pack_int(len(value)) + value


def describe_error(exc: BaseException, op: int, handle: int) -> str:
    """Log the traceback (the worker's stderr); the one-line `Type: message` the JVM is told."""
    traceback.print_exc()
    return f"{type(exc).__name__}: {exc}"
