import os
import stat
import tempfile

import pytest

from sparkstate.engine import Store, local_layout
from sparkstate.errors import LocalDiskError

from .conftest import kv, make_spec


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    """tempfile.gettempdir() is tmp_path and the per-process choice of the default root is forgotten."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(local_layout, "_default_root", None)
    return tmp_path


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_default_local_root_is_created_private(tmp_root):
    root = local_layout.default_local_root()
    assert root == str(tmp_root / f"sparkstate-local-{os.getuid()}")
    assert _mode(root) == 0o700 and os.lstat(root).st_uid == os.getuid()
    assert local_layout.default_local_root() == root  # decided once


def test_an_existing_root_of_ours_is_tightened(tmp_root):
    path = tmp_root / f"sparkstate-local-{os.getuid()}"
    path.mkdir(mode=0o777)
    os.chmod(path, 0o777)
    assert local_layout.default_local_root() == str(path) and _mode(path) == 0o700


def test_a_symlink_planted_at_the_default_root_is_never_followed(tmp_root):
    elsewhere = tmp_root / "attacker"
    elsewhere.mkdir()
    (tmp_root / f"sparkstate-local-{os.getuid()}").symlink_to(elsewhere)
    root = local_layout.default_local_root()
    assert os.path.realpath(root) != str(elsewhere) and not os.path.islink(root)
    assert _mode(root) == 0o700 and os.listdir(elsewhere) == []


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory owned by another user needs root")
def test_a_root_owned_by_another_user_is_never_used(tmp_root):
    path = tmp_root / f"sparkstate-local-{os.getuid()}"
    path.mkdir(mode=0o700)
    os.chown(path, 4242, 4242)
    root = local_layout.default_local_root()
    assert root != str(path) and os.lstat(root).st_uid == os.getuid() and _mode(root) == 0o700


def test_state_files_are_reachable_by_their_user_only(tmp_root):
    store = Store(make_spec("file:" + str(tmp_root / "ckpt" / "state" / "0" / "1"), backend="rocksdb"))
    try:
        store.load(0)
        store.apply_batch([kv(i) for i in range(50)])
        store.commit()
        root = local_layout.default_local_root()
        (instance,) = os.listdir(root)
        assert _mode(os.path.join(root, instance)) == 0o700
        assert any(name.startswith("db-") for name in os.listdir(os.path.join(root, instance)))
    finally:
        store.close()


def test_a_local_dir_that_cannot_be_created_names_the_path_and_the_setting(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(LocalDiskError, match=f"{blocker}.*localDir="):
        Store(make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "1"), local_dir=str(blocker / "x")))
