"""RocksDB backend on rocksdict: raw byte keys, WAL off, bloom filter, per-store memtable and cache.

Durability comes from checkpoints, not the WAL: a commit flushes and checkpoints (see
snapshot.py), and anything not committed is discarded by restoring, so the WAL would only cost.

Exact key count: RocksDB has none, so it is tracked here. Each write needs to know whether its key
existed. `get` remembers the answer (`_known`), which covers the usual get-then-put of stateful
operators at no extra cost; the remaining keys of a batch are looked up with one multi-get. The map
lives for one micro-batch (cleared at commit) and is bounded by KNOWN_KEYS_LIMIT within one.

Change log: the writes since the committed version are also appended to a journal (engine/journal.py),
finished and listed in the manifest at commit as the version's `changeLog`. It serves Spark's change feed
and snapshot replay (`rocksdb.changeLog`), and it is what a commit between two flushes makes durable
(`rocksdb.flushEveryVersions` > 1): such a version is the last flushed SST set plus the change logs since,
whose writes are ingested as one SST file when the version is opened (log_replay.py). Not flushing every
commit saves the rewrites of level-0 files that a flush per micro-batch causes on a large state. Writes the
journal cannot hold (an append failed, or a bulk load filled the database) mark the version's changes as
not kept; such a version is flushed. Between flushes, Spark's maintenance thread finds the database idle and writes the
committed version's SST set in the background (snapshot.py, `BackgroundSstSet`); the next commit builds on
it, so the change logs a version needs stay few without a flush in a commit. A store opened by replaying
several change logs (a restart, a lost executor, a rewind) writes the opened version's SST set the same way
before its first write, so that its next open does not replay the same writes again; a reader that never
writes (inspect, a rescale's source, Spark's read stores) uploads nothing.

Compactions after an open: a database opened from committed files leaves its compactions to Spark's
maintenance (`_resume_compactions`). A restored version can hold enough level-0 bytes, with a replay's file
on top, for RocksDB to merge at once a level the size of the state: after a restart or an executor loss
that merge would compete with the new JVM's planning and code generation for the cores, in the first
batches, whose tasks commit one after another. The first maintenance after a commit starts them, or a
commit that finds level 0 at its compaction trigger, where RocksDB would merge by file count anyway; until
then a get checks the few level-0 files more. A reader never commits, so it never compacts.

Memtable (`rocksdb.memtable`): a store starts on a hash memtable, where a get or put costs less than half
what it costs in a skip list holding many batches, and moves to a skip list before its first scan
(`_before_scan`), since every iterator over a hash memtable sorts all of it first. Stores that never scan
(aggregations without a watermark, most (flat)MapGroupsWithState) keep the hash memtable.
"""
from __future__ import annotations

import logging
import shutil
from contextlib import contextmanager
from dataclasses import replace
from itertools import islice
from typing import Iterator, Sequence

import rocksdict

from ...checkpoint import Manifest
from ...config import PREFIX
from ...errors import StoreStateError, rocksdb_disk_error
from ..backend_contract import Backend, BackendContext, Cursor, SnapshotOutcome, SnapshotResources
from ..journal import DeltaJournal
from ..snapshot_runner import BackgroundSnapshotRunner
from .block_cache import BlockCacheLease
from .cursor import RocksDBCursor
from .log_replay import replay_file_options, replay_logs
from .options import make_options, resume_compactions
from .restore import RestoredDir, choose_restore
from .snapshot import (BackgroundSstSet, CommittedFiles, SstSet, SstSnapshotResources, drop_checkpoint,
                       take_checkpoint, take_logged, upload_checkpoint)

log = logging.getLogger(__name__)

# Bound on remembered key existence: enough for a big micro-batch of get-then-put, small in memory.
KNOWN_KEYS_LIMIT = 200_000
# Between flushes (rocksdb.flushEveryVersions), a commit flushes anyway once the change logs since the last
# flush hold this share of its SST files' bytes and at least LOG_BYTES_BEFORE_FLUSH: opening a version then
# replays at most about half the state's bytes, or a few MiB of logs (about 0.5 us per logged write alone)
# for a small state that a batch rewrites much of. The first commit of a store (no SST files yet) always
# flushes.
LOG_SHARE_BEFORE_FLUSH = 0.5
LOG_BYTES_BEFORE_FLUSH = 4 << 20
# An open that replayed this many change logs writes the opened version's SST set in the background before
# its first write. The ingested replay is one new SST file, uploaded with the next SST set anyway; a single
# log is cheaper to replay again than to upload as a file of its own.
REPLAYED_LOGS_BEFORE_SST_SET = 2


class RocksDBBackend(Backend):
    """One open rocksdict database in `db_dir` with its lineage (local SST name -> remote file).

    `base` is the manifest of the committed version the database started from (restored, or last
    committed; None: the empty version 0). `rewind` to that version rebuilds the database from it and the
    local cache: an abort (a cancelled task, a failed batch) costs a database reopen and the replay of
    its change logs, not a download."""

    def __init__(self, ctx: BackendContext, restored: RestoredDir, base: Manifest | None = None) -> None:
        self.ctx = ctx
        self._journaling = ctx.settings.rocksdb_change_log or ctx.settings.rocksdb_flush_every > 1
        self._db: rocksdict.Rdict | None = None
        self._cache: BlockCacheLease | None = None  # held while the database is open
        self._sst_set_due = False  # the open replayed logs: write the SST set before the first write
        # A hash memtable until the store's first scan (options.py, `_before_scan`), where commits go between
        # flushes: with a flush at every commit the memtable holds one batch, and the commit's flush would
        # sort it.
        self._point_memtable = ctx.settings.rocksdb_memtable == "auto" and ctx.settings.rocksdb_flush_every > 1
        # Opened from committed files, compactions not started yet (module docstring); a commit since the open.
        self._compactions_held = False
        self._committed_since_open = False
        self._open(restored)
        self._base = base
        self._known: dict[bytes, bool] = {}
        self._cursors: set[RocksDBCursor] = set()
        self._version = base.version if base is not None else 0  # the committed version written on
        self._changes: DeltaJournal | None = None  # writes since _version; None: none yet
        self._changes_lost = not self._journaling  # writes since _version no journal holds
        self._sst_sets = BackgroundSnapshotRunner()  # the SST set of a version committed as change logs

    def _open(self, restored: RestoredDir) -> None:
        """Open a restored directory and replay its change logs (the writes after its SST set). The
        worker's block cache is leased here unless the backend still holds its lease (a rewind)."""
        mb = self.ctx.settings.rocksdb_block_cache_mb
        if self._cache is None and mb > 0:
            self._cache = BlockCacheLease(mb)
        db = None
        self._compactions_held = restored.num_keys > 0 or bool(restored.logs)
        self._committed_since_open = False
        try:
            with _disk_errors_named(restored.db_dir, "open"):
                db = self._open_db(restored.db_dir)
                if restored.logs:
                    replay_logs(db, replay_file_options(self.ctx.settings), restored.log_columns(),
                                restored.db_dir + ".replay.sst")
        except BaseException:
            if db is not None:
                db.close()
            self._release_cache()
            raise
        self._db = db
        self.db_dir, self._num_keys = restored.db_dir, restored.num_keys
        self._sst_set_due = len(restored.logs) >= REPLAYED_LOGS_BEFORE_SST_SET

    def _open_db(self, db_dir: str) -> rocksdict.Rdict:
        """The database in `db_dir` with the store's options, its writes without WAL. The options are given
        for the default column family too: rocksdict would otherwise read the directory's OPTIONS file,
        which holds the memtable the database was last opened with."""
        options = make_options(self.ctx.settings, self._cache.cache if self._cache else None, self._point_memtable,
                               compactions=not self._compactions_held)
        db = rocksdict.Rdict(db_dir, options, column_families={"default": options})
        wo = rocksdict.WriteOptions()
        wo.disable_wal = True
        db.set_write_options(wo)
        return db

    def _before_scan(self) -> None:
        """Before the first scan of a store on a hash memtable: flush it and reopen the database with a
        skip list, which it keeps while this backend lives. Every iterator over a hash memtable would sort
        all of it first (with total-order seek; without, it would see one bucket). The flushed writes
        belong to no version yet, as those of a full memtable's own flush: commits publish SST sets and
        change logs, not the live database's files."""
        if not self._point_memtable:
            return
        db = self._live()
        with _disk_errors_named(self.db_dir, "flush"):
            db.flush(wait=True)  # the WAL is off: what a close does not flush is lost
        self._point_memtable = False
        self._db = None
        db.close()
        with _disk_errors_named(self.db_dir, "open"):
            self._db = self._open_db(self.db_dir)

    @property
    def _committed(self) -> CommittedFiles:
        """What the base version is made of: its SST set and the change logs after it."""
        return CommittedFiles.of(self._base)

    def _committed_now(self) -> tuple[CommittedFiles, SstSet | None]:
        """The base version's files: on an SST set written in the background once one is ready, of this
        database at the base version or one before it whose change logs the base still lists (a set that
        landed after the next commit), else the base's own."""
        committed = self._committed
        done = self._sst_sets.peek_result()
        if done is None or done.outcome.db_dir != self.db_dir:
            return committed, None
        later = tuple((v, ref) for v, ref in committed.logs if v > done.version)
        if [v for v, _ in later] != list(range(done.version + 1, self._version + 1)):
            return committed, None  # of a version before the base's own SST set
        return replace(done.outcome.files, logs=later), done.outcome

    def _live(self) -> rocksdict.Rdict:
        if self._db is None:
            raise StoreStateError(f"database {self.db_dir} is closed")
        return self._db

    # ---- data -----------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        db = self._db
        if db is None:
            raise StoreStateError(f"database {self.db_dir} is closed")
        value = db.get(key)
        known = self._known
        if len(known) >= KNOWN_KEYS_LIMIT:
            known.clear()
        known[key] = value is not None
        return value

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """One multi-get (RocksDB's batched lookup), remembered like `get`'s answers."""
        values = self._live().get(keys if isinstance(keys, list) else list(keys))
        known = self._known
        if len(known) + len(values) > KNOWN_KEYS_LIMIT:
            known.clear()
        known.update(zip(keys, [v is not None for v in values]))
        return values

    def apply_batch(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        if self._sst_set_due:
            self._sst_set_after_replay()
        db = self._live()
        known = self._known
        unknown = [k for k, _ in records if k not in known]  # empty after the usual get-then-put
        if unknown:
            unknown = list(dict.fromkeys(unknown))
            for k, v in zip(unknown, db.get(unknown)):
                known[k] = v is not None
        batch = rocksdict.WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        n = self._num_keys
        for k, v in records:
            if v is None:
                delete(k)
                if known[k]:
                    n -= 1
                    known[k] = False
            else:
                put(k, v)
                if not known[k]:
                    n += 1
                    known[k] = True
        try:
            with _disk_errors_named(self.db_dir, "write to"):
                db.write(batch)
        except BaseException:
            known.clear()  # it described writes that did not happen
            raise
        self._num_keys = n
        if len(known) > KNOWN_KEYS_LIMIT:
            known.clear()
        if not self._changes_lost:
            self._record_changes(records)

    def apply_replayed(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._lose_changes()  # replayed writes are an older version's changes, not this version's
        self.apply_batch(records)

    # ---- change log of the version being written -------------------------------------------------
    def _record_changes(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        try:
            if self._changes is None:
                self._changes = DeltaJournal(self.ctx, self._version + 1,
                                             self.ctx.settings.rocksdb_change_log_compression)
            self._changes.append(records)
        except Exception as e:  # noqa: BLE001 - the change log serves reads of history, never the state
            log.warning("change log of version %d failed (%r); that version keeps no change log",
                        self._version + 1, e)
            self._lose_changes()

    def _lose_changes(self) -> None:
        self._drop_changes()
        self._changes_lost = True

    def _drop_changes(self) -> None:
        """Start the change log afresh: the next write begins the journal of the version after `_version`."""
        changes, self._changes = self._changes, None
        self._changes_lost = not self._journaling
        if changes is not None:
            try:
                changes.discard()
            except Exception as e:  # noqa: BLE001 - an unreferenced file is garbage for `sparkstate gc`
                log.warning("could not delete an unfinished change log: %r", e)

    def open_cursor(self, prefix: bytes) -> Cursor:
        self._before_scan()
        cursor = RocksDBCursor(self._live().snapshot(), prefix, self._cursors.discard)
        if not cursor.closed:
            self._cursors.add(cursor)
        return cursor

    def num_keys(self) -> int:
        return self._num_keys

    def walk(self, position: object | None, max_rows: int) -> tuple[list[tuple[bytes, bytes]], object | None]:
        """Key order from just after the key `position`: one iterator seek, then `max_rows` steps."""
        self._before_scan()
        db = self._live()
        items = db.items(from_key=position) if position is not None else db.items()
        rows = list(islice(items, max_rows + 1))
        if rows and rows[0][0] == position:
            del rows[0]
        rows = rows[:max_rows]
        return rows, rows[-1][0] if len(rows) == max_rows else None

    def live_db(self) -> rocksdict.Rdict:
        """The open database (bulk loading ingests files into it)."""
        return self._live()

    def set_num_keys(self, n: int) -> None:
        """After a bulk load, which RocksDB itself counts exactly (ingested files only)."""
        self._num_keys = n
        self._known.clear()

    def bulk_loaded(self) -> None:
        """The database was filled by ingesting files: no change log holds those writes."""
        self._lose_changes()

    def start_empty_at(self, version: int) -> None:
        self._drop_changes()
        self._version = version

    def memory_used_bytes(self) -> int:
        db = self._db
        if db is None:
            return 0
        props = ["rocksdb.size-all-mem-tables", "rocksdb.estimate-table-readers-mem"]
        if self.ctx.settings.rocksdb_mmap_reads:
            props.append("rocksdb.live-sst-files-size")  # mapped: resident once read, like a cache's blocks
        total = 0
        for prop in props:
            total += db.property_int_value(prop) or 0
        if self._cache is not None:
            total += self._cache.usage_share()
        return total

    # ---- snapshot -------------------------------------------------------------------------------
    def prepare_snapshot(self, version: int) -> SnapshotResources:
        # A batch's get-then-put pairs end at its commit; a smaller map stays in the CPU caches.
        self._known.clear()
        if self._changes is not None and self._changes.version != version:
            self._lose_changes()  # journaling another version than the one committed
        committed, sst_set = self._committed_now()
        logged = (not self._changes_lost and version == self._version + 1 and bool(committed.ssts)
                  and len(committed.logs) + 1 < self.ctx.settings.rocksdb_flush_every
                  and committed.log_bytes < max(LOG_SHARE_BEFORE_FLUSH * committed.sst_bytes,
                                                LOG_BYTES_BEFORE_FLUSH))
        if logged:
            res = take_logged(version, self._num_keys)
        else:
            with _disk_errors_named(self.db_dir, "flush"):
                res = take_checkpoint(self.ctx, self._live(), version, self._num_keys)
        res.changes, self._changes = self._changes, None
        res.changes_kept = not self._changes_lost
        res.base, res.base_sst_set = committed, sst_set
        return res

    def upload_snapshot(self, resources: SnapshotResources) -> SnapshotOutcome:
        assert isinstance(resources, SstSnapshotResources) and resources.base is not None
        outcome = upload_checkpoint(self.ctx, resources, resources.base)
        # An SST set this commit built on counts among its files and is used up; one that landed after
        # prepare stays for the next commit.
        if resources.base_sst_set is not None:
            outcome.files_uploaded += resources.base_sst_set.files_uploaded
            outcome.bytes_uploaded += resources.base_sst_set.bytes_uploaded
            self._sst_sets.take_result()
        self._base = outcome.manifest
        self._version = resources.version
        self._drop_changes()  # prepare took the journal: this only restarts the change log
        self.ctx.file_manager.prune_cache(self.ctx.layout.cache_dir, outcome.manifest.remote_names())
        outcome.flush_ms = resources.flush_ms
        self._committed_since_open = True
        if self._compactions_held and self._level0_at_trigger():
            self._resume_compactions()
        return outcome

    def _level0_at_trigger(self) -> bool:
        files = self._live().property_int_value("rocksdb.num-files-at-level0") or 0
        return files >= self.ctx.settings.rocksdb_level0_trigger

    def _resume_compactions(self) -> None:
        """Start the compactions an open held (module docstring). A failure leaves them held for the next
        maintenance or commit to try again: the state is whole either way."""
        try:
            resume_compactions(self._live())
        except Exception as e:  # noqa: BLE001 - only the compaction waits
            log.warning("database %s: automatic compactions not started (%r); maintenance retries",
                        self.db_dir, e)
            return
        self._compactions_held = False

    def release_snapshot(self, resources: SnapshotResources) -> None:
        assert isinstance(resources, SstSnapshotResources)
        drop_checkpoint(resources)
        if resources.changes is not None and not resources.changes_finished:
            resources.changes.discard()  # the upload failed before the change log was made durable
            resources.changes = None

    def maintenance_snapshot(self) -> None:
        """Between flushes, once the committed version holds half the change logs a flush waits for, and
        while no write follows it: flush, and write its SST set in the background for the next commit to
        build on (sooner would upload SST files and change logs of the same writes). Starts the compactions
        an open held, once the store has committed."""
        if self._compactions_held and self._committed_since_open and self._db is not None:
            self._resume_compactions()
        every = self.ctx.settings.rocksdb_flush_every
        if len(self._committed.logs) >= max(1, every // 2):
            self._start_sst_set()

    def _sst_set_after_replay(self) -> None:
        """Before the first write after an open that replayed several change logs: the database holds
        exactly the committed version, its replay ingested as an SST file, so its SST set needs no flush of
        new writes. Only a writer gets here, so a reader of the checkpoint never uploads."""
        self._sst_set_due = False
        try:
            self._start_sst_set()
        except Exception as e:  # noqa: BLE001 - the opened version is whole without it; maintenance retries
            log.warning("SST set of replayed version %d not started: %r", self._version, e)

    def _start_sst_set(self) -> None:
        """Write the committed version's SST set in the background, if the database has no write since
        that version and the set is neither being written nor written already."""
        if (self._db is None or self.ctx.settings.rocksdb_flush_every <= 1 or self._changes is not None
                or self._changes_lost or self._sst_sets.busy):
            return
        done = self._sst_sets.peek_result()
        if done is not None and done.version == self._version:
            return
        with _disk_errors_named(self.db_dir, "flush"):
            self._sst_sets.start(BackgroundSstSet(self.ctx, self._live(), self.db_dir, self._num_keys,
                                                  self._committed), self._version)

    def wait_for_background(self, timeout: float | None = None) -> bool:
        """Tests and benchmarks: wait until no SST set is being written."""
        return self._sst_sets.wait(timeout)

    # ---- versions -------------------------------------------------------------------------------
    def rewind(self, version: int) -> bool:
        """Rebuild the database as committed `version` from local files, if it is the base version."""
        base_version = self._base.version if self._base is not None else 0
        if self._db is None or version != base_version:
            return False
        self._close_db()  # keeps the block cache lease, so the worker's cache stays warm
        self._version = base_version
        restored = choose_restore(self.ctx, self._base).run()  # the lineage's files are in cache/
        try:
            self._open(restored)
        except BaseException:
            shutil.rmtree(restored.db_dir, ignore_errors=True)
            raise
        self.ctx.layout.remove_other_dbs(keep=restored.db_dir)
        return True

    # ---- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        self._sst_sets.cancel()  # an upload in flight ends on its own; its files are gc's
        self._close_db()
        self._release_cache()

    def _close_db(self) -> None:
        """Close the cursors, the change log and the database; the block cache lease stays held."""
        for cursor in list(self._cursors):
            cursor.close()
        self._cursors.clear()
        self._drop_changes()
        db, self._db = self._db, None
        self._known.clear()
        if db is not None:
            db.close()

    def _release_cache(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            cache.release()


@contextmanager
def _disk_errors_named(db_dir: str, action: str) -> Iterator[None]:
    """A full or read-only local disk under the live database raises a LocalDiskError that names it, with
    the setting that places it; other errors pass as they are."""
    try:
        yield
    except Exception as e:
        named = rocksdb_disk_error(e, f"the store's RocksDB database in {db_dir} (under {PREFIX}localDir)", action)
        if named is e:
            raise
        raise named from e


def open_rocksdb_backend(ctx: BackendContext, manifest: Manifest | None) -> RocksDBBackend:
    """BackendBuilder for RocksDB: run the restore that fits, open the result, drop stale local dirs."""
    restored = choose_restore(ctx, manifest).run()
    try:
        backend = RocksDBBackend(ctx, restored, manifest)
    except BaseException:
        shutil.rmtree(restored.db_dir, ignore_errors=True)
        raise
    ctx.layout.remove_other_dbs(keep=restored.db_dir)
    ctx.file_manager.prune_cache(ctx.layout.cache_dir, manifest.remote_names() if manifest is not None else ())
    return backend
