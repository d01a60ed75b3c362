"""`sparkstate verify`: the right verdict and exit code on healthy and damaged checkpoints, and a roll-back
that leaves a checkpoint every store loads and the query can continue from."""
from __future__ import annotations

import json
import os

import pytest

from sparkstate.checkpoint import CheckpointFileManager
from sparkstate.cli import main as cli_main
from sparkstate.config import PROVIDER_CLASS
from sparkstate.storage import fileio_for

from ..engine.conftest import contents, kv
from .conftest import (BATCHES, PARTITIONS, SPARK_HDFS, migrate_out_by_hand, open_store, pin_batch, write_log,
                       write_v2_checkpoint)


def _verify(ckpt: str, capsys, *extra: str) -> tuple[int, str]:
    code = cli_main(["verify", "--checkpoint", ckpt, *extra])
    return code, capsys.readouterr().out


def _store_dir(ckpt: str, partition: int) -> str:
    return f"{ckpt}/state/0/{partition}/sparkstate"


def _files_of(ckpt: str, partition: int, version: int) -> set[str]:
    """The remote names of the checkpoint files `version` lists."""
    location = f"{ckpt}/state/0/{partition}"
    return set(CheckpointFileManager(location, fileio_for(location)).read_manifest(version).remote_names())


def _newest_file(ckpt: str, partition: int) -> str:
    """A file only version 4 lists (its new SST, or its heap delta)."""
    files = f"{_store_dir(ckpt, partition)}/files"
    names = [n for n in os.listdir(files) if n.startswith("4-") and (n.endswith(".sst") or n.endswith(".arrow"))]
    return f"{files}/{sorted(names)[0]}"


def test_a_healthy_checkpoint(query, capsys):
    code, out = _verify(query, capsys)
    assert code == 0, out
    assert "verdict: OK, 2 stores" in out and "loadable versions: 1-4" in out


def _flip_byte(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("damage,expected", [
    ("truncated manifest", "truncated"),
    ("flipped byte", "corrupt (checksum mismatch)"),
    ("missing file", "is missing"),
])
def test_a_damaged_newest_version_is_found_and_rolled_back(query, capsys, backend, damage, expected):
    if damage == "truncated manifest":
        path = f"{_store_dir(query, 1)}/manifests/4.manifest"
        raw = open(path, "rb").read()
        open(path, "wb").write(raw[: len(raw) - 7])
    elif damage == "flipped byte":
        _flip_byte(_newest_file(query, 1))
    else:
        os.remove(_newest_file(query, 1))
    code, out = _verify(query, capsys)
    assert code == 1, out
    assert "0/1 (" in out and "DAMAGED: version 4 cannot be loaded" in out and expected in out
    assert "0/0 (" in out and "verdict: DAMAGED, 1 of 2 stores" in out
    assert "roll-back: every store loads version 3" in out
    assert f"{query}/commits/3" in out and "4.manifest" in out

    code, out = _verify(query, capsys, "--rollback-to", "3", "--yes")
    assert code == 0, out
    assert sorted(os.listdir(f"{query}/commits")) == ["0", "1", "2"]
    assert sorted(os.listdir(f"{query}/offsets")) == ["0", "1", "2", "3"]
    code, out = _verify(query, capsys)
    assert code == 0 and "loadable versions: 1-3" in out, out

    # The restarted query runs batch 3 again from version 3, on every partition.
    for p in range(PARTITIONS):
        store = open_store(query, p, f"again{p}", backend)
        store.load(3)
        store.apply_batch([kv(1000 + 10 * p + i) for i in range(10)])
        store.commit()
        store.load(4)
        assert len(contents(store)) == 40
        store.close()
    write_log(query, "commits", 3)
    code, out = _verify(query, capsys)
    assert code == 0 and "loadable versions: 1-4" in out, out


def test_a_store_with_every_version_damaged_leaves_no_roll_back(query, capsys):
    # A file every retained version lists, where there is one; else one file of each version (RocksDB may
    # compact the first SST away by version 4).
    manifests = f"{_store_dir(query, 0)}/manifests"
    listed = [_files_of(query, 0, v) for v in range(1, 5)]
    common = set.intersection(*listed)
    doomed = {sorted(common)[0]} if common else {sorted(names)[0] for names in listed}
    assert os.path.isdir(manifests)
    for name in doomed:
        os.remove(f"{_store_dir(query, 0)}/files/{name}")
    code, out = _verify(query, capsys)
    assert code == 1 and "restore the checkpoint from a backup" in out, out
    code, out = _verify(query, capsys, "--rollback-to", "2", "--yes")
    assert code == 1 and os.path.exists(f"{query}/commits/3")


def test_a_roll_back_asks_first(query, capsys, monkeypatch):
    os.remove(_newest_file(query, 0))
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    code, out = _verify(query, capsys, "--rollback-to", "3")
    assert code == 1 and "nothing removed" in out
    assert os.path.exists(f"{query}/commits/3")


# ---- checkpoint format v2: the attempt Spark recorded is the version ----------------------------------

def _only_in(ckpt: str, version: int, attempt: str, other: str) -> str:
    """A checkpoint file that attempt `attempt` of partition 1's `version` lists and `other` does not."""
    location = f"{ckpt}/state/0/1"
    fm = CheckpointFileManager(location, fileio_for(location))
    names = set(fm.read_manifest(version, attempt).remote_names()) - set(fm.read_manifest(version, other).remote_names())
    return f"{_store_dir(ckpt, 1)}/files/{sorted(names)[0]}"


def test_v2_a_damaged_zombie_attempt_does_not_make_the_recorded_version_damaged(tmp_path, capsys, backend):
    v2 = write_v2_checkpoint(str(tmp_path / "ckpt"), backend)
    os.remove(_only_in(v2.path, 3, v2.zombie, v2.recorded))  # `3.manifest` is the zombie's
    code, out = _verify(v2.path, capsys)
    assert code == 0 and "verdict: OK, 2 stores" in out, out


def test_v2_a_damaged_recorded_attempt_is_found_and_its_attempts_rolled_back(tmp_path, capsys, backend):
    v2 = write_v2_checkpoint(str(tmp_path / "ckpt"), backend)
    os.remove(_only_in(v2.path, 3, v2.recorded, v2.zombie))
    code, out = _verify(v2.path, capsys)
    assert code == 1 and "DAMAGED: version 3 cannot be loaded" in out and "is missing" in out, out
    manifests = f"{_store_dir(v2.path, 1)}/manifests"
    assert f"{manifests}/3_{v2.zombie}.manifest" in out and f"{manifests}/3.manifest" in out

    code, out = _verify(v2.path, capsys, "--rollback-to", "2", "--yes")
    assert code == 0, out
    for p in range(PARTITIONS):
        assert not [n for n in os.listdir(f"{_store_dir(v2.path, p)}/manifests") if n.startswith("3")]
    code, out = _verify(v2.path, capsys)
    assert code == 0 and "loadable versions: 1-2" in out, out


def test_v2_a_commit_log_naming_attempts_the_store_lacks_is_a_problem(tmp_path, capsys, backend):
    v2 = write_v2_checkpoint(str(tmp_path / "ckpt"), backend)
    raw = open(f"{v2.path}/commits/2").read()
    with open(f"{v2.path}/commits/2", "w") as f:
        f.write(raw.replace(v2.recorded, "0b5e55ed-0000-4000-8000-000000000000"))
    code, out = _verify(v2.path, capsys)
    assert code == 1 and "holds the manifest of none of them for version 3" in out, out


def test_a_query_moved_to_another_provider_is_refused_not_called_damaged(query, capsys):
    """After `sparkstate migrate --to hdfs` sparkstate's stores end at the migration; judged by the commit
    log they would look damaged, and a roll-back would undo the move."""
    migrate_out_by_hand(query)
    code = cli_main(["verify", "--checkpoint", query])
    out, err = capsys.readouterr()
    assert code == 1 and "DAMAGED" not in out and "roll-back" not in out
    assert f"keeps its state with {SPARK_HDFS} since batch {BATCHES} (`sparkstate migrate`)" in err, err
    assert cli_main(["verify", "--checkpoint", query, "--rollback-to", str(BATCHES)]) == 1
    assert os.path.exists(f"{query}/commits/{BATCHES + 2}")  # nothing removed


def test_no_roll_back_to_a_batch_that_pins_another_provider(query):
    """Batch 1 moved the state out of sparkstate and batch 2 back in (two `sparkstate migrate` runs): a
    roll-back to version 1 would make Spark re-run batch 1 on the other provider, which has no version 1."""
    from sparkstate.inspection import verify_checkpoint
    from sparkstate.storage.local import LocalFileIO

    for batch in range(BATCHES):
        path = f"{query}/offsets/{batch}"
        with open(path) as f:
            version_line, meta, *rest = f.read().split("\n")
        entry = json.loads(meta)
        entry["conf"]["spark.sql.streaming.stateStore.providerClass"] = SPARK_HDFS if batch == 1 else PROVIDER_CLASS
        with open(path, "w") as f:
            f.write("\n".join([version_line, json.dumps(entry), *rest]))
    report = verify_checkpoint(query, LocalFileIO(), LocalFileIO())
    assert report.ok and report.rollback_targets() == {2, 3}  # 1 pins HDFS; 4 is the newest (no batch 4 yet)


def test_no_roll_back_across_a_rescale(query):
    """Batches 0-1 pinned 3 partitions and batch 2 rescaled to the query's 2: Spark would re-run batch 1 with 3
    partitions against operator metadata the rescale rewrote, so the roll-back stops at the rescale."""
    from sparkstate.inspection import verify_checkpoint
    from sparkstate.storage.local import LocalFileIO

    for batch in (0, 1):
        path = f"{query}/offsets/{batch}"
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(f'"spark.sql.shuffle.partitions":"{PARTITIONS}"', '"spark.sql.shuffle.partitions":"3"'))
    report = verify_checkpoint(query, LocalFileIO(), LocalFileIO())
    assert report.partitions_by_batch[1] == 3 and report.rollback_targets() == {2, 3}


def test_an_unfinished_rescale_says_how_to_finish_it_not_damaged(query, capsys):
    """A rescale killed after its batch's offset log entry and before its commit: the new partitions have no
    version the commit log asks for, which is not damage, and the way on is running the rescale again."""
    pin_batch(query, BATCHES, partitions=3)
    for extra in ((), ("--rollback-to", str(BATCHES - 1))):
        code = cli_main(["verify", "--checkpoint", query, *extra])
        out, err = capsys.readouterr()
        assert code == 1 and "DAMAGED" not in out and "backup" not in out + err, out + err
        assert f"unfinished rescale to 3 partitions: its batch {BATCHES} pins 3 partitions" in err, err
        assert f"`sparkstate rescale --checkpoint {query} --partitions 3`, with --file-sink" in err
    assert os.path.exists(f"{query}/offsets/{BATCHES}")  # nothing removed


@pytest.mark.parametrize("direction", ["out", "in"])
def test_an_unfinished_migration_says_how_to_finish_it(query, capsys, direction):
    # batches 0-3 ran on the source provider; the migration's batch 4 pins the target
    source, target = (PROVIDER_CLASS, SPARK_HDFS) if direction == "out" else (SPARK_HDFS, PROVIDER_CLASS)
    for batch in range(BATCHES):
        pin_batch(query, batch, provider=source)
    pin_batch(query, BATCHES, provider=target)
    command = "--to hdfs`" if direction == "out" else "--to sparkstate --backend <the backend it was given>`"
    code = cli_main(["verify", "--checkpoint", query])
    out, err = capsys.readouterr()
    assert code == 1 and "DAMAGED" not in out and "backup" not in out + err, out + err
    assert f"unfinished migration to {target}: its batch {BATCHES} pins that provider" in err, err
    assert f"`sparkstate migrate --checkpoint {query} {command}, with --file-sink" in err, err


def test_an_unfinished_repartition_of_a_query_on_sparks_provider_is_not_called_ours(query, capsys):
    """Spark's own offline repartition, interrupted, on a query that runs on Spark's provider: verify refuses
    the query as another provider's, without sending the user to `sparkstate rescale`."""
    for batch in range(BATCHES):
        pin_batch(query, batch, provider=SPARK_HDFS)
    pin_batch(query, BATCHES, partitions=3, provider=SPARK_HDFS)
    code = cli_main(["verify", "--checkpoint", query])
    err = capsys.readouterr().err
    assert code == 1 and "sparkstate rescale" not in err and f"keeps its state with {SPARK_HDFS}" in err, err
