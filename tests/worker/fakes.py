"""A dict-backed stand-in for engine.store.Store, enough for the worker's frame handling; socket helpers."""
from __future__ import annotations


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
