"""WriteLog: the rows a heap restore replays, in write order, and which of them the replay keeps.

A restore reads a chain of files (a full snapshot, then deltas) whose rows, taken in order, are a log of
writes: a key may be written many times, its last write wins, and a null value deletes it. Replaying
that log through a dict costs Python objects and a Python-level insert per row. Here the log is two
Arrow columns, and `last_writes` finds the surviving rows with numpy: a radix sort of the rows by the low
bits of their key's hash brings each key's writes together, in write order, and the last of each run
survives. Neighbours in a run are confirmed by comparing their keys; the few runs that hold several keys
(equal low bits) are resolved in Python, row by row.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import arrow_columns
from ..arrow_columns import binary_column, bools, int_column, validity

_HASH_SLICE = 1 << 16  # rows turned into Python bytes at a time to hash them (bounded transient objects)


def concat_binary(chunks: Sequence[pa.Array]) -> pa.Array:
    """Binary or large binary chunks as one array: binary (32-bit offsets, no cast of chunks that already are)
    while the bytes fit, large binary past 2 GiB."""
    kind = pa.binary() if sum(c.nbytes for c in chunks) <= arrow_columns.MAX_BINARY_BYTES else pa.large_binary()
    if not chunks:
        return binary_column([], kind)
    return pa.concat_arrays([c if c.type == kind else c.cast(kind) for c in chunks])


@dataclass
class WriteLog:
    """Keys and values of a log of writes, in write order, as two binary columns (large binary past 2 GiB; a
    null value is a delete, keys are never null)."""

    keys: pa.Array
    values: pa.Array

    @classmethod
    def of(cls, batches: Iterable[tuple[pa.Array, pa.Array]]) -> WriteLog:
        """The log of (keys, values) batches, in order. The batches' buffers are copied into one column
        each, so a caller that drops its batches holds the log's memory once."""
        keys, values = [], []
        for k, v in batches:
            keys.append(k)
            values.append(v)
        n, nv = sum(map(len, keys)), sum(map(len, values))
        null_keys = sum(c.null_count for c in keys)
        if n != nv or null_keys:
            raise ValueError(f"{n} keys with {nv} values ({null_keys} null keys): a log of writes needs one "
                             "value or null (a delete) per non-null key")
        return cls(concat_binary(keys), concat_binary(values))

    def __len__(self) -> int:
        return len(self.keys)

    def hashes(self, hash_fn: Callable[[bytes], int]) -> np.ndarray:
        """`hash_fn` of every key, as int64: the one step that runs Python per row."""
        n = len(self.keys)
        slices = (self.keys.slice(i, _HASH_SLICE).to_pylist() for i in range(0, n, _HASH_SLICE))
        return np.fromiter(itertools.chain.from_iterable(map(hash_fn, s) for s in slices), np.int64, n)


def radix_order(values: np.ndarray, bits: int) -> np.ndarray:
    """A stable permutation that sorts non-negative integers below 2**bits (any integer dtype; int64 is read
    as uint64). An LSD radix sort on 16-bit digits: numpy's stable sort of uint16 is a counting sort, so
    each pass is linear. At 2.5M rows two passes measured 0.04 s against 0.22 s for an argsort."""
    u = values.view(np.uint64) if values.dtype == np.int64 else values
    if bits <= 32 and u.dtype == np.uint64:
        u = u.astype(np.uint32)  # half the bytes to gather per pass
    order = np.argsort((u & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, max(bits, 1), 16):
        digit = ((u[order] >> np.uint64(shift)) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
    return order


def last_writes(log: WriteLog, hashes: np.ndarray) -> np.ndarray:
    """The rows of `log` that its replay keeps: each key's last write, unless that write is a delete. In no
    particular order."""
    n = len(log)
    if n == 0:
        return np.zeros(0, np.int64)
    # Rows by the low bits of their hash: a key's writes are adjacent, in write order. Sorting on 32 bits
    # (48 past 16M rows) leaves a few runs holding several keys (~n^2 / 2^33 of them), resolved as clashes.
    bits = 32 if n <= 1 << 24 else 48
    sort_key = (hashes.view(np.uint64) & np.uint64((1 << bits) - 1))
    order = radix_order(sort_key, bits)
    sorted_keys = sort_key[order]
    same_as_next = sorted_keys[1:] == sorted_keys[:-1]
    del sort_key, sorted_keys
    keep = np.ones(n, bool)  # by position in `order`: the last row of each run of equal sort keys
    keep[:-1] = ~same_as_next
    pairs = np.flatnonzero(same_as_next)
    if len(pairs):
        equal = pc.equal(log.keys.take(int_column(order[pairs])), log.keys.take(int_column(order[pairs + 1])))
        clashes = pairs[~bools(equal)]
        if len(clashes):
            _resolve_clashes(log, order, same_as_next, clashes, keep)
    survivors = order[keep]
    if log.values.null_count:
        survivors = survivors[validity(log.values)[survivors]]
    return survivors


def _resolve_clashes(log: WriteLog, order: np.ndarray, same_as_next: np.ndarray, clashes: np.ndarray,
                     keep: np.ndarray) -> None:
    """Runs of equal sort keys holding different keys: keep each key's last row, decided in Python."""
    run_start = np.flatnonzero(np.concatenate(([True], ~same_as_next)))  # first position of every run
    run_end = np.append(run_start[1:], len(order))
    for r in np.unique(np.searchsorted(run_start, clashes, side="right") - 1):
        lo, hi = int(run_start[r]), int(run_end[r])
        last: dict[bytes, int] = {}
        for pos in range(lo, hi):  # stable sort: positions in write order
            last[log.keys[int(order[pos])].as_py()] = pos
        keep[lo:hi] = False
        keep[list(last.values())] = True
