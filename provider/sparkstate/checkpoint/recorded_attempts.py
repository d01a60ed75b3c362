"""Which commit attempt of a version Spark recorded, for the tools that read a checkpoint outside a query
(`sparkstate verify`, `sparkstate inspect`).

Under checkpoint format v2 every commit of a store is an attempt with its own manifest
`<v>_<checkpointId>.manifest`, and `<v>.manifest` is a copy of whichever attempt was published last. That
need not be the attempt Spark kept: a speculative or zombie task can commit after the task whose result
the driver recorded. Spark's commit log entry of batch v-1 names, per operator and partition, one attempt
id per store of that partition (`stateUniqueIds`); a store's own is the one whose attempt manifest it
holds (ids are unique). Without ids (format v1, or no commit log entry for the batch) a version is its
`<v>.manifest`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Mapping, Protocol, Sequence, TypeVar

from ..errors import CheckpointError
from .file_manager import CheckpointFileManager, check_checkpoint_id, parse_manifest_name
from .manifest import Manifest
from .spark_logs import SparkLogs

_H = TypeVar("_H")


class RecordedAttempts:
    """The attempt ids Spark's commit log records per version, read lazily (one commit entry per batch)."""

    def __init__(self, logs: SparkLogs, commit_batches: Iterable[int]) -> None:
        self._logs = logs
        self._batches = set(commit_batches)
        self._ids: dict[int, dict[str, list[list[str]]] | None] = {}

    def candidates(self, version: int, operator: int, partition: int) -> list[str] | None:
        """The ids recorded for the stores of `partition` of `operator` at `version`, or None when the commit
        log records none (format v1, or batch version-1 has no entry). Raises SparkCheckpointError for an
        unreadable entry."""
        batch = version - 1
        if batch not in self._batches:
            return None
        if batch not in self._ids:
            self._ids[batch] = self._logs.read_commit(batch).state_unique_ids
        ids = self._ids[batch]
        if ids is None:
            return None
        parts = ids.get(str(operator)) or []
        return parts[partition] if partition < len(parts) else []


def held_attempt(fm: CheckpointFileManager, version: int, candidates: list[str],
                 manifest_names: Iterable[str] | None = None) -> int | None:
    """Index in `candidates` of the attempt whose manifest of `version` this store holds, or None when it
    holds none of them. Ids are unique, so at most one matches. `manifest_names` are the names in the
    store's manifests directory when the caller has listed it; without them each candidate is looked up."""
    if manifest_names is not None:
        held = {p[1] for name in manifest_names if (p := parse_manifest_name(name)) and p[0] == version}
        return next((i for i, c in enumerate(candidates) if c in held), None)
    return next((i for i, c in enumerate(candidates)
                 if fm.fileio.exists(fm.manifest_path(version, check_checkpoint_id(c)))), None)


def read_recorded_manifest(fm: CheckpointFileManager, version: int, candidates: list[str] | None,
                           manifest_names: Iterable[str]) -> Manifest:
    """The manifest a reader of `version` must take: the recorded attempt's, i.e. the candidate this store
    holds an attempt manifest of (`manifest_names`: the names in its manifests directory), or `<v>.manifest`
    when nothing is recorded."""
    if candidates is None:
        return fm.read_manifest(version)
    hit = held_attempt(fm, version, candidates, manifest_names)
    if hit is None:
        raise CheckpointError(
            f"Spark's commit log (batch {version - 1}) records the attempts {', '.join(candidates) or 'none'} for "
            f"this store's partition, and {fm.manifests_dir} holds the manifest of none of them for version "
            f"{version}: the state is not the one the commit log was written with")
    return fm.read_manifest(version, candidates[hit])


@dataclass(frozen=True)
class RecordedStore(Generic[_H]):
    """One partition of one store, as `match_recorded_ids` asks about it: `handle` is what the caller's
    `held` function looks in (a file manager, a directory), `where` names it in errors."""

    operator_id: int
    store_name: str
    partition: int
    handle: _H
    where: str


@dataclass(frozen=True)
class RecordedIds:
    """The attempt each store partition holds, and each operator's stores in the commit log's order."""

    ids: dict[tuple[int, str, int], str]  # (operator, store name, partition) -> attempt id
    order: dict[str, list[str]]           # operator id -> store names, position by position

    def per_store(self) -> dict[str, list[str]]:
        """The ids by store ("<operator>/<store name>"), one per partition in partition order."""
        out: dict[str, list[str]] = {}
        for (op, name, _part), checkpoint_id in sorted(self.ids.items()):
            out.setdefault(f"{op}/{name}", []).append(checkpoint_id)
        return out


def match_recorded_ids(recorded: dict[str, list[list[str]]], stores: Sequence[RecordedStore[_H]], version: int,
                       held: Callable[[_H, list[str]], int | None], source: str) -> RecordedIds:
    """Which of the attempts `recorded` (a commit log entry's `stateUniqueIds`, read from `source`) each store
    partition holds, by `held(handle, candidates)` (the index of the candidate whose files of `version` the
    store holds, or None). A commit log entry lists one id per store of a partition without naming the
    stores; the positions the stores' ids take give the operator's store order, which a new entry for the same
    stores repeats. Raises CheckpointError when the state files do not match the commit log."""
    ids: dict[tuple[int, str, int], str] = {}
    order: dict[str, list[str]] = {}
    for op in sorted({s.operator_id for s in stores}):
        per_partition = recorded.get(str(op))
        if not per_partition:
            raise CheckpointError(f"{source} records no state ids of operator {op}; the commit log does not match "
                                  "the state (restore the checkpoint from a backup)")
        positions: dict[int, str] = {}
        for store in (s for s in stores if s.operator_id == op):
            candidates = per_partition[store.partition] if store.partition < len(per_partition) else []
            hit = held(store.handle, candidates)
            if hit is None:
                raise CheckpointError(
                    f"operator {op} store {store.store_name} partition {store.partition}: none of the attempts "
                    f"{source} records for it ({', '.join(candidates) or 'none'}) has files of version {version} "
                    f"in {store.where}; the state files are not the ones this commit log was written with")
            if positions.setdefault(hit, store.store_name) != store.store_name:
                raise CheckpointError(f"{source}: stores {positions[hit]} and {store.store_name} of operator {op} "
                                      "claim the same recorded attempt")
            ids[(op, store.store_name, store.partition)] = candidates[hit]
        order[str(op)] = [positions[i] for i in sorted(positions)]
    return RecordedIds(ids, order)


class OperatorStore(Protocol):
    operator_id: int
    single_partition: bool  # keyless: the store has partition 0 only


def state_unique_ids(order: Mapping[str, Sequence[str]], stores: Iterable[OperatorStore], partitions: int,
                     ids: Mapping[tuple[int, str, int], str | None]) -> dict[str, list[list[str]]]:
    """A commit log entry's `stateUniqueIds` for the attempts `ids` ((operator, store name, partition) -> id):
    per operator of `order`, one list per partition (`partitions`, or one for an operator whose `stores` are
    all single-partition) with each store's id at the position `order` gives it. Raises CheckpointError
    naming a store partition without an id."""
    multi = {str(s.operator_id) for s in stores if not s.single_partition}
    out: dict[str, list[list[str]]] = {}
    for op, names in order.items():
        rows = []
        for part in range(partitions if op in multi else 1):
            row = [ids.get((int(op), name, part)) for name in names]
            missing = [name for name, checkpoint_id in zip(names, row) if not checkpoint_id]
            if missing:
                raise CheckpointError(f"operator {op} partition {part}: no attempt id for store {missing[0]}")
            rows.append([str(checkpoint_id) for checkpoint_id in row])
        out[op] = rows
    return out
