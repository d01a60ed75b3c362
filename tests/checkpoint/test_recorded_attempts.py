"""recorded_attempts: which commit attempt of a version a store holds, among those Spark's commit log records."""
import os

import pytest

from sparkstate.checkpoint import CheckpointFileManager, Manifest, PrivateFile
from sparkstate.checkpoint.recorded_attempts import held_attempt, read_recorded_manifest
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
