"""Idle-state expiry: values stamped with the batch time of their last write, read through a wrapper that
hides expired keys, and deleted a bounded slice at a time (docs/internals/engine.md, "Idle-state expiry").

Layout of a stamped value (every value of a version whose manifest says `ttlStamps`)::

    byte 0..7   u64 big-endian: batch time of the key's last write, ms since the Unix epoch
    byte 8..    the value as Spark wrote it

A key is expired in a batch running at time T when `T - stamp > ttl`, that is when `stamp < T - ttl`.
Big-endian stamps order as bytes, and a stamped value starts with its stamp (a value equal to `u64be(T - ttl)`
in its first 8 bytes compares as not less), so the test is one bytes comparison of the whole value with
`u64be(T - ttl)`: no slice, no unpacking.
"""
from __future__ import annotations

import struct
import time
from typing import Sequence

from ..checkpoint import Manifest
from .backend_contract import Backend, CommitStamps, Cursor, SnapshotOutcome, SnapshotResources

STAMP = struct.Struct(">Q")
STAMP_BYTES = STAMP.size
_CONVERT_ROWS = 4096  # entries stamped at a time when a version without stamps is converted


def wall_clock_ms() -> int:
    """The batch time of a batch that reads no manifest (version 0, a store started empty)."""
    return int(time.time() * 1000)


class StampedCursor(Cursor):
    """A cursor of the wrapped backend that skips expired entries and strips the stamps."""

    def __init__(self, inner: Cursor, oldest: bytes) -> None:
        self._inner, self._oldest = inner, oldest

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        oldest = self._oldest
        while True:  # at least one row while any remain, as the contract says
            rows, done = self._inner.next_chunk(max_rows, max_bytes)
            out = [(k, v[STAMP_BYTES:]) for k, v in rows if not v < oldest]
            if out or done:
                return out, done

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed


class StampedBackend(Backend):
    """A backend whose values carry stamps, seen as one without them: puts are stamped with the batch time,
    reads hide expired keys and strip the stamps. `ttl_ms` None: stamps are kept, nothing expires.

    Everything that moves stored bytes as they are (snapshots, restore, replay of recorded writes, rewind)
    goes to the wrapped backend untouched. Called under the owning store's lock, like every backend."""

    def __init__(self, inner: Backend, ttl_ms: int | None, batch_time_ms: int) -> None:
        self.inner = inner
        self.ttl_ms = ttl_ms
        self._position: object | None = None  # where the next sweep continues (Backend.walk)
        self.set_batch_time(batch_time_ms)

    def set_batch_time(self, batch_time_ms: int) -> None:
        """The time of the batch now running: the stamp of its writes and the edge of expiry."""
        self.batch_time_ms = batch_time_ms
        self._stamp = STAMP.pack(batch_time_ms)
        # b"" is below every value: nothing expires. Otherwise a value below u64be(T - ttl) has expired.
        edge = batch_time_ms - self.ttl_ms if self.ttl_ms is not None else -1
        self._oldest = STAMP.pack(edge) if edge >= 0 else b""

    # ---- data ---------------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        value = self.inner.get(key)
        if value is None or value < self._oldest:
            return None
        return value[STAMP_BYTES:]

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        oldest = self._oldest
        return [None if v is None or v < oldest else v[STAMP_BYTES:] for v in self.inner.get_many(keys)]

    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        stamp = self._stamp
        self.inner.apply_batch([(k, None if v is None else stamp + v) for k, v in records])

    def open_cursor(self, prefix: bytes) -> Cursor:
        return StampedCursor(self.inner.open_cursor(prefix), self._oldest)

    def sample_keys(self, limit: int) -> list[bytes]:
        return self.inner.sample_keys(limit)

    # ---- expiry -------------------------------------------------------------------------------------
    def sweep(self, max_rows: int) -> int:
        """Delete the expired keys among the next `max_rows` entries of the walk (continued from the last
        sweep, from the start after the end); returns how many. Removes are ordinary writes of the batch,
        so the journal and the change log record them as deletes."""
        if self.ttl_ms is None:
            return 0
        rows, self._position = self.inner.walk(self._position, max_rows)
        oldest = self._oldest
        expired = [(k, None) for k, v in rows if v < oldest]
        if expired:
            self.inner.apply_batch(expired)
        return len(expired)

    def stamp_all(self) -> int:
        """Give every entry of a version written without stamps the current batch time (TTL turned on for
        a store with state); returns the entries rewritten."""
        stamp, done, count = self._stamp, False, 0
        cursor = self.inner.open_cursor(b"")
        try:
            while not done:
                rows, done = cursor.next_chunk(_CONVERT_ROWS, 16 << 20)
                if rows:
                    self.inner.apply_batch([(k, stamp + v) for k, v in rows])
                    count += len(rows)
        finally:
            cursor.close()
        return count

    # ---- the rest is the wrapped backend's ----------------------------------------------------------
    def num_keys(self) -> int:
        return self.inner.num_keys()  # expired keys not deleted yet included

    def memory_used_bytes(self) -> int:
        return self.inner.memory_used_bytes()

    def prepare_snapshot(self, version: int) -> SnapshotResources:
        return self.inner.prepare_snapshot(version)

    def upload_snapshot(self, resources: SnapshotResources) -> SnapshotOutcome:
        return self.inner.upload_snapshot(resources)

    def release_snapshot(self, resources: SnapshotResources) -> None:
        self.inner.release_snapshot(resources)

    def close(self) -> None:
        self.inner.close()

    def rewind(self, version: int) -> bool:
        self._position = None
        return self.inner.rewind(version)

    def start_empty_at(self, version: int) -> None:
        self.inner.start_empty_at(version)

    def bulk_loaded(self) -> None:
        self.inner.bulk_loaded()

    def apply_replayed(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.inner.apply_replayed(records)  # recorded writes carry their stamps already

    def maintenance_snapshot(self) -> None:
        self.inner.maintenance_snapshot()

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        return self.inner.walk(position, max_rows)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)  # backend-specific extras (a heap backend's background runner)


class BatchClocks:
    """For each version a store holds (the last 32): the batch time of the batch that reads it and whether
    its values carry stamps; and the wrapping of the store's backend that follows from them."""

    def __init__(self, ttl_ms: int | None, stamps: CommitStamps) -> None:
        self._ttl_ms = ttl_ms
        self._stamps = stamps  # what the store's next commit writes into its manifest
        self._known: dict[int, tuple[int, bool]] = {}
        self.unstamped = False  # the backend holds a version without stamps that a ttl applies to

    def knows(self, version: int) -> bool:
        return version in self._known

    def clock_of(self, version: int) -> int | None:
        """The batch time of the batch that reads `version`, if this store holds or held it."""
        known = self._known.get(version)
        return known[0] if known is not None else None

    def forget(self, version: int) -> None:
        """`version` is about to be held anew (started empty, replayed, committed): decide it afresh."""
        self._known.pop(version, None)

    def settle(self, backend: Backend | None, version: int, manifest: Manifest | None) -> Backend:
        """`backend` holds `version` now (`manifest`: the version's, or None when it has none): the backend
        to use, wrapped at the version's batch time when its values carry stamps or a ttl applies. A version
        without a manifest (version 0, a store started empty) runs at the wall clock of its first load,
        remembered, so a reload of it decides the same way."""
        known = self._known.get(version)
        if known is None:
            known = (manifest.clock_ms, manifest.ttl_stamps) if manifest is not None else (wall_clock_ms(), False)
            self._known[version] = known
            while len(self._known) > 32:
                del self._known[next(iter(self._known))]
        clock, stamped = known
        inner = unwrapped(backend)
        assert inner is not None
        wants = stamped or self._ttl_ms is not None
        self._stamps.stamped, self._stamps.batch_time_ms = wants, (clock if wants else None)
        self.unstamped = wants and not stamped
        if not wants:
            return inner
        if isinstance(backend, StampedBackend):
            backend.set_batch_time(clock)
            return backend
        return StampedBackend(inner, self._ttl_ms, clock)


def unwrapped(backend: Backend | None) -> Backend | None:
    """The backend under a StampedBackend (itself otherwise)."""
    return backend.inner if isinstance(backend, StampedBackend) else backend


def strip_stamps(rows: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    """Recorded writes of a stamped version as Spark wrote them (the change feed)."""
    return [(k, None if v is None else v[STAMP_BYTES:]) for k, v in rows]
