"""VersionedMap: an in-memory key-value map with O(1) copy-on-write views, for the heap backend.

Layout: one live table (the working contents, a LiveTable: packed or dict, see live_table) plus a
*chain* of views in the order they were frozen.
Each view has a *before image* (before_image.py): for every key first written after that view was frozen
and before the next view was, the value it had at the view (or ABSENT). Reading key k through view i walks the before
images of views i, i+1, ..., newest and takes the first hit; with no hit, k is unchanged since view i and
the live table answers. So:

- freezing a view is appending an empty image to the chain, and sealing the pending entries of the
  images of versions (at most LOG_CHUNK_ROWS): independent of the state size and of the keys written;
- a write hands the old value to the newest view's image (copy on write; values are immutable bytes, so
  "copy" is a reference, never a deep copy); committed versions keep their images as compact logs;
- dropping view i merges its image into view i-1's (the older image wins); dropping the oldest view
  frees a log image at once (a few Arrow buffers) and a dict image later, by `take_garbage`;
- rolling the live table back to view i applies the images newest-first, O(keys changed since i).

Views are either committed versions (the backend keeps the newest few) or pinned readers: a cursor
(a view frozen at SCAN_OPEN) or the background full snapshot. A reader never sees a later write.

Threads: the task thread writes and reads (under the store lock); the background snapshot thread only
reads through its pinned view. `_lock` guards the live table, the chain and every image, and is held per
batch of writes and per chunk of reads, so a reader can never observe a live value whose copy-on-write
before-image has not been recorded yet.
"""
from __future__ import annotations

import itertools
import sys
import threading
from typing import Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_columns import binary_column
from .before_image import ABSENT, BeforeImage
from .live_table import BYTES_OBJECT_OVERHEAD, DICT_ENTRY_BYTES, DictTable, LiveTable, new_live_table
from .packed_table import PackedTable

__all__ = ["ABSENT", "VersionedMap", "View", "scan_prefix_length"]


class View:
    """A frozen image of the map. `version` is None for reader-only views (cursors)."""

    __slots__ = ("version", "before", "pins", "retired", "chain")

    def __init__(self, version: int | None) -> None:
        self.version = version
        # Versions' images are logs; a reader view's image is read by key while the task writes: a dict.
        self.before = BeforeImage(lookups=version is None)
        self.pins = 0
        self.retired = False  # no longer wanted; dropped as soon as nobody pins it
        self.chain = None  # the Chain of files of this version (set by the backend once durable)

    def __repr__(self) -> str:
        return f"View(version={self.version}, changed={len(self.before)}, pins={self.pins})"


def _set_entry_bytes() -> int:
    n = 4096
    return int(round((sys.getsizeof({b"k%07d" % i for i in range(n)}) - sys.getsizeof(set())) / n))


SET_ENTRY_BYTES = _set_entry_bytes()
_UNWRITTEN = object()  # a key an image does not hold


def scan_prefix_length(key: bytes) -> int | None:
    """Length of the PrefixKeyScan prefix `kg(4) + u32be(len) + prefixRow` of a storage key."""
    if len(key) < 8:
        return None
    n = 8 + int.from_bytes(key[4:8], "big")
    return n if n <= len(key) else None


class VersionedMap:
    def __init__(self, data: Mapping[bytes, bytes] | LiveTable, prefix_index: bool, layout: str) -> None:
        """`data`: the starting contents; a LiveTable (a restore builds one of `layout`) is adopted as it is."""
        self._live = data if isinstance(data, (PackedTable, DictTable)) else new_live_table(layout, data)
        # The live value of a key: the table's own get (the table is never replaced), the per-row read.
        self.get: Callable[[bytes], bytes | None] = self._live.get
        self._chain: list[View] = []
        self._garbage: list[BeforeImage] = []  # dict images of dropped views, freed by take_garbage
        self._lock = threading.Lock()
        self._index: dict[bytes, set[bytes]] | None = None
        if prefix_index:
            self._index = {}
            for k in self._live.keys():
                self._index_add(k)

    # ---- prefix index (PrefixKeyScan stores): scan prefix -> keys --------------------------------
    def _index_add(self, key: bytes) -> None:
        n = scan_prefix_length(key)
        if n is not None:
            self._index.setdefault(key[:n], set()).add(key)  # type: ignore[union-attr]

    def _index_remove(self, key: bytes) -> None:
        n = scan_prefix_length(key)
        if n is not None:
            keys = self._index.get(key[:n])  # type: ignore[union-attr]
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._index[key[:n]]  # type: ignore[union-attr]

    # ---- live data (task thread) -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._live)

    def sample_keys(self, limit: int) -> list[bytes]:
        """The first `limit` live keys in the table's own order (no copy of the rest)."""
        with self._lock:
            return list(itertools.islice(self._live.keys(), limit))

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        """Live entries from `position` on, in the table's own order (LiveTable.walk)."""
        with self._lock:
            return self._live.walk(position, max_rows)

    def apply(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        put, remove, index = self._live.put, self._live.remove, self._index
        with self._lock:
            olds = []
            keep = olds.append
            for k, v in records:
                old = remove(k, None) if v is None else put(k, v, None)  # None: the key had no value
                keep(old)
                if index is not None:
                    if v is None and old is not None:
                        self._index_remove(k)
                    elif v is not None and old is None:
                        self._index_add(k)
            if self._chain:
                self._chain[-1].before.record([k for k, _ in records], olds)

    # ---- views ---------------------------------------------------------------------------------
    def freeze(self, version: int | None, pin: bool = False) -> View:
        """O(1): a view of the current contents; later writes copy on write into its image."""
        view = View(version)
        view.pins = 1 if pin else 0
        with self._lock:
            if version is not None:
                for older in self._chain:
                    older.before.seal()
            self._chain.append(view)
        return view

    def pin(self, view: View) -> None:
        with self._lock:
            view.pins += 1

    def unpin(self, view: View) -> None:
        with self._lock:
            view.pins -= 1
            if view.pins <= 0 and (view.retired or view.version is None):
                self._drop(view)

    def retire(self, view: View) -> None:
        """Drop the view now, or when its last reader unpins it."""
        with self._lock:
            view.retired = True
            if view.pins <= 0:
                self._drop(view)

    def _drop(self, view: View) -> None:
        try:
            i = next(n for n, v in enumerate(self._chain) if v is view)
        except StopIteration:
            return
        if i > 0:
            self._chain[i - 1].before.absorb_newer(view.before)  # empties view.before
        elif view.before and not view.before.is_log:
            # Freeing a dict image is O(keys in it). Defer that to `take_garbage` (the next write
            # batch), so a commit that evicts an old version stays O(1).
            self._garbage.append(view.before)
            view.before = BeforeImage(lookups=True)
        else:
            view.before.clear()  # a log is a few Arrow buffers
        del self._chain[i]

    def take_garbage(self) -> None:
        """Free the images of dropped views (outside the lock; the caller's thread pays for it)."""
        with self._lock:
            garbage, self._garbage = self._garbage, []
        garbage.clear()

    def is_pinned_after(self, view: View) -> bool:
        with self._lock:
            i = self._position(view)
            return any(v.pins > 0 for v in self._chain[i + 1:])

    def _position(self, view: View) -> int:
        for n, v in enumerate(self._chain):
            if v is view:
                return n
        raise KeyError(f"{view!r} is not in the chain")

    def _images_from(self, view: View) -> list[BeforeImage]:
        return [v.before for v in self._chain[self._position(view):]]

    def changes_since(self, view: View) -> list[tuple[bytes, bytes | None]]:
        """Records turning `view` into the live contents (None = remove), O(keys written since)."""
        live = self._live
        with self._lock:
            old: dict[bytes, object] = {}
            for image in self._images_from(view):
                for k, v in image.items():
                    old.setdefault(k, v)  # the oldest image, and a log's first entry, wins
            out = []
            for k, before in old.items():
                now = live.get(k, ABSENT)
                if now is not before and now != before:
                    out.append((k, None if now is ABSENT else now))  # type: ignore[arg-type]
            return out

    def rollback_to(self, view: View) -> None:
        """Make the live contents equal `view` again and drop every view frozen after it.

        The caller guarantees no view after `view` is pinned (cursors closed, background snapshot done):
        their images are consumed here."""
        live, index = self._live, self._index
        with self._lock:
            i = self._position(view)
            for later in reversed(self._chain[i:]):
                for k, before in later.before.newest_first():
                    if before is ABSENT:
                        now = live.remove(k, ABSENT)
                        if now is not ABSENT and index is not None:
                            self._index_remove(k)
                    else:
                        now = live.put(k, before, ABSENT)  # type: ignore[arg-type]
                        if now is ABSENT and index is not None:
                            self._index_add(k)
            view.before.clear()
            del self._chain[i + 1:]

    # ---- reads through a view (any thread) -------------------------------------------------------
    def indexes_prefix(self, prefix: bytes) -> bool:
        """True if `prefix` is a whole PrefixKeyScan prefix this map indexes (a scan is O(its keys))."""
        return bool(prefix) and self._index is not None and scan_prefix_length(prefix) == len(prefix)

    def view_keys(self, view: View, prefix: bytes) -> list[bytes]:
        """Candidate keys of `view` with an indexed `prefix` (a superset: keys added after the view read
        as ABSENT and are skipped by `read_chunk`), O(keys with the prefix + keys written since)."""
        if not self.indexes_prefix(prefix):
            raise ValueError("view_keys needs an indexed scan prefix; scan other views with view_columns")
        with self._lock:
            base = list(self._index.get(prefix, ()))  # type: ignore[union-attr]
            extra = [k for image in self._images_from(view) for k in image.keys() if k.startswith(prefix)]
        if extra:
            seen = set(base)
            base += [k for k in dict.fromkeys(extra) if k not in seen]
        return base

    def view_columns(self, view: View, prefix: bytes = b"") -> tuple[pa.LargeBinaryArray, pa.LargeBinaryArray]:
        """The rows of `view` whose key starts with `prefix`, sorted by key, as two Arrow columns: a scan
        of the whole table done in C and numpy (see view_batches), then filtered and sorted in Arrow."""
        keys, values = [], []
        for k, v in self.view_batches(view, 1 << 20):
            if prefix:
                keep = pc.equal(pc.binary_slice(k, 0, len(prefix)), binary_column([prefix])[0])
                k, v = k.filter(keep), v.filter(keep)
            keys.append(k.cast(pa.large_binary()))
            values.append(v.cast(pa.large_binary()))
        if not keys:
            empty = binary_column([], pa.large_binary())
            return empty, empty
        all_keys, all_values = pa.concat_arrays(keys), pa.concat_arrays(values)
        order = pc.sort_indices(all_keys)  # byte order, as Python compares bytes
        return all_keys.take(order), all_values.take(order)

    def view_batches(self, view: View, rows: int) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
        """All of `view` as (keys, values) Arrow columns, up to `rows` per batch, for a full snapshot.

        The lock is held only to copy: the live table (a dict copy in C, or the packed table's bucket
        lists) and the before images since `view`, merged into one dict as they are copied. The columns
        are then built from the copies in C and numpy, so neither the lock nor the GIL is held for long
        while the next batches run. The copies live until the generator is done."""
        at_view: dict[bytes, object] = {}
        with self._lock:
            frozen = self._live.copy()
            for image in reversed(self._images_from(view)):  # the oldest image holding a key wins
                at_view.update(image.first_values())
        changed = binary_column(list(at_view)) if at_view else None
        for keys, values in frozen.arrow_batches(rows):
            if changed is not None:
                keep = pc.invert(pc.is_in(keys, value_set=changed))
                keys, values = keys.filter(keep), values.filter(keep)
            if len(keys):
                yield keys, values
        del frozen
        restored = [(k, v) for k, v in at_view.items() if v is not ABSENT]
        for i in range(0, len(restored), rows):
            chunk = restored[i:i + rows]
            yield binary_column([k for k, _ in chunk]), binary_column([v for _, v in chunk])

    def read_chunk(self, view: View, keys: Sequence[bytes], start: int, max_rows: int,
                   max_bytes: int) -> tuple[list[tuple[bytes, bytes]], int]:
        """Rows of `view` for keys[start:], up to max_rows / max_bytes (at least one row if any);
        returns the rows and the position after the last key examined."""
        live = self._live
        rows: list[tuple[bytes, bytes]] = []
        size = 0
        pos, end = start, len(keys)
        with self._lock:
            images = self._images_from(view)
            while pos < end and len(rows) < max_rows and (size < max_bytes or not rows):
                k = keys[pos]
                pos += 1
                for image in images:
                    v = image.get(k, _UNWRITTEN)
                    if v is not _UNWRITTEN:
                        break
                else:
                    v = live.get(k, ABSENT)
                if v is not ABSENT:
                    rows.append((k, v))  # type: ignore[arg-type]
                    size += len(k) + len(v)  # type: ignore[arg-type]
        return rows, pos

    # ---- accounting ------------------------------------------------------------------------------
    def memory_used_bytes(self) -> int:
        """Estimate: the live table's own (see its `memory_bytes`), the before images' (see theirs;
        including dropped ones not yet freed) and the prefix index's, from per-object overheads measured
        at import (sys.getsizeof)."""
        with self._lock:
            n = len(self._live)
            total = self._live.memory_bytes()
            for image in [view.before for view in self._chain] + self._garbage:
                total += image.memory_bytes()
            if self._index is not None:
                total += n * SET_ENTRY_BYTES + len(self._index) * (DICT_ENTRY_BYTES + 2 * BYTES_OBJECT_OVERHEAD + 64)
            return total

    def chain_length(self) -> int:
        with self._lock:
            return len(self._chain)
