"""Store: one state store (operator, partition, store name) as the worker drives it.

The store owns the lifecycle and the metrics; the backend owns the data; the checkpoint file manager
owns remote names. Top-level methods read as a list of timed phases.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Collection, Iterator, Sequence

from ..checkpoint import CheckpointFileManager, Manifest
from ..checkpoint.location import open_file_manager, open_fileio
from ..checkpoint.spark_logs import routing_partition_counts, unfinished_repartition
from ..config import PREFIX
from ..errors import (
    CheckpointError,
    CorruptCheckpointError,
    LocalDiskError,
    StoreStateError,
    VersionNotFoundError,
    WrongStoreError,
)
from ..keygroups import key_group, partition_of
from ..storage import FileIO
from ..storage.s3_requests import counted_as
from .backend_contract import Backend, BackendContext, CommitStamps, Cursor
from .backend_registry import builder_for, open_snapshot
from .change_feed import VersionChanges, read_changes, snapshot_lineage
from .local_layout import InstanceLayout, default_local_root, reclaim_dead_instances, safe_name
from .snapshot_runner import run_snapshot
from .spec import StoreSpec
from .join_expiry import OrphanSweep, count_of, count_store_of, is_values_store
from .ttl import STAMP, STAMP_BYTES, BatchClocks, StampedBackend, unwrapped

log = logging.getLogger(__name__)

CUSTOM_METRICS = (
    "sparkstateCommitMs", "sparkstateLoadMs", "sparkstateCheckpointLoads", "sparkstateFlushMs",
    "sparkstateUploadMs", "sparkstateFilesUploaded", "sparkstateFilesReused", "sparkstateBytesUploaded",
    "sparkstateCheckpointBytes", "sparkstateTtlExpiredKeys",
)


@dataclass(frozen=True)
class LoadResult:
    version: int
    load_ms: int
    source: str  # "memory" (live database reused) or "checkpoint"


@dataclass(frozen=True)
class CommitResult:
    version: int
    metrics: dict[str, int]
    checkpoint_id: str | None = None       # the attempt's id under checkpoint format v2
    base_checkpoint_id: str | None = None  # the id of the version it was built on


@dataclass(frozen=True)
class StoreMetrics:
    num_keys: int
    memory_used_bytes: int
    custom: dict[str, int]


class State(enum.Enum):
    # Members are singletons, so identity hashing agrees with Enum's equality; Enum's own __hash__ is a
    # Python-level call, paid by the state check of every get.
    __hash__ = object.__hash__

    CLOSED = "CLOSED"
    LOADED = "LOADED"
    UPDATING = "UPDATING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


_READABLE = frozenset((State.LOADED, State.UPDATING))


class _LockedCursor(Cursor):
    """A backend cursor used under the store lock, so release/close on another thread cannot free the
    snapshot under a running `next_chunk`."""

    def __init__(self, inner: Cursor, lock: threading.RLock) -> None:
        self._inner, self._lock = inner, lock

    def next_chunk(self, max_rows: int, max_bytes: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        with self._lock:
            return self._inner.next_chunk(max_rows, max_bytes)

    def close(self) -> None:
        with self._lock:
            self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed


class Store:
    """Lifecycle of one store; every public method checks the state first.

    Transitions (anything not listed raises StoreStateError)::

        method           from                                  to
        load(v)          any                                   LOADED
        get, open_cursor LOADED, UPDATING                      unchanged
        apply_batch      LOADED, UPDATING                      UPDATING
        commit           LOADED, UPDATING                      COMMITTED (ABORTED if it fails)
        abort            LOADED, UPDATING                      ABORTED   (any other state: no-op)
        release, close   any                                   CLOSED
        metrics, maintenance_*   any                           unchanged

    `load(v)` reuses the live database only if it holds exactly committed version v with no writes
    since (`_dirty` false); otherwise it restores v from the checkpoint. Uncommitted writes are never
    rolled back in place: abort, a failed commit or a load of another version make the next load restore.

    Checkpoint format v2 (`spec.checkpoint_ids`): every commit is an attempt with a fresh unique id that
    Spark's driver records in its commit log; `load(v, id)` takes exactly that attempt, reusing memory only
    if the live version is that attempt (another executor's retry may have committed v meanwhile).

    Idle-state expiry (engine/ttl.py): with a ttl, or when the loaded version's values carry stamps, the
    backend is wrapped in a `StampedBackend` running at the batch time of the loaded version (`_clocks`);
    a version without stamps loaded with a ttl is stamped in full first, and every commit deletes the
    expired keys of one slice before its snapshot. A join's values store is not stamped: its commit deletes
    the rows its side's count store no longer counts (engine/join_expiry.py), asking that store through
    `partners` (the open stores of this store's partition, by store name).

    Threads: data calls come from one thread; metrics, abort, release and maintenance may come from
    others. `_lock` guards the state, the backend and the metrics. Cleanup works on remote files only
    and runs without `_lock` (the file manager locks its own caches), so it does not stall commits.
    """

    def __init__(self, spec: StoreSpec, local_root: str | None = None, *, fileio: FileIO | None = None,
                 partners: Callable[[StoreSpec, str], Sequence["Store"]] | None = None) -> None:
        self.spec = spec
        self._ttl_ms = spec.settings.ttl_for(spec.operator_id)  # None: nothing expires
        self._orphans: OrphanSweep | None = None  # a join's values store with a ttl
        if self._ttl_ms is not None and is_values_store(spec.store_name):
            self._orphans = OrphanSweep(spec.key_schema_json)
            self._ttl_ms = None  # its count store decides; its own values carry no stamps
        self._partners = partners
        root = local_root or spec.settings.local_dir or default_local_root()
        reclaim_dead_instances(root)  # once per process: the copies of killed workers on this machine
        try:
            self._layout = InstanceLayout(os.path.join(root, safe_name(spec.instance_id)))
            self._layout.ensure_private()
        except OSError as e:
            if spec.settings.local_dir:  # the user's choice: say which setting to fix
                raise LocalDiskError(f"{e} (the directory comes from {PREFIX}localDir="
                                     f"{spec.settings.local_dir!r})") from e
            raise
        self._file_manager = open_file_manager(spec.state_location(), spec.settings, spec.hadoop_s3a, fileio)
        self._ctx = BackendContext(settings=spec.settings, layout=self._layout, file_manager=self._file_manager,
                                   instance_id=spec.instance_id, query_run_id=spec.query_run_id,
                                   num_cols_prefix_key=spec.num_cols_prefix_key, store=spec.identity())
        self._builder = builder_for(spec.settings.backend)
        self._lock = threading.RLock()
        self._state = State.CLOSED          # guarded by _lock
        self._backend: Backend | None = None
        self._version: int | None = None    # committed version the backend started from / last committed
        self._head: int | None = None       # the last version loaded or committed (kept when released)
        self._dirty = False                 # backend holds writes not in any committed version
        self._foreign: Manifest | None = None  # the loaded version's manifest, if another backend wrote it
        self._checkpoint_id: str | None = None  # attempt id of the version the backend holds (format v2)
        self._ids: dict[int, str | None] = {}   # attempt ids of the versions this store loaded or committed
        self._custom: dict[str, int] = {name: 0 for name in CUSTOM_METRICS}
        self._clocks = BatchClocks(self._ttl_ms, self._ctx.stamps)

    @property
    def state(self) -> State:
        return self._state

    @property
    def file_manager(self) -> CheckpointFileManager:
        return self._file_manager

    def _require(self, method: str, allowed: Collection[State]) -> None:
        if self._state not in allowed:
            raise StoreStateError(
                f"{method}() is not allowed in state {self._state.value} of {self.spec.describe()} "
                f"(allowed in: {', '.join(s.value for s in State if s in allowed)})")

    def _live(self) -> Backend:
        assert self._backend is not None  # guaranteed by the state guard
        return self._backend

    # ---- lifecycle --------------------------------------------------------------------------------
    @counted_as("load")
    def load(self, version: int, checkpoint_id: str | None = None) -> LoadResult:
        """Committed `version`; with a `checkpoint_id` (format v2), exactly the attempt with that id."""
        if version < 0:
            raise VersionNotFoundError(f"cannot load negative version {version} of {self.spec.describe()}")
        with self._lock:
            t0 = time.perf_counter()
            restored = False
            same_attempt = checkpoint_id is None or self._ids.get(version) == checkpoint_id
            if (self._backend is not None and not self._dirty and self._version == version and same_attempt
                    and self._state in (State.LOADED, State.COMMITTED, State.ABORTED)):
                source = "memory"
                self._settle_stamps(version, None, recall=True)
            elif same_attempt and self._rewound(version):
                source = "memory"
                self._settle_stamps(version, None, recall=True)
            else:
                self._close_backend()
                self._state = State.CLOSED  # until the restore succeeds
                self._refuse_unfinished_rescale(version)
                try:
                    manifest = self._read_manifest_for_load(version, checkpoint_id)
                    self._check_manifest(manifest)
                    self._foreign = self._written_by_another_backend(manifest)
                    builder = builder_for(manifest.backend) if self._foreign else self._builder
                    self._backend = builder(self._ctx, manifest)
                except (VersionNotFoundError, CorruptCheckpointError) as e:
                    raise type(e)(f"{e}. {self._way_back(version)}") from e
                source = "checkpoint"
                restored = manifest is not None
                if restored:
                    self._check_key_groups(version)
                self._remember(version, manifest.checkpoint_id if manifest is not None else None)
                self._clocks.forget(version)  # the manifest read is the attempt that counts
                self._settle_stamps(version, manifest)
            result = self._loaded(version, False, t0, restored, source)
            self._stamp_unstamped()
            return result

    def _remember(self, version: int, checkpoint_id: str | None) -> None:
        """Record the attempt id of a version this store holds (what a later load compares)."""
        self._ids[version] = checkpoint_id
        while len(self._ids) > 32:
            del self._ids[next(iter(self._ids))]

    def _loaded(self, version: int, dirty: bool, t0: float, restored: bool, source: str) -> LoadResult:
        """The store holds `version` now (`dirty`: with writes no committed version has); its metrics."""
        self._version, self._dirty, self._state = version, dirty, State.LOADED
        self._checkpoint_id = None if dirty else self._ids.get(version)
        self._head = version
        load_ms = _ms_since(t0)
        self._custom["sparkstateLoadMs"] = load_ms
        # 1 when this load read a committed version back from the checkpoint (a new or moved store,
        # or a retry after a failure), 0 when the live state was reused or version 0 started empty.
        self._custom["sparkstateCheckpointLoads"] = int(restored)
        return LoadResult(version=version, load_ms=load_ms, source=source)

    def load_empty(self, version: int) -> LoadResult:
        """Start empty at `version`, whatever the checkpoint holds (Spark's `loadEmpty`, for tools that write
        a whole state as one version: migration between providers); the next commit writes version+1."""
        if version < 0:
            raise VersionNotFoundError(f"cannot start negative version {version} of {self.spec.describe()}")
        with self._lock:
            t0 = time.perf_counter()
            self._close_backend()
            self._state = State.CLOSED
            self._backend = self._builder(self._ctx, None)
            self._foreign = None
            self._backend.start_empty_at(version)
            self._clocks.forget(version)
            self._settle_stamps(version, None)
            return self._loaded(version, True, t0, False, "empty")

    def replay(self, snapshot_version: int, end_version: int, snapshot_checkpoint_id: str | None = None,
               end_checkpoint_id: str | None = None) -> LoadResult:
        """Rebuild `end_version` from the snapshot of `snapshot_version` and the change logs of the versions
        after it (Spark's snapshot replay, `snapshotStartBatchId`), instead of from the version's own
        files; a commit after it writes end_version+1 as usual."""
        if not 0 < snapshot_version <= end_version:
            raise VersionNotFoundError(f"cannot replay versions {snapshot_version}..{end_version} of "
                                       f"{self.spec.describe()} (1 <= snapshot version <= end version)")
        with self._lock:
            t0 = time.perf_counter()
            self._close_backend()
            self._state = State.CLOSED
            lineage = snapshot_lineage(self._file_manager, snapshot_version, end_version, end_checkpoint_id)
            self._foreign = self._written_by_another_backend(lineage[0])
            written_by = lineage[0].backend
            if written_by == "rocksdb":  # the snapshot is a version of this store's: check it
                self._check_manifest(lineage[-1])
            backend = open_snapshot(written_by, self._ctx, lineage)
            try:
                if end_version > snapshot_version:
                    for changes in read_changes(self._file_manager, snapshot_version + 1, end_version,
                                                self._layout.staging_dir, end_checkpoint_id, as_stored=True):
                        backend.apply_replayed(changes.rows)
            except BaseException:
                backend.close()
                raise
            self._backend = backend
            self._clocks.forget(end_version)
            self._settle_stamps(end_version, lineage[0])
            result = self._loaded(end_version, True, t0, True, "snapshot")
            self._stamp_unstamped()
            return result

    @property
    def scratch_dir(self) -> str:
        """A local directory of this store's for short-lived files (the change feed's hand-over file)."""
        return self._layout.staging_dir

    def changes(self, start: int, end: int, end_checkpoint_id: str | None = None) -> Iterator[VersionChanges]:
        """The writes of versions `start`..`end` from their change logs (Spark's change feed; under format v2
        those of the lineage of attempt `end_checkpoint_id`); reads the checkpoint only, whatever the store
        has loaded."""
        return read_changes(self._file_manager, start, end, self._layout.staging_dir, end_checkpoint_id)

    def _check_manifest(self, manifest: Manifest | None) -> None:
        """Refuse a manifest of another store before any backend reads it."""
        if manifest is None:
            return
        path = self._file_manager.manifest_path(manifest.version)
        mine, theirs = self.spec.identity(), manifest.store
        if theirs is not None and theirs != mine:
            same_place = (theirs.operator_id, theirs.partition_id, theirs.store_name) == \
                (mine.operator_id, mine.partition_id, mine.store_name)
            if not same_place or self.spec.settings.state_location:
                raise WrongStoreError(
                    f"{path} belongs to {theirs.describe()}, not to this store ({mine.describe()}): state "
                    "files were moved or copied to the wrong place. Put them back (`sparkstate verify` lists "
                    "misplaced stores) or restore the checkpoint from a backup")
            # Same operator, partition and name under another query key: the checkpoint itself was moved.
            log.info("%s was written when the checkpoint was at another path (%s); loading it",
                     path, theirs.query_key)

    def _written_by_another_backend(self, manifest: Manifest | None) -> Manifest | None:
        """`manifest` if another backend than the query's wrote it: a version is read with the backend that
        wrote it (Spark's state source and replay need no setting), and `commit` refuses to continue it."""
        return manifest if manifest is not None and manifest.backend != self.spec.settings.backend else None

    def _refuse_foreign_commit(self) -> None:
        manifest = self._foreign
        if manifest is not None:
            raise CheckpointError(
                f"version {manifest.version} at {self._file_manager.manifest_path(manifest.version)} was "
                f"written by the {manifest.backend!r} backend; this query runs backend="
                f"{self.spec.settings.backend}. A checkpoint keeps the backend it was created with: set "
                f"spark.sql.streaming.stateStore.sparkstate.backend={manifest.backend}, or start from a new "
                "checkpoint")

    def _way_back(self, version: int) -> str:
        """What a load error adds: the older versions a roll-back can go to, and where to read how."""
        loc = self.spec.location
        verify = f"sparkstate verify --checkpoint {loc.checkpoint_root()}"
        if loc.state_location_setting:
            verify += f" --state-location {loc.state_location_setting}"
        older = self._file_manager.loadable_versions(version)
        found = (f"Older versions that look loadable: {', '.join(map(str, older))}" if older else
                 f"No older version at {self._file_manager.root} looks loadable")
        return (f"{found}. Run `{verify}`; the README's 'When the checkpoint is damaged' shows how to roll the "
                "query back")

    def _refuse_unfinished_rescale(self, version: int) -> None:
        """Batch `version` (the batch that loads it) must not be a rescale's repartition batch whose commit is
        missing: its stores are half published, and running it would lose or misplace keys. Checked on the
        stores Spark opens (whose keys route by key group), on a restore from the checkpoint only."""
        if not self.spec.key_groups_route:
            return
        root = self.spec.location.checkpoint_root()
        pinned = unfinished_repartition(open_fileio(root, self.spec.settings, self.spec.hadoop_s3a), root, version)
        if pinned is not None:
            raise CheckpointError(
                f"batch {version} of {root} is an unfinished rescale to {pinned} partitions (a repartition batch "
                f"whose commit log entry is missing), so its state is half published. Finish it with `sparkstate "
                f"rescale --checkpoint {root} --partitions {pinned}`, which continues where it stopped")

    def _check_key_groups(self, version: int, sample: int = 64) -> None:
        """Every key carries its key group, which routes it to one partition: a few keys of a restored
        version that route elsewhere mean another partition's state sits here. Reads the first `sample`
        keys only (the write path checks every key; `sparkstate verify` checks every file)."""
        n, p = self.spec.num_partitions, self.spec.partition_id
        if not self.spec.key_groups_route or n <= 0:
            return
        groups = [key_group(key) for key in self._live().sample_keys(sample)]
        misrouted = [g for g in groups if partition_of(g, n) != p]
        if not misrouted:
            return
        # The session's partition count may not be the checkpoint's (Spark's state data source reads with
        # the session conf): what counts is the count Spark routed these keys with.
        root = self.spec.location.checkpoint_root()
        io = open_fileio(root, self.spec.settings, self.spec.hadoop_s3a)
        for recorded in routing_partition_counts(io, root, version):
            if recorded != n and all(partition_of(g, recorded) == p for g in groups):
                log.info("version %s at %s: its keys route to partition %s of the %s partitions the checkpoint's "
                         "offset log records, not of the %s this session sets", version, self._file_manager.root,
                         p, recorded, n)
                return
        owner = partition_of(misrouted[0], n)
        self._close_backend()
        self._state = State.CLOSED
        raise WrongStoreError(
            f"version {version} at {self._file_manager.root} holds keys of partition {owner} of {n}, "
            f"not of partition {p}: another partition's state files were moved here. Put them back "
            "(`sparkstate verify` lists misplaced stores) or restore the checkpoint from a backup")

    def _rewound(self, version: int) -> bool:
        """Ask the live backend to go back to `version` in memory (retry of a batch, after an abort)."""
        backend = self._backend
        if backend is None or self._state is State.CLOSED:
            return False
        try:
            return backend.rewind(version)
        except Exception:  # noqa: BLE001 - memory is only a shortcut; the checkpoint is the truth
            return False

    # ---- idle-state expiry -----------------------------------------------------------------------------
    def _settle_stamps(self, version: int, manifest: Manifest | None, recall: bool = False) -> None:
        """The backend now holds `version` (`manifest`: its manifest when just read or written; None: none
        exists; `recall`: the backend held it in memory, its manifest is read if this store forgot it)."""
        if recall and not self._clocks.knows(version):
            manifest = self._manifest_or_none(version)
        self._backend = self._clocks.settle(self._backend, version, manifest)

    def _manifest_or_none(self, version: int) -> Manifest | None:
        try:
            return self._file_manager.read_manifest(version, self._ids.get(version))
        except VersionNotFoundError:
            return None

    def _stamp_unstamped(self) -> None:
        """A ttl applies to a version written without stamps: stamp every entry with this batch's time (once
        per store: the versions after it carry stamps). The store then holds writes of its own."""
        if self._clocks.unstamped:
            self._dirty = True  # first: a failure half-way leaves writes no version has
            n = self._live().stamp_all()  # type: ignore[attr-defined]  # a StampedBackend (_settle_stamps)
            log.info("%s: idle-state expiry stamped the %d entries of version %s with batch time %s",
                     self.spec.describe(), n, self._version, self._ctx.stamps.batch_time_ms)

    def _expire(self, backend: Backend) -> int:
        """Delete one slice's expired keys (a join's values store: its orphans) before a commit."""
        rows = self.spec.settings.ttl_cleanup_rows
        if isinstance(backend, StampedBackend):
            return backend.sweep(rows)
        if self._orphans is not None:
            assert self._version is not None
            base = self._version
            deleted = self._orphans.sweep(backend, lambda keys: self._partner_counts(base, keys), rows)
            if deleted is None:
                log.warning("%s: idle-state expiry found no open %s of version %d in this worker; its orphans "
                            "wait for a later commit", self.spec.describe(), count_store_of(self.spec.store_name),
                            base)
            return deleted or 0
        return 0

    def _partner_counts(self, version: int, keys: Sequence[bytes]) -> list[int | None] | None:
        for partner in self._partners(self.spec, count_store_of(self.spec.store_name)) if self._partners else ():
            counts = partner.visible_counts(version, keys)
            if counts is not None:
                return counts
        return None

    def visible_counts(self, version: int, keys: Sequence[bytes]) -> list[int | None] | None:
        """A join count store's row counts of `keys` as the batch that read `version` sees them (an expired
        count is None), or None when this store holds neither `version` (loaded, maybe written) nor the
        version it just committed from it."""
        with self._lock:
            held = version + 1 if self._state is State.COMMITTED else version
            if self._state not in (State.LOADED, State.UPDATING, State.COMMITTED) or self._version != held:
                return None
            clock = self._clocks.clock_of(version)
            inner = unwrapped(self._backend)
            if clock is None or inner is None or self._ttl_ms is None:
                return None
            edge = clock - self._ttl_ms
            oldest = STAMP.pack(edge) if edge >= 0 else b""
            return [None if v is None or v < oldest else count_of(v[STAMP_BYTES:]) for v in inner.get_many(keys)]

    def _read_manifest_for_load(self, version: int, checkpoint_id: str | None) -> Manifest | None:
        try:
            return self._file_manager.read_manifest(version, checkpoint_id)
        except VersionNotFoundError:
            if version == 0 and checkpoint_id is None:
                return None  # nothing committed yet: start empty
            raise

    @counted_as("commit")
    def commit(self) -> CommitResult:
        with self._lock:
            self._require("commit", _READABLE)
            assert self._version is not None
            self._refuse_foreign_commit()
            new_version = self._version + 1
            t0 = time.perf_counter()
            ids = self._ctx.commit_ids
            ids.checkpoint_id = str(uuid.uuid4()) if self.spec.checkpoint_ids else None
            ids.base_checkpoint_id = self._checkpoint_id if self.spec.checkpoint_ids else None
            try:
                backend = self._live()
                expired = self._expire(backend)
                outcome, timings = run_snapshot(backend, new_version)
            except BaseException:
                # The writes are not durable; the next load must restore the previous version.
                self._dirty, self._state = True, State.ABORTED
                raise
            self._custom.update({
                "sparkstateCommitMs": _ms_since(t0),
                "sparkstateFlushMs": outcome.flush_ms,
                "sparkstateUploadMs": timings.upload_ms,
                "sparkstateFilesUploaded": outcome.files_uploaded,
                "sparkstateFilesReused": outcome.files_reused,
                "sparkstateBytesUploaded": outcome.bytes_uploaded,
                "sparkstateCheckpointBytes": outcome.manifest.total_bytes,
                "sparkstateTtlExpiredKeys": expired,
            })
            self._custom.update({k: v for k, v in outcome.custom.items() if k in self._custom})
            self._version, self._dirty, self._state = new_version, False, State.COMMITTED
            self._head = new_version
            self._checkpoint_id = ids.checkpoint_id
            self._remember(new_version, ids.checkpoint_id)
            self._clocks.forget(new_version)
            self._settle_stamps(new_version, outcome.manifest)
            return CommitResult(version=new_version, metrics=dict(self._custom), checkpoint_id=ids.checkpoint_id,
                                base_checkpoint_id=ids.base_checkpoint_id)

    def abort(self) -> None:
        """Discard uncommitted writes (lazily: the next load restores if anything was written)."""
        with self._lock:
            if self._state in _READABLE:
                self._state = State.ABORTED

    def release(self) -> None:
        """Close the database and cursors; local files (cache) stay for whoever reopens the store."""
        with self._lock:
            self._close_backend()
            self._state = State.CLOSED

    def close(self) -> None:
        with self._lock:
            self.release()
            self._layout.delete_all()

    def _close_backend(self) -> None:
        backend, self._backend = self._backend, None
        self._version = None
        if backend is not None:
            backend.close()

    # ---- data -------------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        # Once per state lookup: the state check is inlined (a call costs as much as the check).
        with self._lock:
            if self._state not in _READABLE:
                self._require("get", _READABLE)
            return self._backend.get(key)  # type: ignore[union-attr]  # set in every readable state

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of `keys` in order (None: absent), under one lock: a GET_MANY frame."""
        with self._lock:
            self._require("get_many", _READABLE)
            return self._backend.get_many(keys)  # type: ignore[union-attr]  # set in every readable state

    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        with self._lock:
            self._require("apply_batch", _READABLE)
            self._dirty, self._state = True, State.UPDATING
            self._live().apply_batch(records)

    def open_cursor(self, prefix: bytes) -> Cursor:
        with self._lock:
            self._require("open_cursor", _READABLE)
            return _LockedCursor(self._live().open_cursor(prefix), self._lock)

    def scan(self, prefix: bytes, max_rows: int, max_bytes: int, *,
             as_stored: bool = False) -> Iterator[list[tuple[bytes, bytes]]]:
        """Every entry under `prefix` in key order, in chunks of at most `max_rows` / `max_bytes`: the
        whole-store read of offline tools (rescaling, verification); the cursor closes with the loop.
        `as_stored`: the values as the backend holds them, idle-state stamps included and expired keys
        too, for a copy whose manifest declares `stored_stamps()`."""
        cursor = self._open_stored_cursor(prefix) if as_stored else self.open_cursor(prefix)
        try:
            done = False
            while not done:
                chunk, done = cursor.next_chunk(max_rows, max_bytes)
                if chunk:
                    yield chunk
        finally:
            cursor.close()

    def _open_stored_cursor(self, prefix: bytes) -> Cursor:
        with self._lock:
            self._require("scan", _READABLE)
            inner = self._live()
            inner = inner.inner if isinstance(inner, StampedBackend) else inner
            return _LockedCursor(inner.open_cursor(prefix), self._lock)

    def stored_stamps(self) -> CommitStamps:
        """What a copy of the loaded version's stored values (`scan(as_stored=True)`) declares in its
        manifest: whether they carry idle-state stamps, and the batch time of the loaded version."""
        with self._lock:
            self._require("stored_stamps", _READABLE)
            return dataclasses.replace(self._ctx.stamps)  # a version loaded without stamps got them at load

    # ---- observability and maintenance --------------------------------------------------------------
    def metrics(self) -> StoreMetrics:
        with self._lock:
            backend = self._backend
            return StoreMetrics(num_keys=backend.num_keys() if backend else 0,
                                memory_used_bytes=backend.memory_used_bytes() if backend else 0,
                                custom=dict(self._custom))

    @counted_as("maintenance")
    def maintenance_snapshot(self) -> None:
        """Backend hook (RocksDB between flushes: write the SST set of an idle committed version in the
        background; heap: start a due background full snapshot). Never waits for I/O under the lock."""
        with self._lock:
            if self._backend is not None:
                self._backend.maintenance_snapshot()

    @counted_as("maintenance")
    def maintenance_cleanup(self) -> None:
        """Apply retention to the checkpoint, counting back from the version this store works on (nothing
        before the first load); remote-only, so it runs without the store lock."""
        head = self._head
        if head is not None:
            self._file_manager.cleanup(self.spec.min_versions_to_retain, head)


def _ms_since(t0: float) -> int:
    return int(round((time.perf_counter() - t0) * 1000))
