"""The backend contract: what a store needs from a key-value engine, and nothing about how.

A store never snapshots or restores a backend by hand. It asks the builder of its backend
(`backend_registry.builder_for`) for a backend restored from a manifest (or empty): each backend picks one
restore operation for the situation (a `RestoreOperation`: nothing to restore, an incremental restore,
...). It commits through the snapshot runner (`snapshot_runner.run_snapshot`), a backend being the
`SnapshotStrategy` of its own commits: `prepare_snapshot` (short, synchronous: a RocksDB flush and
checkpoint, an O(1) copy-on-write freeze) pins an image, `upload_snapshot` writes its files and the
manifest last, `release_snapshot` frees what prepare pinned. Rescaling fills new, empty stores through a
`BulkLoader` (`backend_registry.bulk_loader_for`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, Sequence, TypeVar

from ..checkpoint import CheckpointFileManager, Manifest, StoreIdentity
from ..config import Settings

if TYPE_CHECKING:
    from .local_layout import InstanceLayout


class Cursor(ABC):
    """A forward scan over a consistent view taken when it was opened.

    Writes made while it is open do not disturb it. It pins engine resources (for RocksDB, a snapshot
    that keeps the DB LOCK held), so it must be closed; reaching the end closes it.
    """

    @abstractmethod
    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        """Up to `max_rows` rows (at least one if any remain, stopping once `max_bytes` is reached);
        `done` is True when nothing follows."""

    @abstractmethod
    def close(self) -> None:
        """Release the view; idempotent."""

    @property
    @abstractmethod
    def closed(self) -> bool: ...


@dataclass
class SnapshotResources:
    """What `prepare_snapshot` pinned for `upload_snapshot`; subclassed per backend."""

    version: int
    attempt_id: str


@dataclass
class SnapshotOutcome:
    manifest: Manifest
    files_uploaded: int
    files_reused: int
    bytes_uploaded: int
    flush_ms: int = 0  # part of the prepare phase spent flushing memtables (0 if not applicable)
    # Backend-specific values for CUSTOM_METRICS names, applied over the generic mapping (e.g. the heap
    # backend reports its background snapshot time as sparkstateUploadMs).
    custom: dict[str, int] = field(default_factory=dict)


@dataclass
class CommitIds:
    """The checkpoint ids of the commit in progress under Spark's checkpoint format v2, set by the store
    before it commits: the attempt's own id and the id of the version it builds on. `checkpoint_id` None:
    format 1, the version's manifest alone is published."""

    checkpoint_id: str | None = None
    base_checkpoint_id: str | None = None


@dataclass
class CommitStamps:
    """Whether the values of the commit in progress carry idle-state stamps (engine/ttl.py), and the batch
    time its writes were stamped with; set by the store before it commits."""

    stamped: bool = False
    batch_time_ms: int | None = None


def publish_commit(ctx: "BackendContext", manifest: Manifest) -> Manifest:
    """Publish the manifest of a commit, the last step of every backend's upload: under checkpoint format v2
    with the attempt's ids, as the attempt's own manifest too (`CheckpointFileManager.publish_attempt`); with
    stamped values, saying so."""
    if ctx.stamps.stamped:
        manifest = replace(manifest, ttl_stamps=True, batch_time_ms=ctx.stamps.batch_time_ms)
    ids = ctx.commit_ids
    if ids.checkpoint_id is None:
        return ctx.file_manager.publish_manifest(manifest)
    return ctx.file_manager.publish_attempt(replace(manifest, checkpoint_id=ids.checkpoint_id,
                                                    base_checkpoint_id=ids.base_checkpoint_id))


@dataclass(frozen=True)
class BackendContext:
    """Everything a backend needs besides its data: settings, where it lives locally, who writes."""

    settings: Settings
    layout: "InstanceLayout"
    file_manager: CheckpointFileManager
    instance_id: str
    query_run_id: str
    num_cols_prefix_key: int = 0  # > 0: PrefixKeyScan store (scan prefixes are kg + u32be(len) + prefixRow)
    store: StoreIdentity | None = None  # written into every manifest (a load of another store refuses it)
    commit_ids: CommitIds = field(default_factory=CommitIds)  # of the commit in progress (format v2)
    stamps: CommitStamps = field(default_factory=CommitStamps)  # of the commit in progress (idle-state expiry)


class Backend(ABC):
    """A live key-value database holding one loaded version plus uncommitted writes.

    Called only under the owning store's lock (one thread at a time).
    """

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of `keys` in order, None for an absent key: the gets a join's eviction pass is about to
        make, fetched ahead in one frame. A backend with a batched lookup overrides this loop."""
        get = self.get
        return [get(key) for key in keys]

    @abstractmethod
    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Apply puts (value) and removes (None) in order, atomically."""

    @abstractmethod
    def open_cursor(self, prefix: bytes) -> Cursor:
        """Scan keys starting with the byte `prefix` (empty = all), in byte order."""

    @abstractmethod
    def num_keys(self) -> int:
        """Exact number of keys, including uncommitted writes."""

    @abstractmethod
    def memory_used_bytes(self) -> int: ...

    @abstractmethod
    def prepare_snapshot(self, version: int) -> SnapshotResources:
        """Synchronous phase: pin a consistent image of the current contents as `version`."""

    @abstractmethod
    def upload_snapshot(self, resources: SnapshotResources) -> SnapshotOutcome:
        """Make the pinned image durable as `resources.version` (manifest written last)."""

    @abstractmethod
    def release_snapshot(self, resources: SnapshotResources) -> None:
        """Free what prepare pinned; called exactly once, after upload succeeded or failed."""

    @abstractmethod
    def close(self) -> None:
        """Close open cursors, then the database; local files stay."""

    def rewind(self, version: int) -> bool:
        """Make the contents exactly committed `version` again from memory, dropping uncommitted writes
        and later versions, if this backend still holds it; False: the store restores from the checkpoint."""
        return False

    def start_empty_at(self, version: int) -> None:
        """This freshly built, empty backend stands for `version` (Spark's `loadEmpty`); its next commit
        writes version+1 naming no file of an earlier version. Backends whose versions do not reach back
        to earlier files (RocksDB: every manifest lists the whole database) need nothing."""

    def bulk_loaded(self) -> None:
        """A bulk loader filled this backend (rescaling): the next version keeps no change log."""

    @abstractmethod
    def apply_replayed(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Apply an older version's recorded writes (snapshot replay): the state changes, but these writes
        are not this version's own and no change log records them."""

    def maintenance_snapshot(self) -> None:
        """Periodic maintenance hook (Spark's maintenance thread, under the store lock); must not block."""

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        """Up to `max_rows` entries of the live contents after `position` (None: from the start), and the
        position to continue from (None: the end was reached). Successive walks visit every entry that
        stays put; the order is the backend's own (idle-state expiry deletes a slice per commit). This
        default restarts a scan and skips to the last key returned: a backend overrides it with a walk
        that costs the rows it returns."""
        cursor = self.open_cursor(b"")
        try:
            rows: list[tuple[bytes, bytes]] = []
            done = False
            while not done and len(rows) < max_rows:
                chunk, done = cursor.next_chunk(max_rows, 16 << 20)
                rows += [r for r in chunk if position is None or r[0] > position]  # type: ignore[operator]
            rows = rows[:max_rows]
            end = done and len(rows) < max_rows
            return rows, None if end or not rows else rows[-1][0]
        finally:
            cursor.close()

    def sample_keys(self, limit: int) -> list[bytes]:
        """Up to `limit` keys, cheaply (the first of a scan): what the load-time key-group check reads."""
        cursor = self.open_cursor(b"")
        try:
            rows, _ = cursor.next_chunk(limit, 1 << 20)
            return [k for k, _ in rows[:limit]]
        finally:
            cursor.close()


class BackendBuilder(Protocol):
    """Builds a backend from a committed manifest, or empty when there is none."""

    def __call__(self, ctx: BackendContext, manifest: Manifest | None) -> Backend: ...


T = TypeVar("T")


class RestoreOperation(Protocol[T]):
    """One way of bringing a version back (chosen by a backend's builder); `run` does it, once."""

    def run(self) -> T: ...


class BulkLoader(Protocol):
    """Fills one new, empty store with the rows of several sources (rescaling: the old partitions), each
    source's rows given in key order; `finish` returns the backend holding them all, uncommitted."""

    def add(self, source: int, rows: Sequence[tuple[bytes, bytes]]) -> None: ...

    def end_source(self, source: int) -> None: ...

    def finish(self) -> Backend: ...

    def close(self) -> None: ...
