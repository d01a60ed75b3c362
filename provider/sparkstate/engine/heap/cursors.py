"""Scans of the heap backend: point reads through a frozen view for an indexed prefix, sorted Arrow
columns copied at open for anything else."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...errors import StoreStateError
from ..arrow_columns import binary_column, offsets
from ..backend_contract import Cursor
from .versioned_map import VersionedMap


class HeapPrefixCursor(Cursor):
    """Scan of one indexed PrefixKeyScan prefix (a session's windows, a join key's values): point reads
    through a view frozen at open, O(keys with the prefix); writes during the scan copy on write."""

    def __init__(self, m: VersionedMap, prefix: bytes, on_close) -> None:
        self._map: VersionedMap | None = m
        self._view = m.freeze(None, pin=True)
        self._keys = sorted(m.view_keys(self._view, prefix))
        self._pos = 0
        self._on_close = on_close

    @property
    def closed(self) -> bool:
        return self._map is None

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        m = self._map
        if m is None:
            raise StoreStateError("cursor is closed (its store was released, reloaded or closed)")
        rows: list[tuple[bytes, bytes]] = []
        while not rows and self._pos < len(self._keys):
            rows, self._pos = m.read_chunk(self._view, self._keys, self._pos, max(1, max_rows), max_bytes)
        done = self._pos >= len(self._keys)
        if done:
            self.close()
        return rows, done

    def close(self) -> None:
        m, self._map = self._map, None
        if m is None:
            return
        self._keys = []
        m.unpin(self._view)  # a reader-only view: dropped, its image merged into the previous view
        cb, self._on_close = self._on_close, None
        if cb is not None:
            cb(self)


class HeapScanCursor(Cursor):
    """Any other scan (the whole store, e.g. watermark eviction; an unindexed prefix): the view's rows
    copied at open into sorted Arrow columns (C and numpy; nothing stays pinned), then served in
    chunks. Costs a transient copy of the rows scanned, not a Python loop per row."""

    def __init__(self, m: VersionedMap, prefix: bytes, on_close) -> None:
        view = m.freeze(None, pin=True)
        try:
            self._keys, self._values = m.view_columns(view, prefix)
        finally:
            m.unpin(view)
        self._key_ends = offsets(self._keys)
        self._value_ends = offsets(self._values)
        self._pos = 0
        self._closed = False
        self._on_close = on_close

    @property
    def closed(self) -> bool:
        return self._closed

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        if self._closed:
            raise StoreStateError("cursor is closed (its store was released, reloaded or closed)")
        start, n = self._pos, len(self._keys)
        end = min(n, start + max(1, max_rows))
        if end > start:
            # Bytes of rows start..i inclusive; stop at the first row reaching max_bytes (at least one row).
            base = self._key_ends[start] + self._value_ends[start]
            sizes = self._key_ends[start + 1:end + 1] + self._value_ends[start + 1:end + 1] - base
            end = start + min(end - start, int(np.searchsorted(sizes, max_bytes)) + 1)
        rows = list(zip(self._keys.slice(start, end - start).to_pylist(),
                        self._values.slice(start, end - start).to_pylist()))
        self._pos = end
        done = end >= n
        if done:
            self.close()
        return rows, done

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._keys = self._values = binary_column([], pa.large_binary())
        cb, self._on_close = self._on_close, None
        if cb is not None:
            cb(self)


