"""`sparkstate verify`: the right verdict and exit code on healthy and damaged checkpoints, and a roll-back
that leaves a checkpoint every store loads and the query can continue from."""
from __future__ import annotations

import os

import pytest

from sparkstate.checkpoint import CheckpointFileManager
from sparkstate.cli import main as cli_main
from sparkstate.storage import fileio_for

from ..engine.conftest import contents, kv
from .conftest import PARTITIONS, open_store, write_log


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
