"""The batch a rewrite adds, written into Spark's logs by hand-made checkpoints (no Spark): its versions, its
claim on the batch, and its commit log entry under checkpoint formats v1 and v2."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from sparkstate.errors import MigrationError, RescaleError
from sparkstate.rewrite.batch import BatchPublisher, RewriteBatch
from sparkstate.rewrite.tool import MIGRATION, RESCALE
from sparkstate.storage import fileio_for


@dataclass(frozen=True)
class _Store:
    operator_id: int
    store_name: str
    single_partition: bool = False


@dataclass(frozen=True)
class _Plan(RewriteBatch):
    checkpoint: str
    last_committed_batch: int
    source_checkpoint_ids: dict[str, list[str]] = field(default_factory=dict)
    store_order: dict[str, list[str]] = field(default_factory=dict)


def _checkpoint(root, batches: int, ids: dict | None = None) -> str:
    ckpt = root / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    for batch in range(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {"spark.sql.shuffle.partitions": "2"}}
        (ckpt / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{{\"logOffset\":{batch}}}")
        commit = {"nextBatchWatermarkMs": 0}
        if ids is not None:
            commit["stateUniqueIds"] = ids
        (ckpt / "commits" / str(batch)).write_text(f"v{1 if ids is None else 2}\n{json.dumps(commit)}")
    return str(ckpt)


def test_the_batch_and_versions_follow_the_last_committed_batch(tmp_path):
    plan = _Plan(str(tmp_path), 4, {"0/default": ["a", "b"]}, {"0": ["default"]})
    assert (plan.rewrite_batch, plan.source_version, plan.target_version) == (5, 5, 6)
    assert plan.checkpoint_ids and plan.source_checkpoint_id(_Store(0, "default"), 1) == "b"
    assert plan.source_checkpoint_id(_Store(0, "other"), 0) is None
    assert not _Plan(str(tmp_path), 4).checkpoint_ids


def test_an_offset_entry_not_its_own_refuses_the_rewrite_in_its_words(tmp_path):
    ckpt = _checkpoint(tmp_path, 3)
    publisher = BatchPublisher(fileio_for(ckpt), _Plan(ckpt, 2), RESCALE)
    entry = publisher.last_offset_entry().with_partitions(4)
    publisher.claim(entry, lambda existing: False)
    publisher.claim(entry, lambda existing: existing.shuffle_partitions == 4)  # an interrupted run's: accepted
    with pytest.raises(RescaleError, match="offsets/3 appeared while rescaling: .*; nothing was published"):
        publisher.claim(entry, lambda existing: False)
    with pytest.raises(MigrationError, match="appeared while migrating: .*; nothing was switched"):
        BatchPublisher(fileio_for(ckpt), _Plan(ckpt, 2), MIGRATION).claim(entry, lambda existing: False)


def test_the_commit_entry_repeats_the_last_one_with_the_target_ids_in_its_order(tmp_path):
    ckpt = _checkpoint(tmp_path, 2, ids={"0": [["x1", "y1"], ["x2", "y2"]]})
    plan = _Plan(ckpt, 1, store_order={"0": ["right", "left"]})
    stores = [_Store(0, "left"), _Store(0, "right")]
    publisher = BatchPublisher(fileio_for(ckpt), plan, MIGRATION)
    with pytest.raises(MigrationError, match="operator 0 partition 1: no attempt id for store right: re-run"):
        publisher.commit(stores, 2, {(0, "left", 0): "L0", (0, "right", 0): "R0", (0, "left", 1): "L1"}, "re-run")
    ids = {(0, "left", 0): "L0", (0, "right", 0): "R0", (0, "left", 1): "L1", (0, "right", 1): "R1"}
    publisher.commit(stores, 2, ids, "re-run")
    publisher.commit(stores, 2, ids, "re-run")  # the same entry again (an interrupted run): fine
    written = (tmp_path / "ckpt" / "commits" / "2").read_text()
    assert json.loads(written.split("\n", 1)[1])["stateUniqueIds"] == {"0": [["R0", "L0"], ["R1", "L1"]]}
    with pytest.raises(MigrationError, match="commits/2 appeared while migrating"):
        publisher.commit(stores, 2, {**ids, (0, "left", 1): "other"}, "re-run")


def test_without_ids_the_commit_entry_is_the_last_ones(tmp_path):
    ckpt = _checkpoint(tmp_path, 2)
    BatchPublisher(fileio_for(ckpt), _Plan(ckpt, 1), RESCALE).commit([], 2, {}, "re-run")
    assert (tmp_path / "ckpt" / "commits" / "2").read_text() == (tmp_path / "ckpt" / "commits" / "1").read_text()
