"""Stand-ins for the worker's tests: a dict-backed store (enough for frame handling), the JVM side of the
shared-memory channel (what ShmDataChannel.java does), socket helpers."""
from __future__ import annotations

import mmap
import os
import socket
import time

from sparkstate.worker import protocol as p
from sparkstate.worker import shm_channel as shm


class DictCursor:
    def __init__(self, rows):
        self._rows = rows
        self._pos = 0
        self.closed = False

    def next_chunk(self, max_rows, max_bytes):
        chunk = self._rows[self._pos:self._pos + max_rows]
        self._pos += len(chunk)
        return chunk, self._pos >= len(self._rows)

    def close(self):
        self.closed = True


class DictStore:
    def __init__(self):
        self.data: dict[bytes, bytes] = {}
        self.cursors: list[DictCursor] = []
        self.fail_next_batch = False

    def get(self, key):
        return self.data.get(key)

    def get_many(self, keys):
        return [self.data.get(key) for key in keys]

    def apply_batch(self, records):
        if self.fail_next_batch:
            self.fail_next_batch = False
            raise OSError("disk full")
        for k, v in records:
            if v is None:
                self.data.pop(k, None)
            else:
                self.data[k] = v

    def open_cursor(self, prefix):
        cursor = DictCursor(sorted((k, v) for k, v in self.data.items() if k.startswith(prefix)))
        self.cursors.append(cursor)
        return cursor


def recv_exact(sock, n: int) -> bytes:
    """Exactly `n` bytes from a socket (fails the test if the server closes it first)."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "server closed the connection"
        buf += chunk
    return buf


class JvmSide:
    """What the shim does: map a segment, attach it over the socket, publish requests, await answers."""

    def __init__(self, socket_path: str, segment_path: str, capacity: int):
        with open(segment_path, "wb") as f:
            f.truncate(shm.HEADER_BYTES + 2 * capacity)
        fd = os.open(segment_path, os.O_RDWR)
        self.map = mmap.mmap(fd, shm.HEADER_BYTES + 2 * capacity)
        os.close(fd)
        self.words = memoryview(self.map)[:shm.HEADER_BYTES].cast("q")
        self.capacity = capacity
        self.seq = 0
        self.doorbells = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(socket_path)
        path = segment_path.encode()
        self.sock.sendall(p.encode_request(p.OP_SHM_ATTACH, 0, path))
        self.attach_answer = p.INT.unpack(recv_exact(self.sock, 4))[0]
        os.unlink(segment_path)  # as the shim does: both sides have it mapped

    def publish(self, data: bytes, flags: int = 0) -> None:
        self.map[shm.HEADER_BYTES:shm.HEADER_BYTES + len(data)] = data
        shm._LEN_FLAGS.pack_into(self.map, shm.REQ_LEN, len(data), flags)
        self.seq += 1
        self.words[shm.REQ_SEQ // 8] = self.seq
        if self.words[shm.WORKER_SLEEPING // 8]:
            self.doorbells += 1
            self.sock.sendall(b"\x01")

    def await_answer(self, timeout: float = 10.0) -> tuple[bytes, int]:
        deadline = time.monotonic() + timeout
        while self.words[shm.RESP_SEQ // 8] != self.seq:
            assert time.monotonic() < deadline, "the worker did not answer"
            time.sleep(0)
        length, flags = shm._LEN_FLAGS.unpack_from(self.map, shm.RESP_LEN)
        start = shm.HEADER_BYTES + self.capacity
        return self.map[start:start + length], flags

    def request(self, frames: bytes) -> bytes:
        """Publishes `frames` (split like the shim splits them) and returns the whole response."""
        pieces = [frames[i:i + self.capacity] for i in range(0, len(frames), self.capacity)] or [b""]
        for piece in pieces[:-1]:
            self.publish(piece, shm.FLAG_MORE)
            assert self.await_answer() == (b"", 0)
        self.publish(pieces[-1])
        response, flags = self.await_answer()
        while flags & shm.FLAG_MORE:
            self.publish(b"", shm.FLAG_CONTINUE)
            piece, flags = self.await_answer()
            response += piece
        return response

    def get(self, handle: int, key: bytes) -> bytes | None:
        response = self.request(p.encode_request(p.OP_GET, handle, key))
        (n,) = p.INT.unpack_from(response, 0)
        if n == p.ERROR_CODE:
            raise RuntimeError(p.decode_error(response))
        return None if n == -1 else response[4:4 + n]

    def close(self) -> None:
        self.publish(b"", shm.FLAG_CLOSE)
        self.sock.close()

    def abandon(self) -> None:
        """Drop the socket and the mapping (after the worker closed the channel, or after close)."""
        self.sock.close()
        self.words.release()
        self.map.close()
