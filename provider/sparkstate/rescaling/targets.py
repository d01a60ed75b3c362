"""The new stores a rescale task builds, and the routing of old entries to them (executor side).

Routing (`route_chunk`): the key group is the first four bytes of a storage key (big-endian int32);
new partition = `pmod(kg, N)`. A chunk of a few ten thousand entries is routed with numpy in a handful of
C-level passes instead of a Python loop per entry, and the rule "every entry of old partition o satisfies
`pmod(kg, old) = o`" is checked for the whole chunk at once.

Targets: a new store is filled by its backend's bulk loader (`engine.backend_registry.bulk_loader_for`: sorted
SST files ingested into an empty database for RocksDB, batches of puts otherwise), then committed
through the backend's own snapshot path (`run_snapshot`). Local files of a target live in its own
instance directory (`InstanceLayout`), deleted by `close`.
"""
from __future__ import annotations

import dataclasses
from itertools import chain
from operator import itemgetter
from typing import Sequence

import numpy as np

from ..engine.backend_contract import BackendContext, BulkLoader, CommitStamps, SnapshotOutcome
from ..engine.backend_registry import bulk_loader_for
from ..engine.local_layout import InstanceLayout
from ..engine.snapshot_runner import run_snapshot
from ..errors import RescaleError
from ..keygroups import KEY_GROUP_BYTES

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
    value bytes, as stored), `end_source`, the same for the next old partition; then `commit` once, and
    `close`. The rows keep their idle-state stamps (engine/ttl.py): each old partition says whether its
    values carry them (`take_stamps`), and the new version declares the same, with the latest batch time."""

    def __init__(self, loader: BulkLoader, layout: InstanceLayout, ctx: BackendContext, label: str) -> None:
        self.loader, self.layout, self.ctx, self.label = loader, layout, ctx, label
        self.rows = self.data_bytes = 0
        self._stamps: CommitStamps | None = None

    def take_stamps(self, old: int, stamps: CommitStamps) -> None:
        """Old partition `old`'s values carry idle-state stamps or not, as `stamps` says."""
        if self._stamps is None:
            self._stamps = dataclasses.replace(stamps)
            return
        if stamps.stamped != self._stamps.stamped:
            raise RescaleError(f"{self.label} old partition {old}: its values {'carry' if stamps.stamped else 'lack'} "
                               "idle-state stamps and those of another old partition do not; run one batch of the "
                               "query (which stamps every store alike), then rescale")
        times = [t for t in (stamps.batch_time_ms, self._stamps.batch_time_ms) if t is not None]
        self._stamps.batch_time_ms = max(times) if times else None

    def add(self, old: int, rows: Rows, nbytes: int) -> None:
        self.loader.add(old, rows)
        self.rows += len(rows)
        self.data_bytes += nbytes

    def end_source(self, old: int) -> None:
        """Old partition `old` has given all its rows."""
        self.loader.end_source(old)

    def commit(self, version: int) -> SnapshotOutcome:
        if self._stamps is not None:  # what the commit's manifest declares (BackendContext.stamps)
            self.ctx.stamps.stamped, self.ctx.stamps.batch_time_ms = self._stamps.stamped, self._stamps.batch_time_ms
        outcome, _ = run_snapshot(self.loader.finish(), version)
        return outcome

    def close(self) -> None:
        self.loader.close()
        self.layout.delete_all()


def new_target(backend_name: str, ctx: BackendContext, layout: InstanceLayout, label: str) -> Target:
    return Target(bulk_loader_for(backend_name, ctx), layout, ctx, label)
