"""RocksDBCursor: a prefix scan over a RocksDB snapshot, served in chunks without Python code per row."""
from __future__ import annotations

from itertools import chain, islice

import rocksdict

from ...errors import StoreStateError
from ..backend_contract import Cursor

# Cursor runs: the first is small (it measures the row size), later ones aim at the chunk's byte limit.
_FIRST_RUN_ROWS = 64
_MAX_RUN_ROWS = 16384

class RocksDBCursor(Cursor):
    """Prefix scan over a rocksdict snapshot. Holding the snapshot/iterator keeps the DB LOCK held,
    so `close` drops both references and the backend closes every open cursor before closing the DB.

    Rows are pulled from the iterator in runs (`islice`, no Python code per row) into `_buffer`, which
    always holds at least one row while the scan is not over, so `done` is exact. Runs are sized from
    the rows seen so far to stay near `max_bytes`; what a run fetched beyond a chunk's limits stays in
    `_buffer` for the next chunk. Keys are sorted and the scan starts at `prefix`, so the keys with the
    prefix are exactly the leading run of rows that have it (found by bisection, not a test per row).
    """

    def __init__(self, snapshot: rocksdict.Snapshot, prefix: bytes, on_close) -> None:
        self._snapshot: rocksdict.Snapshot | None = snapshot
        self._items = iter(snapshot.items(from_key=prefix)) if prefix else iter(snapshot.items())
        self._prefix = prefix
        self._buffer: list[tuple[bytes, bytes]] = []
        self._exhausted = False
        self._on_close = on_close
        self._fetch(1)

    def _fetch(self, n: int) -> list[tuple[bytes, bytes]]:
        """Append up to `n` more rows with the prefix to `_buffer`; returns them."""
        more = list(islice(self._items, n))
        if len(more) < n:
            self._exhausted = True
        prefix = self._prefix
        if prefix and more and not more[-1][0].startswith(prefix):
            lo, hi = 0, len(more) - 1  # more[hi] lacks the prefix; find the first row that does
            while lo < hi:
                mid = (lo + hi) // 2
                if more[mid][0].startswith(prefix):
                    lo = mid + 1
                else:
                    hi = mid
            del more[lo:]
            self._exhausted = True
        if self._exhausted:
            self._items = iter(())
        self._buffer.extend(more)
        return more

    @property
    def closed(self) -> bool:
        return self._snapshot is None

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        if self._snapshot is None:
            raise StoreStateError("cursor is closed (its store was released, reloaded or closed)")
        if not self._buffer:
            self.close()
            return [], True
        max_rows = max(1, max_rows)
        size = _row_bytes(self._buffer)
        step = min(_FIRST_RUN_ROWS, max_rows)
        while not self._exhausted and len(self._buffer) <= max_rows and size < max_bytes:
            size += _row_bytes(self._fetch(min(step, max_rows + 1 - len(self._buffer))))
            per_row = size // max(1, len(self._buffer)) + 1
            step = max(1, min(_MAX_RUN_ROWS, (max_bytes - size) // per_row + 1))
        rows = self._buffer
        n = min(len(rows), max_rows)
        if size >= max_bytes:
            # At least one row; then rows while the size before them is still under max_bytes.
            total = 0
            for i in range(n):
                total += len(rows[i][0]) + len(rows[i][1])
                if total >= max_bytes:
                    n = i + 1
                    break
        chunk, self._buffer = rows[:n], rows[n:]
        if not self._buffer and not self._exhausted:
            self._fetch(1)  # one row of lookahead, so `done` is exact
        done = not self._buffer
        if done:
            self.close()
        return chunk, done

    def close(self) -> None:
        if self._snapshot is None:
            return
        self._items = iter(())
        self._buffer = []
        self._snapshot = None
        cb, self._on_close = self._on_close, None
        if cb is not None:
            cb(self)


def _row_bytes(rows: list[tuple[bytes, bytes]]) -> int:
    return sum(map(len, chain.from_iterable(rows)))
