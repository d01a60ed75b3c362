"""The new stores a rescale task builds, and the routing of old entries to them (executor side).

Routing (`route_chunk`): the key group is the first four bytes of a storage key (big-endian int32);
new partition = `pmod(kg, N)`. A chunk of a few ten thousand entries is routed with numpy in a handful of
C-level passes instead of a Python loop per entry, and the rule "every entry of old partition o satisfies
`pmod(kg, old) = o`" is checked for the whole chunk at once.

Targets, one kind per backend, both committed through the backend's own snapshot path (`run_snapshot`):

- `SstTarget` (rocksdb): an old store is scanned in key order, so the entries it gives one new partition
  are already sorted. They are streamed into an SST file per (old partition, new partition) with RocksDB's
  `SstFileWriter` (same table options as the store: compression, bloom filter), and the finished files are
  ingested (moved, i.e. hard-linked) into an empty database. No memtable, write batch, existence lookup,
  flush or compaction; files of different old partitions may overlap in key range, which one ingest call
  accepts (their keys are disjoint: each key lives in exactly one old partition, checked by the routing).
  The committed version then lists the ingested SSTs exactly like any other RocksDB version.
- `BatchTarget` (any backend, used for heap): `apply_batch` into an empty backend.

Local files of a target live in its own instance directory (`InstanceLayout`), deleted by `close`.
"""
from __future__ import annotations

import os
from collections import deque
from itertools import chain, starmap
from operator import itemgetter
from typing import Any, Sequence

import numpy as np

from ..engine.backend import Backend, BackendContext, SnapshotOutcome, builder_for, run_snapshot
from ..engine.local_layout import InstanceLayout
from ..keygroups import KEY_GROUP_BYTES
from .spark_logs import RescaleError

WRITE_BATCH_ROWS = 65536
_KG_OFFSETS = np.arange(KEY_GROUP_BYTES, dtype=np.int64)

Rows = Sequence[tuple[bytes, bytes]]


def route_chunk(rows: Rows, n_new: int, n_old: int, old: int, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(new partition `pmod(kg, n_new)`, key + value bytes) of every row; raises if a row's key group does
    not belong to old partition `old` of `n_old` (then the stored key groups do not follow Spark's routing)."""
    keys = [r[0] for r in rows]
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    sizes = lens + np.fromiter(map(len, [r[1] for r in rows]), dtype=np.int64, count=len(rows))
    if len(keys) and int(lens.min()) < KEY_GROUP_BYTES:
        raise RescaleError(f"{label} old partition {old}: a key of {int(lens.min())} bytes has no key group")
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(keys), dtype=np.uint8)
    kg = buf[starts[:, None] + _KG_OFFSETS].view(">i4").ravel().astype(np.int64)
    wrong = np.flatnonzero(kg % n_old != old)
    if len(wrong):
        bad = int(kg[wrong[0]])
        raise RescaleError(
            f"{label} old partition {old}: an entry with key group {bad} belongs to partition {bad % n_old} of "
            f"{n_old}; the stored key groups do not match Spark's routing, so this state cannot be rescaled "
            "exactly")
    return kg % n_new, sizes


def data_bytes(rows: Rows) -> int:
    return sum(map(len, chain.from_iterable(rows)))


def pick(rows: Rows, indexes: np.ndarray) -> Rows:
    """rows[i] for i in indexes, gathered in C."""
    if len(indexes) == len(rows):
        return rows
    if len(indexes) == 1:
        return [rows[int(indexes[0])]]
    return itemgetter(*indexes.tolist())(rows) if len(indexes) else []


class Target:
    """One new store being built: `add` the rows of one old partition (in key order, with their key +
    value bytes), `end_source`, the same for the next old partition; then `commit` once, and `close`."""

    def __init__(self, ctx: BackendContext, layout: InstanceLayout) -> None:
        self.ctx, self.layout = ctx, layout
        self.rows = self.data_bytes = 0

    def add(self, old: int, rows: Rows, nbytes: int) -> None:
        raise NotImplementedError

    def end_source(self, old: int) -> None:
        """Old partition `old` has given all its rows."""

    def commit(self, version: int) -> SnapshotOutcome:
        raise NotImplementedError

    def close(self) -> None:
        self.layout.delete_all()


class BatchTarget(Target):
    """Writes through `apply_batch` of an empty backend of any kind."""

    def __init__(self, ctx: BackendContext, layout: InstanceLayout, backend_name: str) -> None:
        super().__init__(ctx, layout)
        self.backend: Backend | None = builder_for(backend_name)(ctx, None)
        self.pending: list[tuple[bytes, bytes]] = []

    def add(self, old: int, rows: Rows, nbytes: int) -> None:
        self.pending.extend(rows)
        self.rows += len(rows)
        self.data_bytes += nbytes
        if len(self.pending) >= WRITE_BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            assert self.backend is not None
            self.backend.apply_batch(self.pending)
            self.pending = []

    def commit(self, version: int) -> SnapshotOutcome:
        assert self.backend is not None
        self._flush()
        outcome, _ = run_snapshot(self.backend, version)
        return outcome

    def close(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()
        super().close()


class SstTarget(Target):
    """RocksDB: sorted rows -> one SST file per old partition -> ingested into an empty database."""

    def __init__(self, ctx: BackendContext, layout: InstanceLayout) -> None:
        super().__init__(ctx, layout)
        import rocksdict

        from ..engine.rocksdb_backend import make_options

        self._rocksdict = rocksdict
        self._options, _ = make_options(ctx.settings)
        self._sst_dir = os.path.join(layout.instance_dir, "ingest")
        os.makedirs(self._sst_dir, exist_ok=True)
        self._writer: Any = None   # SstFileWriter of the current old partition, opened at its first row
        self._files: list[str] = []
        self._backend: Backend | None = None

    def add(self, old: int, rows: Rows, nbytes: int) -> None:
        if not rows:
            return
        w = self._writer
        if w is None:
            w = self._writer = self._rocksdict.SstFileWriter(options=self._options)
            path = os.path.join(self._sst_dir, f"from-{old}.sst")
            w.open(path)
            self._files.append(path)
        # w[k] = v for every row, iterated in C; the writer refuses a key not greater than the one
        # before it, so the sort order is checked as well.
        deque(starmap(w.__setitem__, rows), maxlen=0)
        self.rows += len(rows)
        self.data_bytes += nbytes

    def end_source(self, old: int) -> None:
        self._finish_file()

    def _finish_file(self) -> None:
        w, self._writer = self._writer, None
        if w is not None:
            w.finish()

    def commit(self, version: int) -> SnapshotOutcome:
        from ..engine.rocksdb_backend import RocksDBBackend

        self._finish_file()
        backend = self._backend = RocksDBBackend(self.ctx, self.layout.new_db_dir(), {}, 0)
        backend.fill_from_sst_files(self._files, self.rows)
        outcome, _ = run_snapshot(backend, version)
        return outcome

    def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()
        self._writer = None
        super().close()


def new_target(backend_name: str, ctx: BackendContext, layout: InstanceLayout) -> Target:
    if backend_name == "rocksdb":
        return SstTarget(ctx, layout)
    return BatchTarget(ctx, layout, backend_name)

