"""PackedTable: a bytes -> bytes hash table that packs each bucket's entries into one bytes object.

Why: a plain dict of bytes costs two Python objects (33-byte headers, rounded up to 8) and a dict entry
per key, ~110 bytes of overhead on top of, say, a 20-byte key and a 24-byte value. Here the per-object
overhead is paid per bucket (~LOAD keys), not per key.

Buckets: linear hashing, so buckets split one at a time as the table grows and no insert ever rehashes
the whole table. Within a bucket, one of two record layouts, for the whole table:
- *uniform* (every key has one length and every value another, as with the fixed-width UnsafeRows of
  most aggregations): bucket b is one bytes object `_records[b]` of `key || value` records of one size R.
  A lookup is `find(key)` accepted at a multiple of R; a key costs exactly its bytes.
- *general* (any lengths; the table switches once, for good, on the first write that breaks uniformity):
  `_index[b]` holds 16-byte entries `<fingerprint u32><offset u32><key length u32><value length u32>`
  (the fingerprint is the high half of the key's 64-bit hash) pointing into `_records[b]`. A lookup
  finds the fingerprint (accepted at entry boundaries) and confirms with `startswith`.
Either way a get or put is a handful of C calls, with no per-entry Python loop. Buckets are immutable:
a write builds the bucket anew (a memcpy of ~500 bytes), which measured faster than mutating a
bytearray in place, whose separate buffer costs a cache miss per get and whose slices need a second copy
to become bytes. In the general layout a value of another size is appended (the old record is garbage
until the bucket is compacted). A copy of the table is a copy of the bucket lists.

Not thread-safe: the caller (VersionedMap) serializes access.
"""
from __future__ import annotations

import functools
import struct
import sys
from typing import Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from ..arrow_columns import int_column, offsets
from .write_log import WriteLog, last_writes, radix_order

_ENTRY = struct.Struct("<IIII")
_ENTRY_SIZE = _ENTRY.size  # 16
_ENTRY_DTYPE = np.dtype([("fp", "<u4"), ("off", "<u4"), ("kl", "<u4"), ("vl", "<u4")])
_TAIL = struct.Struct("<III")  # an entry without its fingerprint
_PIECE_ROWS = 1 << 18  # rows packed at a time by a bulk build (from_writes)
LOAD = 8  # average entries per bucket before a bucket is split (8 measured faster than 6, 12 and 24)

_PER_BUCKET_OBJECT = sys.getsizeof(b"") + 8 + 4  # header, list slot, average rounding to 8 bytes
_hash = hash  # the tests swap in a colliding hash to exercise fingerprint clashes


class PackedTable:
    __slots__ = ("_index", "_records", "_high", "_low", "_len", "_bytes", "_klen", "_vlen", "_rlen")

    def __init__(self, data: Mapping[bytes, bytes] | None = None) -> None:
        self._records: list[bytes] = [b""]
        self._index: list[bytes] | None = None  # general layout only
        # Uniform layout: _rlen = _klen + _vlen > 0. Sizes not known yet (nothing written): _klen = -1.
        # General layout: _rlen = 0.
        self._klen, self._vlen, self._rlen = -1, -1, 1
        # Linear hashing: with 2**L <= buckets < 2**(L+1), bucket(h) = h & _high (L+1 low bits), or
        # h & _low (L low bits) when that bucket has not been split off yet.
        self._set_level(0)
        self._len = 0
        self._bytes = 0  # sum of len() of every bucket's bytes objects
        if data:
            self._load(data)

    def _set_level(self, level: int) -> None:
        self._high, self._low = (2 << level) - 1, (1 << level) - 1

    @property
    def uniform(self) -> bool:
        return self._rlen > 0

    # ---- bulk load (a restore) ----------------------------------------------------------------------
    def _load(self, data: Mapping[bytes, bytes]) -> None:
        """Every bucket built once, sized for LOAD entries on average."""
        n = len(data)
        nb = max(1, -(-n // LOAD))
        self._set_level(nb.bit_length() - 1)
        high, low = self._high, self._low
        klens, vlens = set(map(len, data)), set(map(len, data.values()))
        parts: list[list[bytes]] = [[] for _ in range(nb)]
        if len(klens) == 1 and len(vlens) == 1 and min(klens) > 0:
            for k, v in data.items():
                h = _hash(k)
                b = h & high
                parts[b if b < nb else h & low] += (k, v)
            self._klen, self._vlen = min(klens), min(vlens)
            self._rlen = self._klen + self._vlen
        else:
            entries: list[list[bytes]] = [[] for _ in range(nb)]
            sizes = [0] * nb
            pack = _ENTRY.pack
            for k, v in data.items():
                h = _hash(k)
                b = h & high
                if b >= nb:
                    b = h & low
                off = sizes[b]
                entries[b].append(pack((h >> 32) & 0xFFFFFFFF, off, len(k), len(v)))
                parts[b] += (k, v)
                sizes[b] = off + len(k) + len(v)
            self._index = [b"".join(e) for e in entries]
            self._rlen = 0
        self._records = [b"".join(p) for p in parts]
        self._len = n
        self._bytes = sum(map(len, self._records)) + (n * _ENTRY_SIZE if self._index is not None else 0)

    @classmethod
    def from_writes(cls, log: WriteLog) -> PackedTable:
        """The table that replaying `log` (a chain's rows in write order: a key's last write wins, a null
        value deletes) leaves, built with numpy and Arrow: the only Python work per row is `hash`. The
        buckets are packed a piece at a time (`_PIECE_ROWS` rows), so that beside the log and the table a
        restore holds a few arrays of one number per row: fresh memory is what a new worker pays most
        for (each page is zeroed on first touch)."""
        table = cls()
        hashes = log.hashes(_hash)
        rows = last_writes(log, hashes)
        n = len(rows)
        if n == 0:
            return table
        nb = max(1, -(-n // LOAD))
        table._set_level(nb.bit_length() - 1)
        row_hashes = hashes[rows]
        del hashes
        buckets = row_hashes & table._high
        np.copyto(buckets, row_hashes & table._low, where=buckets >= nb)
        order = radix_order(buckets, max(nb - 1, 1).bit_length())
        rows, row_hashes = rows[order], row_hashes[order]
        counts = np.bincount(buckets, minlength=nb)
        del buckets, order
        key_lengths, value_lengths = np.diff(offsets(log.keys)), np.diff(offsets(log.values))
        klens, vlens = key_lengths[rows], value_lengths[rows]
        uniform = klens.min() == klens.max() > 0 and vlens.min() == vlens.max()
        table._len = n
        table._records = []
        if uniform:
            table._klen, table._vlen = int(klens[0]), int(vlens[0])
            table._rlen = table._klen + table._vlen
        else:
            table._index, table._rlen = [], 0
        gather = (_fixed_width_gather(log, key_lengths, value_lengths, table._klen, table._vlen) if uniform
                  else None) or functools.partial(_interleaved, log)
        del key_lengths, value_lengths
        row_ends = np.cumsum(counts)
        bucket_cuts = np.unique(np.searchsorted(row_ends, np.arange(_PIECE_ROWS, n, _PIECE_ROWS), side="left"))
        first, payload_bytes = 0, 0
        for last in [*bucket_cuts.tolist(), nb - 1]:
            if last < first:
                continue
            lo = int(row_ends[first - 1]) if first else 0
            hi = int(row_ends[last])
            piece = slice(lo, hi)
            payload = gather(rows[piece])
            payload_bytes += len(payload)
            ends = np.cumsum(counts[first:last + 1])
            if uniform:
                ends *= table._rlen
                starts = np.concatenate(([0], ends[:-1]))
                table._records += [payload[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
            else:
                table._pack_general_piece(payload, row_hashes[piece], klens[piece], vlens[piece], ends)
            first = last + 1
        table._bytes = payload_bytes + (0 if uniform else n * _ENTRY_SIZE)
        return table

    def _pack_general_piece(self, payload: bytes, hashes: np.ndarray, klens: np.ndarray, vlens: np.ndarray,
                            bucket_ends: np.ndarray) -> None:
        """Append buckets of the general layout: `payload` holds their rows' `key || value` in bucket order,
        `bucket_ends` the cumulative row count at the end of each bucket."""
        row_ends = np.cumsum(klens + vlens)
        row_starts = row_ends - (klens + vlens)
        byte_ends = np.concatenate(([0], row_ends))[bucket_ends]
        byte_starts = np.concatenate(([0], byte_ends[:-1]))
        counts = np.diff(bucket_ends, prepend=0)
        entries = np.empty(len(hashes), _ENTRY_DTYPE)
        entries["fp"] = (hashes >> 32) & 0xFFFFFFFF
        entries["off"] = row_starts - np.repeat(byte_starts, counts)
        entries["kl"], entries["vl"] = klens, vlens
        index = entries.tobytes()
        entry_ends = (bucket_ends * _ENTRY_SIZE).tolist()
        self._records += [payload[s:e] for s, e in zip(byte_starts.tolist(), byte_ends.tolist())]
        self._index += [index[s:e] for s, e in zip([0] + entry_ends[:-1], entry_ends)]  # type: ignore[operator]

    # ---- lookups ----------------------------------------------------------------------------------
    def get(self, key: bytes, default=None):
        """The per-row read: a few C calls whatever the bucket size."""
        h = _hash(key)
        b = h & self._high
        records = self._records
        if b >= len(records):
            b = h & self._low
        rec = records[b]
        rlen = self._rlen
        if rlen:
            kl = self._klen
            if len(key) != kl:
                return default
            p = rec.find(key)
            while p >= 0:
                if not p % rlen:
                    p += kl
                    return rec[p:p + rlen - kl]
                p = rec.find(key, p + 1)
            return default
        p, off, vl = self._find_general(b, key, h)
        return default if p < 0 else rec[off:off + vl]

    def __len__(self) -> int:
        return self._len

    def _bucket(self, h: int) -> int:
        b = h & self._high
        return b if b < len(self._records) else h & self._low

    def _find_uniform(self, rec: bytes, key: bytes) -> int:
        rlen = self._rlen
        p = rec.find(key)
        while p >= 0 and p % rlen:
            p = rec.find(key, p + 1)
        return p

    def _find_general(self, b: int, key: bytes, h: int, _unpack=_ENTRY.unpack_from) -> tuple[int, int, int]:
        """General layout: (position of `key`'s entry in bucket b's index, offset of its value in the
        records, value length), or (-1, 0, 0). `h` is the key's hash."""
        idx = self._index[b]  # type: ignore[index]
        fp = ((h >> 32) & 0xFFFFFFFF).to_bytes(4, "little")
        p = idx.find(fp)
        while p >= 0:
            if not p & 15:
                _, off, kl, vl = _unpack(idx, p)
                if kl == len(key) and self._records[b].startswith(key, off):
                    return p, off + kl, vl
            p = idx.find(fp, p + 1)
        return -1, 0, 0

    # ---- writes -----------------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes, absent=None):
        """Set key to value; return the previous value, or `absent` if there was none."""
        rlen = self._rlen
        if rlen:
            kl = self._klen
            if len(key) == kl and len(value) == self._vlen:
                # The per-row write: _bucket and the uniform lookup of `get` inlined on purpose, like in
                # `get` (a Python call is ~0.1 us of a ~1 us lookup).
                h = _hash(key)
                b = h & self._high
                records = self._records
                if b >= len(records):
                    b = h & self._low
                rec = records[b]
                p = rec.find(key)
                while p >= 0:
                    if not p % rlen:
                        p += kl
                        end = p + self._vlen
                        records[b] = rec[:p] + value + rec[end:]
                        return rec[p:end]
                    p = rec.find(key, p + 1)
                records[b] = b"".join((rec, key, value))
                self._bytes += rlen
                return self._inserted(absent)
            if kl < 0 and key:  # the first write fixes the sizes
                self._klen, self._vlen, self._rlen = len(key), len(value), len(key) + len(value)
                return self.put(key, value, absent)
            self._to_general()
        h = _hash(key)
        b = self._bucket(h)
        idx, rec = self._index[b], self._records[b]  # type: ignore[index]
        kl, vl = len(key), len(value)
        p, off, ovl = self._find_general(b, key, h)
        if p < 0:
            self._index[b] = idx + _ENTRY.pack((h >> 32) & 0xFFFFFFFF, len(rec), kl, vl)  # type: ignore[index]
            self._records[b] = b"".join((rec, key, value))
            self._bytes += _ENTRY_SIZE + kl + vl
            return self._inserted(absent)
        old = rec[off:off + ovl]
        if vl == ovl:
            self._records[b] = rec[:off] + value + rec[off + vl:]
        else:
            self._index[b] = b"".join((idx[:p + 4], _TAIL.pack(len(rec), kl, vl), idx[p + 16:]))  # type: ignore[index]
            self._records[b] = b"".join((rec, key, value))
            self._bytes += kl + vl
            self._maybe_compact(b)
        return old

    def _inserted(self, absent):
        self._len += 1
        if self._len > LOAD * len(self._records):
            self._split()
        return absent

    def remove(self, key: bytes, absent=None):
        """Delete key; return its value, or `absent` if there was none."""
        h = _hash(key)
        b = self._bucket(h)
        rec = self._records[b]
        if self._rlen:
            if len(key) != self._klen:
                return absent
            p = self._find_uniform(rec, key)
            if p < 0:
                return absent
            rlen = self._rlen
            old = rec[p + self._klen:p + rlen]
            last = len(rec) - rlen
            # The bucket's last record fills the hole (order within a bucket does not matter).
            self._records[b] = rec[:last] if p == last else b"".join((rec[:p], rec[last:], rec[p + rlen:last]))
            self._bytes -= rlen
            self._len -= 1
            return old
        p, off, vl = self._find_general(b, key, h)
        if p < 0:
            return absent
        old = rec[off:off + vl]
        idx = self._index[b]  # type: ignore[index]
        self._index[b] = idx[:p] + idx[p + 16:]  # type: ignore[index]
        self._bytes -= _ENTRY_SIZE
        self._len -= 1
        self._maybe_compact(b)
        return old

    def _maybe_compact(self, b: int) -> None:
        """General layout: drop overwritten records once they are at least half of the bucket's."""
        live = sum(kl + vl for _, _, kl, vl in _ENTRY.iter_unpack(self._index[b]))  # type: ignore[index]
        if len(self._records[b]) - live >= max(live, 64):
            self._store(b, list(self._bucket_items(b)))

    def _store(self, b: int, items: list[tuple[bytes, bytes]]) -> None:
        """Bucket b := items, compacted."""
        old = len(self._records[b])
        if self._index is not None:
            old += len(self._index[b])
            entries, off = [], 0
            for k, v in items:
                entries.append(_ENTRY.pack((_hash(k) >> 32) & 0xFFFFFFFF, off, len(k), len(v)))
                off += len(k) + len(v)
            self._index[b] = b"".join(entries)
            self._bytes += len(entries) * _ENTRY_SIZE
        self._records[b] = b"".join([x for kv in items for x in kv])
        self._bytes += len(self._records[b]) - old

    def _split(self) -> None:
        """Linear hashing: split bucket `n - 2**level` into itself and a new bucket n."""
        high = self._high
        src = len(self._records) - (self._low + 1)
        stay, move = [], []
        for k, v in self._bucket_items(src):
            (move if _hash(k) & high != src else stay).append((k, v))
        self._records.append(b"")
        if self._index is not None:
            self._index.append(b"")
        self._store(src, stay)
        self._store(len(self._records) - 1, move)
        if len(self._records) == high + 1:
            self._high, self._low = (high << 1) | 1, high

    def _to_general(self) -> None:
        """Switch to the general layout (a write broke uniformity): index every record, once."""
        index = []
        kl, vl, rlen = self._klen, self._vlen, self._rlen
        for rec in self._records:
            index.append(b"".join([_ENTRY.pack((_hash(rec[o:o + kl]) >> 32) & 0xFFFFFFFF, o, kl, vl)
                                   for o in range(0, len(rec), rlen)]))
        self._index = index
        self._rlen = 0
        self._bytes += self._len * _ENTRY_SIZE

    # ---- iteration (snapshots, scans) -------------------------------------------------------------
    def _bucket_items(self, b: int) -> Iterator[tuple[bytes, bytes]]:
        rec = self._records[b]
        if self._rlen:
            kl, rlen = self._klen, self._rlen
            for o in range(0, len(rec), rlen):
                yield rec[o:o + kl], rec[o + kl:o + rlen]
        else:
            for _, off, kl, vl in _ENTRY.iter_unpack(self._index[b]):  # type: ignore[index]
                end = off + kl
                yield rec[off:end], rec[end:end + vl]

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        """Whole buckets from bucket `position` (None: 0) until `max_rows` entries are reached, and the next
        bucket (None: the end). A split moves entries to a bucket past the last one, which a walk reaches
        later in the same round."""
        b = position if isinstance(position, int) else 0
        rows: list[tuple[bytes, bytes]] = []
        nb = len(self._records)
        while b < nb and len(rows) < max_rows:
            rows.extend(self._bucket_items(b))
            b += 1
        return rows, b if b < nb else None

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for b in range(len(self._records)):
            yield from self._bucket_items(b)

    def keys(self) -> Iterator[bytes]:
        for k, _ in self.items():
            yield k

    __iter__ = keys

    # ---- copies and columns (full snapshots: C and numpy only, the GIL is shared with the data thread)
    def copy(self) -> PackedTable:
        """A frozen copy, O(buckets): the buckets are immutable, only the lists are copied."""
        other = PackedTable.__new__(PackedTable)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other._records = list(self._records)
        if self._index is not None:
            other._index = list(self._index)
        return other

    def arrow_batches(self, rows: int) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
        """Every entry as (keys, values) Arrow binary columns, up to `rows` per batch, gathered with
        numpy from the buckets: no Python code runs per entry."""
        data = np.frombuffer(b"".join(self._records), dtype=np.uint8)
        if self._rlen:
            if self._klen < 0 or not len(data):
                return
            kl, rlen = self._klen, self._rlen
            table = data.reshape(-1, rlen)
            for i in range(0, len(table), rows):
                chunk = table[i:i + rows]
                yield _fixed_width(chunk[:, :kl]), _fixed_width(chunk[:, kl:])
            return
        entries = np.frombuffer(b"".join(self._index), dtype=_ENTRY_DTYPE)  # type: ignore[arg-type]
        counts = np.fromiter((len(i) // _ENTRY_SIZE for i in self._index), np.int64,  # type: ignore[union-attr]
                             len(self._records))
        sizes = np.fromiter((len(r) for r in self._records), np.int64, len(self._records))
        bases = np.repeat(np.cumsum(sizes) - sizes, counts)
        for i in range(0, len(entries), rows):
            e = entries[i:i + rows]
            starts = bases[i:i + rows] + e["off"]
            klens = e["kl"].astype(np.int64)
            yield _gather(data, starts, klens), _gather(data, starts + klens, e["vl"].astype(np.int64))

    # ---- accounting -------------------------------------------------------------------------------
    @property
    def num_buckets(self) -> int:
        return len(self._records)

    @property
    def packed_bytes(self) -> int:
        """Bytes held by the buckets (payload, index entries and garbage)."""
        return self._bytes

    def memory_bytes(self) -> int:
        """Packed bytes plus, per bucket object, its header, list slot and allocator rounding (bytes
        objects are allocated at their exact size, so nothing else is hidden)."""
        objects = len(self._records) * (1 if self._index is None else 2)
        return self._bytes + objects * _PER_BUCKET_OBJECT


def _fixed_width_gather(log: WriteLog, key_lengths: np.ndarray, value_lengths: np.ndarray, klen: int,
                        vlen: int) -> Callable[[np.ndarray], bytes] | None:
    """rows -> their `key || value` records as one bytes object, by numpy gathers of fixed-width items: the
    common case (every key of the log has `klen` bytes and every value `vlen`, no deletes), cheaper than
    Arrow's takes. None when the log is not of that shape (`*_lengths`: every row's, in log order)."""
    keys = _fixed_items(log.keys, key_lengths, klen)
    values = _fixed_items(log.values, value_lengths, vlen) if vlen else None
    if keys is None or (vlen and values is None):
        return None
    dtype = np.dtype([("k", f"V{klen}"), ("v", f"V{vlen}")] if vlen else [("k", f"V{klen}")])

    def gather(rows: np.ndarray) -> bytes:
        records = np.empty(len(rows), dtype)
        records["k"] = keys[rows]
        if values is not None:
            records["v"] = values[rows]
        return records.tobytes()
    return gather


def _fixed_items(column: pa.Array, lengths: np.ndarray, width: int) -> np.ndarray | None:
    """The items of `column` as numpy void items of `width` bytes (no copy), or None unless every item is
    non-null and has that width (`lengths`: the items' lengths)."""
    if column.null_count or not len(column) or not (lengths == width).all():
        return None
    start = int(offsets(column[:1])[0])
    return np.frombuffer(column.buffers()[2], np.uint8, len(column) * width, start).view(f"V{width}")


def _interleaved(log: WriteLog, rows: np.ndarray) -> bytes:
    """`key || value` of each of `rows` of `log`, in order, as one bytes object."""
    picked = int_column(rows)
    # 64-bit offsets: a piece of large values may pass 2 GiB
    both = pa.concat_arrays([log.keys.take(picked).cast(pa.large_binary()),
                             log.values.take(picked).cast(pa.large_binary())])
    m = len(rows)
    pick = np.empty(2 * m, np.int64)
    pick[0::2], pick[1::2] = np.arange(m), np.arange(m, 2 * m)
    kv = both.take(int_column(pick))
    ends = offsets(kv)[[0, -1]]
    return kv.buffers()[2].slice(int(ends[0]), int(ends[1] - ends[0])).to_pybytes()


def _fixed_width(rows: np.ndarray) -> pa.BinaryArray:
    """Rows of a 2-d uint8 array as an Arrow binary column."""
    n, width = rows.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32) if width else np.zeros(n + 1, np.int32)
    payload = np.ascontiguousarray(rows).reshape(-1)
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(payload)])


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """data[starts[i]:starts[i] + lengths[i]] for every i, as an Arrow binary column."""
    n = len(starts)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    positions = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                        pa.py_buffer(data[positions])])
