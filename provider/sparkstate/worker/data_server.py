"""The fast data channel: frames over a Unix domain socket in the worker's private directory.

One thread per connection; the JVM keeps one connection per worker and uses it from the task that
leases the worker, so frames of one connection are strictly ordered. Pipelined BATCH frames therefore
land before the GET that follows them, which is what makes un-acknowledged puts safe.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from .. import liveness
from . import protocol as p
from .dispatcher import Session, describe_error
from .shm_channel import ShmServer

READ_BUFFER = 1 << 20


class DataServer:
    def __init__(self, path: str, store_of: Callable[[int], object]):
        self.path = path
        self._store_of = store_of
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        os.chmod(path, 0o600)  # the directory is 0700 already; belt and braces
        self._listener.listen(16)

    def start(self) -> None:
        threading.Thread(target=self._accept_loop, name="sparkstate-data-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_connection, args=(conn, self._store_of),
                             name="sparkstate-data-conn", daemon=True).start()


def _serve_shared_memory(conn: socket.socket, path: str, store_of: Callable[[int], object]) -> None:
    """The JVM asked to move this connection's frames to a shared-memory segment (transport shm)."""
    try:
        server = ShmServer(conn, path, store_of)
    except Exception as exc:  # told to the JVM, which fails the task with it
        conn.sendall(p.encode_error(describe_error(exc, p.OP_SHM_ATTACH, 0)))
        return
    try:
        conn.sendall(p.OK)
        server.serve()
    finally:
        server.close()


def _read_exact(read: Callable[[int], bytes], n: int) -> bytes | None:
    """`n` bytes from the stream, or None at EOF. Large payloads are read in steps, so a length that
    announces more than ever arrives costs no more memory than what did arrive."""
    if n <= READ_BUFFER:
        data = read(n) if n else b""
        return data if len(data) == n else None
    parts = bytearray()
    while len(parts) < n:
        chunk = read(min(READ_BUFFER, n - len(parts)))
        if not chunk:
            return None
        parts += chunk
    return bytes(parts)


def serve_connection(conn: socket.socket, store_of: Callable[[int], object]) -> None:
    """Read frames until EOF, answer the synchronous ones. The hot loop of every get and put.

    A header that fails `protocol.check_header` loses the framing: it is answered with an error frame and
    the connection is closed (the JVM sees the error or EOF, never silence)."""
    session = Session(store_of)
    reader = conn.makefile("rb", buffering=READ_BUFFER)
    read = reader.read
    send = conn.sendall
    unpack = p.HEADER.unpack
    header_size = p.HEADER.size
    handle_frame = session.handle
    check_header = p.check_header
    tick = liveness.tick
    with _CONNECTIONS.serving():
        try:
            while True:
                header = read(header_size)
                if len(header) < header_size:
                    return  # the JVM closed the connection
                op, handle, length = unpack(header)
                bad = check_header(op, length)
                if bad is not None:
                    send(p.encode_error(f"ProtocolError: {bad}; closing the data connection"))
                    return
                payload = _read_exact(read, length)
                if payload is None:
                    return
                tick()
                if op == p.OP_SHM_ATTACH:
                    _serve_shared_memory(conn, payload.decode("utf-8", "replace"), store_of)
                    return
                response = handle_frame(op, handle, payload)
                if response is not None:
                    send(response)
        except (ConnectionError, OSError):
            return
        except Exception as exc:  # a bug, never a silent hang: tell the JVM, then close
            try:
                send(p.encode_error(describe_error(exc, 0, 0) + "; closing the data connection"))
            except OSError:
                pass
        finally:
            session.close()
            try:
                reader.close()
                conn.close()
            except OSError:
                pass


class _ConnectionTracker:
    """The data connections being served, so `drainData` can wait for abandoned ones to end."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._live: set[int] = set()

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._cond:
            ident = self._next
            self._next += 1
            self._live.add(ident)
        try:
            yield
        finally:
            with self._cond:
                self._live.discard(ident)
                self._cond.notify_all()

    def await_closed(self, timeout_s: float) -> bool:
        """Wait until every connection served now has ended; False if some still run after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            waiting = set(self._live)
            while waiting & self._live:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


_CONNECTIONS = _ConnectionTracker()


def await_connections_closed(timeout_s: float) -> bool:
    """Wait until every data connection of this worker that is open now has been closed by the JVM and
    fully served (its last frame handled); False if one is still busy after `timeout_s`."""
    return _CONNECTIONS.await_closed(timeout_s)
