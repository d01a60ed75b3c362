"""The live table of the heap backend's VersionedMap: the working contents, in one of two layouts.

`heap.layout` picks it:
- `packed` (PackedTable): entries packed per bucket; about a third of a dict's memory per key, at
  the price of a few more C calls per get and put;
- `dict` (DictTable): a plain dict of bytes; the fastest get, two Python objects and a dict entry
  per key.
Both answer the same small protocol, so VersionedMap's copy-on-write logic does not care which.
"""
from __future__ import annotations

import itertools
import sys
from typing import Iterable, Iterator, Mapping, Protocol

import pyarrow as pa

from ...config import HEAP_LAYOUTS
from ..arrow_columns import binary_column
from .packed_table import PackedTable
from .write_log import WriteLog

_DICT_SLICE = 1 << 16  # rows turned into Python objects at a time


class LiveTable(Protocol):
    def get(self, key: bytes, default=None): ...
    def put(self, key: bytes, value: bytes, absent=None): ...
    def remove(self, key: bytes, absent=None): ...
    def keys(self) -> Iterable[bytes]: ...
    def items(self) -> Iterable[tuple[bytes, bytes]]: ...
    def __len__(self) -> int: ...
    def memory_bytes(self) -> int: ...
    def copy(self) -> LiveTable: ...
    def arrow_batches(self, rows: int) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]: ...
    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]: ...


def _measure_overheads() -> tuple[int, int]:
    """(bytes object header, dict bytes per entry), measured on this interpreter."""
    n = 4096
    d = dict.fromkeys([b"k%07d" % i for i in range(n)], b"")
    return sys.getsizeof(b""), int(round((sys.getsizeof(d) - sys.getsizeof({})) / n))


BYTES_OBJECT_OVERHEAD, DICT_ENTRY_BYTES = _measure_overheads()


class DictTable(dict):
    """A dict of bytes with the LiveTable write protocol; `get` stays dict's own (C) method."""

    def __init__(self, data: Mapping[bytes, bytes] | None = None) -> None:
        super().__init__(data or ())
        self._payload = sum(map(len, self)) + sum(map(len, self.values()))

    def put(self, key: bytes, value: bytes, absent=None):
        old = self.get(key, absent)
        self[key] = value
        self._payload += len(value) + (len(key) if old is absent else -len(old))
        return old

    def remove(self, key: bytes, absent=None):
        old = self.pop(key, absent)
        if old is not absent:
            self._payload -= len(key) + len(old)
        return old

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        """Up to `max_rows` entries from offset `position` (None: 0) in the dict's order, and the next
        offset (None: the end). Skipping to the offset is a C loop over the entries before it. Removals
        shift later entries back, so a walk may pass over a few; the next round visits them."""
        start = position if isinstance(position, int) else 0
        rows = list(itertools.islice(dict.items(self), start, start + max_rows))
        return rows, start + len(rows) if len(rows) == max_rows else None

    def copy(self) -> DictTable:
        other = DictTable.__new__(DictTable)
        dict.update(other, self)
        other._payload = self._payload
        return other

    def arrow_batches(self, rows: int) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
        keys, values = list(dict.keys(self)), list(dict.values(self))
        for i in range(0, len(keys), rows):
            yield binary_column(keys[i:i + rows]), binary_column(values[i:i + rows])

    def memory_bytes(self) -> int:
        """Payload plus the measured per-object and per-entry overheads."""
        return self._payload + len(self) * (2 * BYTES_OBJECT_OVERHEAD + DICT_ENTRY_BYTES)


def table_from_writes(layout: str, log: WriteLog) -> LiveTable:
    """A table of `layout` holding what replaying `log` leaves (write_log.py: a key's last write wins, a
    null value deletes): a restore's chain, read without inserting row by row where the layout allows."""
    if layout == "packed":
        return PackedTable.from_writes(log)
    rows: dict[bytes, bytes] = {}
    for i in range(0, len(log), _DICT_SLICE):
        keys, values = log.keys.slice(i, _DICT_SLICE), log.values.slice(i, _DICT_SLICE)
        if not values.null_count:
            rows.update(zip(keys.to_pylist(), values.to_pylist()))
            continue
        for key, value in zip(keys.to_pylist(), values.to_pylist()):
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
    return new_live_table(layout, rows)


def new_live_table(layout: str, data: Mapping[bytes, bytes] | None = None) -> LiveTable:
    if layout == "packed":
        return PackedTable(data)
    if layout == "dict":
        return DictTable(data)
    raise ValueError(f"unknown heap layout {layout!r}; expected one of {', '.join(HEAP_LAYOUTS)}")
