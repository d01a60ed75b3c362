"""recorded_attempts: which commit attempt of a version a store holds, among those Spark's commit log records."""
import os
from types import SimpleNamespace

import pytest

from sparkstate.checkpoint import CheckpointFileManager, Manifest, PrivateFile
from sparkstate.checkpoint.recorded_attempts import (
    RecordedStore,
    held_attempt,
    match_recorded_ids,
    read_recorded_manifest,
    state_unique_ids,
)
from sparkstate.errors import CheckpointError

A, B, C = "0" * 31 + "a", "0" * 31 + "b", "0" * 31 + "c"  # checkpoint ids: 32 hex digits


def publish(fm: CheckpointFileManager, version: int, checkpoint_id: str, num_keys: int) -> None:
    fm.publish_attempt(Manifest(version=version, backend="heap", num_keys=num_keys, writer_instance_id="w",
                                query_run_id="q", created_ms=0, shared_files=(),
                                private_files=(PrivateFile("CURRENT", b"x"),), checkpoint_id=checkpoint_id))


@pytest.fixture
def fm(tmp_path):
    fm = CheckpointFileManager("file:" + str(tmp_path / "ckpt"))
    publish(fm, 3, A, num_keys=1)
    publish(fm, 3, B, num_keys=2)  # a second attempt of the same version: 3.manifest is a copy of B's
    return fm


def names(fm: CheckpointFileManager) -> list[str]:
    return os.listdir(fm.manifests_dir.removeprefix("file:"))


@pytest.mark.parametrize("listed", [False, True], ids=["looked-up", "listed"])
def test_the_held_attempt_is_found_by_listing_or_by_lookup(fm, listed):
    listing = names(fm) if listed else None
    assert held_attempt(fm, 3, [C, A], listing) == 1
    assert held_attempt(fm, 3, [C], listing) is None
    assert held_attempt(fm, 4, [A, B], listing) is None  # ids of another version do not count


def test_a_reader_takes_the_recorded_attempt_not_the_last_published(fm):
    assert read_recorded_manifest(fm, 3, [A], names(fm)).num_keys == 1
    assert read_recorded_manifest(fm, 3, None, names(fm)).num_keys == 2  # nothing recorded: <v>.manifest


def test_a_recorded_attempt_the_store_does_not_hold_is_refused(fm):
    with pytest.raises(CheckpointError, match=rf"records the attempts {C}.*holds the manifest of none"):
        read_recorded_manifest(fm, 3, [C], names(fm))


def _join_like(held: dict[tuple[str, int], str]) -> list[RecordedStore]:
    """Two stores of operator 0 over two partitions; `held` says which id each store partition's files hold."""
    return [RecordedStore(0, name, part, held.get((name, part)), f"{name}/{part}")
            for name in ("left", "right") for part in (0, 1)]


def _by_id(held_id: str | None, candidates: list[str]) -> int | None:
    return candidates.index(held_id) if held_id in candidates else None


def test_recorded_ids_give_each_store_its_attempt_and_the_operators_store_order():
    recorded = {"0": [[A, B], [C, "0" * 31 + "d"]]}
    matched = match_recorded_ids(recorded, _join_like({("right", 0): A, ("left", 0): B, ("right", 1): C,
                                                       ("left", 1): "0" * 31 + "d"}), 3, _by_id, "commits/2")
    assert matched.order == {"0": ["right", "left"]}  # by position, not by name
    assert matched.per_store() == {"0/left": [B, "0" * 31 + "d"], "0/right": [A, C]}
    # a new entry for other attempts of the same stores keeps the positions
    new = {(0, "right", 0): "r0", (0, "left", 0): "l0", (0, "right", 1): "r1", (0, "left", 1): "l1"}
    stores = [SimpleNamespace(operator_id=0, single_partition=False)] * 2
    assert state_unique_ids(matched.order, stores, 2, new) == {"0": [["r0", "l0"], ["r1", "l1"]]}
    with pytest.raises(CheckpointError, match="operator 0 partition 1: no attempt id for store left"):
        state_unique_ids(matched.order, stores, 2, {k: v for k, v in new.items() if k != (0, "left", 1)})
    keyless = [SimpleNamespace(operator_id=0, single_partition=True)] * 2  # a global aggregation's: partition 0
    assert state_unique_ids(matched.order, keyless, 2, new) == {"0": [["r0", "l0"]]}


def test_state_files_that_do_not_match_the_commit_log_are_named():
    recorded = {"0": [[A, B], [C, "0" * 31 + "d"]]}
    with pytest.raises(CheckpointError, match="records no state ids of operator 0"):
        match_recorded_ids({}, _join_like({}), 3, _by_id, "commits/2")
    with pytest.raises(CheckpointError, match=r"store left partition 1: none of the attempts commits/2 records "
                                              r"for it .* has files of version 3 in left/1"):
        match_recorded_ids(recorded, _join_like({("left", 0): A, ("right", 0): B, ("right", 1): C}), 3, _by_id,
                           "commits/2")
    with pytest.raises(CheckpointError, match="stores left and right of operator 0 claim the same recorded attempt"):
        match_recorded_ids(recorded, _join_like({("left", 0): A, ("left", 1): C, ("right", 0): A}), 3, _by_id,
                           "commits/2")
