"""BeforeImage: what the keys written after a view was frozen held at that view (VersionedMap's images).

An image is kept in one of two forms:
- *log*, for the views of committed versions: every write appends (key, old value) in write order, and
  the first entry of a key is its value at the view. Appends gather in two Python lists and become
  Arrow binary columns every LOG_CHUNK_ROWS entries and when a newer version is frozen (`seal`). A
  sealed entry costs its key's and old value's bytes plus 8 bytes of offsets, where a dict entry costs
  three Python objects (~150 bytes: the slot, the key, the old value), and an append costs less than a
  dict's test-and-set. Keys written many times are compacted in Arrow once the log outgrows twice its
  last compacted size, so a log stays within a small factor of the keys it covers.
- *dict* (key -> first old value), for reader views (a cursor reads through its image by key while
  the task keeps writing) and for a log that a point read needs; a log read by key turns into a dict
  for good. This happens only when a cursor stays open across a commit.
Either form answers the same questions: the first value of each key (reads, snapshots, changes) and
the entries newest first (rollback).
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_columns import binary_column
from .live_table import BYTES_OBJECT_OVERHEAD, DICT_ENTRY_BYTES


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()  # "no such key at this view" (a tombstone)

LOG_CHUNK_ROWS = 4096  # pending log entries turned into Arrow columns at once
_MIN_COMPACT_ROWS = 4 * LOG_CHUNK_ROWS  # a log is compacted once it has at least this many entries
_LIST_SLOT = 8
_CHUNK_OVERHEAD = 512  # two Arrow arrays and their buffers' Python and C headers, roughly


def _object_bytes(b: bytes) -> int:
    """A bytes object's allocation: header and payload, rounded up to the allocator's 8 bytes."""
    return (BYTES_OBJECT_OVERHEAD + len(b) + 7) & ~7


class BeforeImage:
    __slots__ = ("_dict", "_keys", "_olds", "_chunks", "_rows", "_compact_at")

    def __init__(self, lookups: bool = False) -> None:
        self._dict: dict[bytes, object] | None = {} if lookups else None
        self._keys: list[bytes] = []                  # pending log entries (None: absent)
        self._olds: list[bytes | None] = []
        self._chunks: list[tuple[pa.BinaryArray, pa.BinaryArray]] = []  # sealed log entries, in order
        self._rows = 0                                 # log entries, pending and sealed
        self._compact_at = _MIN_COMPACT_ROWS

    @property
    def is_log(self) -> bool:
        return self._dict is None

    def __len__(self) -> int:
        """Entries held: distinct keys of a dict, entries (a key may repeat) of a log."""
        return self._rows if self._dict is None else len(self._dict)

    def __bool__(self) -> bool:
        return len(self) > 0

    # ---- writes ---------------------------------------------------------------------------------
    def record(self, keys: list[bytes], olds: list[bytes | None]) -> None:
        """Old values (None: the key had none) of keys just written, in write order."""
        d = self._dict
        if d is not None:
            for k, old in zip(keys, olds):
                if k not in d:
                    d[k] = ABSENT if old is None else old
            return
        self._keys += keys
        self._olds += olds
        self._rows += len(keys)
        if len(self._keys) >= LOG_CHUNK_ROWS:
            self.seal()
            if self._rows >= self._compact_at:  # amortized over the writes, never at a commit's seal
                self._compact()

    def seal(self) -> None:
        """Turn pending log entries into Arrow columns (O(pending), at most LOG_CHUNK_ROWS at a time)."""
        if self._keys:
            self._chunks.append((binary_column(self._keys), binary_column(self._olds)))
            self._keys, self._olds = [], []

    def _compact(self) -> None:
        keys, olds = self._first_entries()
        self._chunks = [(keys, olds)]
        self._rows = len(keys)
        self._compact_at = max(_MIN_COMPACT_ROWS, 2 * self._rows)

    def _first_entries(self) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        """Each key's first log entry, in first-write order (Arrow's hash kernels; no Python per entry)."""
        keys, olds = self._columns()
        first = pc.index_in(pc.unique(keys), value_set=keys)
        return keys.take(first), olds.take(first)

    def absorb_newer(self, newer: BeforeImage) -> None:
        """Take in the image of a newer view being dropped: this image's values win (they are older)."""
        if not newer:
            return
        if self._dict is not None:
            d = self._dict
            for k, v in newer.first_values().items():
                d.setdefault(k, v)
        elif newer._dict is None:
            self.seal()
            newer.seal()
            self._chunks += newer._chunks
            self._rows += newer._rows
        else:
            self.record(list(newer._dict), [None if v is ABSENT else v for v in newer._dict.values()])  # type: ignore[misc]
        newer.clear()

    def clear(self) -> None:
        if self._dict is not None:
            self._dict.clear()
        self._keys, self._olds, self._chunks, self._rows = [], [], [], 0

    # ---- reads ----------------------------------------------------------------------------------
    def get(self, key: bytes, default: object = None) -> object:
        """The key's value at the view (ABSENT: it had none), or `default` if it was not written."""
        if self._dict is None:
            first = self.first_values()  # a point read of a log: a dict from now on
            self.clear()
            self._dict = first
        return self._dict.get(key, default)

    def items(self) -> Iterator[tuple[bytes, object]]:
        """(key, value at the view or ABSENT); a log's in write order, with repeats (the first counts)."""
        if self._dict is not None:
            yield from self._dict.items()
            return
        for keys, olds in self._chunks:
            for k, o in zip(keys.to_pylist(), olds.to_pylist()):
                yield k, ABSENT if o is None else o
        for k, o in zip(self._keys, self._olds):
            yield k, ABSENT if o is None else o

    def newest_first(self) -> Iterator[tuple[bytes, object]]:
        """The entries in reverse write order: undoing them one by one leaves each key at its first value."""
        if self._dict is not None:
            yield from self._dict.items()
            return
        entries = list(self.items())
        yield from reversed(entries)

    def keys(self) -> Iterator[bytes]:
        return (k for k, _ in self.items())

    def first_values(self) -> dict[bytes, object]:
        """key -> its value at the view (ABSENT: none)."""
        if self._dict is not None:
            return dict(self._dict)
        keys, olds = self._first_entries()
        return dict(zip(keys.to_pylist(), [ABSENT if o is None else o for o in olds.to_pylist()]))

    def _columns(self) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        self.seal()
        if not self._chunks:
            empty = binary_column([])
            return empty, empty
        if len(self._chunks) == 1:
            return self._chunks[0]
        return (pa.concat_arrays([k for k, _ in self._chunks]), pa.concat_arrays([o for _, o in self._chunks]))

    # ---- accounting -----------------------------------------------------------------------------
    def memory_bytes(self) -> int:
        """Estimate: a dict's slots, key and value objects; a log's Arrow buffers and pending objects."""
        if self._dict is not None:
            d = self._dict
            return (len(d) * DICT_ENTRY_BYTES + sum(map(_object_bytes, d))
                    + sum(_object_bytes(v) for v in d.values() if v is not ABSENT))  # type: ignore[arg-type]
        total = sum(k.nbytes + o.nbytes + _CHUNK_OVERHEAD for k, o in self._chunks)
        total += 2 * _LIST_SLOT * len(self._keys) + sum(map(_object_bytes, self._keys))
        total += sum(_object_bytes(o) for o in self._olds if o is not None)
        return total

    def __repr__(self) -> str:
        return f"BeforeImage({'log' if self._dict is None else 'dict'}, {len(self)} entries)"
