"""The batch a rescale or a migration adds to a stopped query, and how it is written into Spark's logs.

With B the query's last committed batch, the rewrite adds batch B+1 (`rewrite_batch`) the way Spark 4.3's
offline repartition does: it reads every store's version B+1, the state after batch B (`source_version`),
and writes version B+2, the state after its own batch (`target_version`). The source provider's files stay
where they are, and the target version is newer than anything written before, so no file is overwritten.

Under checkpoint format v2 a version is the commit attempt Spark's commit log recorded
(checkpoint/recorded_attempts.py): the plan holds the source version's recorded attempt of every store and
each operator's stores in the commit log's order, and the new batch's commit log entry lists the target's
attempt ids in the same positions.

Publishing (`BatchPublisher`) writes the batch in the order that keeps the query safe to restart at every
step: the offset log entry first, put-if-absent, which is the rewrite's claim on the batch (a query started
meanwhile takes it first, and the rewrite fails before switching anything); the tool's own switch (a
rescale's manifests); the file sinks' entries, never before the claim (a batch B+1 that a restart plans
would find them and skip its output); the commit log entry last, which completes the rewrite.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from ..checkpoint.recorded_attempts import OperatorStore, RecordedStore, match_recorded_ids, state_unique_ids
from ..checkpoint.spark_logs import OffsetEntry, SparkLogs
from ..errors import CheckpointError
from ..storage import FileIO, fileio_for
from .file_sink import record_empty_batch
from .tool import RewriteTool

_H = TypeVar("_H")
_P = TypeVar("_P", bound="RewriteBatch")


class NamedStore(Protocol):
    operator_id: int
    store_name: str


class RewriteBatch:
    """What a rescale's and a migration's plan share: their batch and versions (module doc), and under
    checkpoint format v2 the source version's recorded attempts. A base of their dataclasses, which give it
    the fields `checkpoint`, `last_committed_batch`, `source_checkpoint_ids` and `store_order`."""

    checkpoint: str
    last_committed_batch: int                   # B
    source_checkpoint_ids: dict[str, list[str]]  # "<op>/<store name>" -> recorded attempt id per partition
    store_order: dict[str, list[str]]            # operator id -> its store names in the commit log's order

    @property
    def rewrite_batch(self) -> int:
        return self.last_committed_batch + 1

    @property
    def source_version(self) -> int:
        return self.last_committed_batch + 1

    @property
    def target_version(self) -> int:
        return self.last_committed_batch + 2

    @property
    def checkpoint_ids(self) -> bool:
        """Whether the checkpoint is of format v2 (the target version's commits get attempt ids too)."""
        return bool(self.store_order)

    def source_checkpoint_id(self, store: NamedStore, partition: int) -> str | None:
        """The recorded attempt of the source version of `store`'s `partition` (None: format v1)."""
        ids = self.source_checkpoint_ids.get(f"{store.operator_id}/{store.store_name}") or []
        return ids[partition] if partition < len(ids) else None


def with_recorded_attempts(plan: _P, recorded: dict[str, list[list[str]]], stores: Sequence[RecordedStore[_H]],
                           held: Callable[[_H, list[str]], int | None], source: str, tool: RewriteTool) -> _P:
    """`plan` with the source version's attempt of each store partition among those batch B's commit log
    entry (`recorded`, read from `source`) records, found by `held(handle, candidates)`, and the operators'
    store order (recorded_attempts.match_recorded_ids); the tool's error when the state files do not match
    the commit log."""
    try:
        matched = match_recorded_ids(recorded, stores, plan.source_version, held, source)
    except CheckpointError as e:
        raise tool.error(str(e)) from None
    return replace(plan, source_checkpoint_ids=matched.per_store(), store_order=matched.order)


class BatchPublisher:
    """Writes `plan`'s batch into the checkpoint's Spark logs for `tool`, step by step (module doc); every
    step finds its own entry from an interrupted run acceptable, so running the rewrite again finishes it."""

    def __init__(self, fio: FileIO, plan: RewriteBatch, tool: RewriteTool) -> None:
        self.fio, self.plan, self.tool = fio, plan, tool
        self.logs = SparkLogs(fio, plan.checkpoint)

    def last_offset_entry(self) -> OffsetEntry:
        """Batch B's offset log entry, which the rewrite's batch repeats (it reads no new input)."""
        return self.logs.read_offset(self.plan.last_committed_batch)

    def claim(self, entry: str, is_own: Callable[[OffsetEntry], bool]) -> None:
        """Write the batch's offset log entry `entry` (put-if-absent). One already there is accepted when
        `is_own` recognises it (an interrupted run's); otherwise a query took the batch and nothing is switched."""
        path = self.logs.offset_path(self.plan.rewrite_batch)
        if not self.fio.create_exclusive(path, entry.encode()):
            if not is_own(self.logs.read_offset(self.plan.rewrite_batch)):
                raise self.tool.error(f"offset log entry {path} appeared while {self.tool.gerund}: the query was "
                                      f"started concurrently; {self.tool.untouched}")

    def record_in_file_sinks(self, file_sinks: Iterable[str], compact_interval: int) -> None:
        """The batch wrote no output: an empty entry in each file sink's own log (`file_sink.py`)."""
        for sink in file_sinks:
            record_empty_batch(fileio_for(sink), sink, self.plan.rewrite_batch, compact_interval, self.tool)

    def commit(self, stores: Iterable[OperatorStore], partitions: int,
               target_ids: Mapping[tuple[int, str, int], str | None], missing_id: str) -> None:
        """Write the batch's commit log entry: batch B's (same watermark); under checkpoint format v2 with the
        target version's attempt ids (`target_ids`: (operator, store name, partition) -> id, for `stores` over
        `partitions`), each operator's stores in the positions batch B's entry gave them. `missing_id` says
        what to do when a store partition has no id."""
        entry = self._commit_entry(stores, partitions, target_ids, missing_id).encode()
        path = self.logs.commit_path(self.plan.rewrite_batch)
        if not self.fio.create_exclusive(path, entry) and self.fio.read_bytes(path) != entry:
            raise self.tool.error(f"commit log entry {path} appeared while {self.tool.gerund}")

    def _commit_entry(self, stores: Iterable[OperatorStore], partitions: int,
                      target_ids: Mapping[tuple[int, str, int], str | None], missing_id: str) -> str:
        last = self.logs.read_commit(self.plan.last_committed_batch)
        if last.state_unique_ids is None:
            return last.raw
        try:
            ids = state_unique_ids(self.plan.store_order, stores, partitions, target_ids)
        except CheckpointError as e:
            raise self.tool.error(f"{e}: {missing_id}") from None
        return last.with_state_unique_ids(ids)
