"""Idle-state expiry of a stream-stream join: a side's two stores drop a join key together.

A join side (state format 2) keeps a key's row count in `<side>-keyToNumValues` and its rows in
`<side>-keyWithIndexToValue` under (key, index) for index 0..count-1. Spark reads an indexed row only
below the count it just read, and writes index `count` before it raises the count. So the count store
alone decides expiry: it is stamped and expires like any store (engine/ttl.py), and a key whose count is
hidden has no rows for Spark. The values store carries no stamps; its commit deletes, a bounded slice at a
time, the *orphans*: rows whose key has no visible count in the partner store, or whose index is not below
it (what a key that expired and came back leaves past its new count). Spark never reads an orphan before
writing it again, so deleting one changes no result, whenever it happens.

A values-store key is `kg + UnsafeRow(key columns..., index: long)`; the count-store key of the same join
key is `kg + UnsafeRow(key columns...)`. `IndexedKeys` turns the first into the second from the store's key
schema: the same bytes, one fixed slot fewer, offsets of variable-length columns moved by that slot.
"""
from __future__ import annotations

import json
import re
import struct
from typing import Callable, Sequence

from ..keygroups import KEY_GROUP_BYTES
from .backend_contract import Backend

COUNT_SUFFIX = "-keyToNumValues"
VALUES_SUFFIX = "-keyWithIndexToValue"
_SLOT = 8
_LONG = struct.Struct("<q")
# Spark types an UnsafeRow holds in its 8-byte slot (everything else is offset and size of bytes after
# the slots); a decimal fits its slot up to 18 digits.
_FIXED_TYPES = frozenset({"boolean", "byte", "short", "integer", "long", "float", "double", "date",
                          "timestamp", "timestamp_ntz", "null", "void"})
_DECIMAL = re.compile(r"decimal\((\d+),\s*-?\d+\)")
_INTERVAL = re.compile(r"interval (year|month|day|hour|minute|second)( to (year|month|day|hour|minute|second))?")

# The visible row counts of count-store keys (None: no count), or None when the partner store cannot
# answer for the version being committed.
CountLookup = Callable[[Sequence[bytes]], "list[int | None] | None"]


def is_values_store(store_name: str) -> bool:
    return store_name.endswith(VALUES_SUFFIX)


def count_store_of(values_store_name: str) -> str:
    """The name of the count store on the same join side."""
    return values_store_name[:-len(VALUES_SUFFIX)] + COUNT_SUFFIX


def count_of(value: bytes) -> int:
    """A count store's value: an UnsafeRow of one long (one null-bitset word, then the slot)."""
    return _LONG.unpack_from(value, _SLOT)[0]


def _is_fixed(data_type: object) -> bool:
    if not isinstance(data_type, str):
        return False  # struct, array, map, user-defined: bytes after the slots
    if data_type in _FIXED_TYPES:
        return True
    decimal = _DECIMAL.fullmatch(data_type)
    if decimal:
        return int(decimal.group(1)) <= 18
    return _INTERVAL.fullmatch(data_type) is not None


def _bitset_bytes(fields: int) -> int:
    return (fields + 63) // 64 * 8


class IndexedKeys:
    """Splits a values-store key into the count-store key of its join key and its index."""

    def __init__(self, key_schema_json: str) -> None:
        fields = json.loads(key_schema_json).get("fields") or []
        if len(fields) < 2 or fields[-1].get("type") != "long":
            raise ValueError(f"not a join's (key..., index) schema: {key_schema_json[:200]}")
        self._variable = [i for i, f in enumerate(fields[:-1]) if not _is_fixed(f.get("type"))]
        n = len(fields) - 1  # join key columns
        self._old_bits, self._new_bits = _bitset_bytes(n + 1), _bitset_bytes(n)
        self._old_fixed = self._old_bits + _SLOT * (n + 1)
        self._shift = self._old_fixed - (self._new_bits + _SLOT * n)
        self._n = n

    def split(self, storage_key: bytes) -> tuple[bytes, int] | None:
        """(count-store key, index), or None for bytes that are no such row (never deleted on a guess)."""
        row = storage_key[KEY_GROUP_BYTES:]
        if len(row) < self._old_fixed:
            return None
        n, old_bits, new_bits = self._n, self._old_bits, self._new_bits
        index = _LONG.unpack_from(row, old_bits + _SLOT * n)[0]
        slots = bytearray(row[old_bits:old_bits + _SLOT * n])
        for i in self._variable:
            at = _SLOT * i
            word = int.from_bytes(slots[at:at + _SLOT], "little")
            if word == 0:
                continue  # a null column
            offset, size = word >> 32, word & 0xFFFFFFFF
            if offset < self._old_fixed or offset + size > len(row):
                return None
            slots[at:at + _SLOT] = (((offset - self._shift) << 32) | size).to_bytes(_SLOT, "little")
        bits = int.from_bytes(row[:old_bits], "little") & ((1 << n) - 1)  # the index's own bit dropped
        key = storage_key[:KEY_GROUP_BYTES] + bits.to_bytes(new_bits, "little") + bytes(slots) + row[self._old_fixed:]
        return key, index


class OrphanSweep:
    """The values store's share of a join side's expiry: each commit deletes the orphans among the next
    slice of its entries (continued from the last commit's slice, from the start after the end)."""

    def __init__(self, key_schema_json: str) -> None:
        self._keys = IndexedKeys(key_schema_json)
        self._position: object | None = None

    def sweep(self, backend: Backend, counts: CountLookup, max_rows: int) -> int | None:
        """Delete the orphans among the next `max_rows` entries; returns how many (None: the count store
        did not answer, nothing was deleted and the slice is walked again next time)."""
        rows, position = backend.walk(self._position, max_rows)
        split = [self._keys.split(k) for k, _ in rows]
        wanted = sorted({s[0] for s in split if s is not None})
        found = counts(wanted) if wanted else []
        if found is None:
            return None
        count_by_key = dict(zip(wanted, found))
        orphans = [(k, None) for (k, _), s in zip(rows, split)
                   if s is not None and (count_by_key[s[0]] is None or s[1] >= count_by_key[s[0]])]
        if orphans:
            backend.apply_batch(orphans)
        self._position = position
        return len(orphans)
