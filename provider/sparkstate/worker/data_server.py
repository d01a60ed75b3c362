"""The fast data channel: frames over a Unix domain socket in the worker's private directory.

One thread per connection; the JVM keeps one connection per worker and uses it from the task that
leases the worker, so frames of one connection are strictly ordered. Pipelined BATCH frames therefore
land before the GET that follows them, which is what makes un-acknowledged puts safe.
"""
from __future__ import annotations

import os
import socket
import threading
import traceback
from typing import Callable

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


def serve_connection(conn: socket.socket, store_of: Callable[[int], object]) -> None:
    """Read frames until EOF, answer the synchronous ones. The hot loop of every get and put."""
    session = Session(store_of)
    reader = conn.makefile("rb", buffering=READ_BUFFER)
    read = reader.read
    send = conn.sendall
    unpack = p.HEADER.unpack
    header_size = p.HEADER.size
    handle_frame = session.handle
    try:
        while True:
            header = read(header_size)
            if len(header) < header_size:
                return  # the JVM closed the connection
            op, handle, length = unpack(header)
            payload = read(length) if length else b""
            if len(payload) < length:
                return
            if op == p.OP_SHM_ATTACH:
                _serve_shared_memory(conn, payload.decode("utf-8"), store_of)
                return
            response = handle_frame(op, handle, payload)
            if response is not None:
                send(response)
    except (ConnectionError, OSError):
        return
    except Exception:
        traceback.print_exc()
    finally:
        session.close()
        try:
            reader.close()
            conn.close()
        except OSError:
            pass
