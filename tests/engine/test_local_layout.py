import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from sparkstate.engine import Store, local_layout
from sparkstate.errors import LocalDiskError

from .conftest import kv, make_spec


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    """tempfile.gettempdir() is tmp_path and the per-process choice of the default root is forgotten."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(local_layout, "_default_root", None)
    for var in ("LOCAL_DIRS", "SPARK_EXECUTOR_DIRS", "SPARK_LOCAL_DIRS"):
        monkeypatch.delenv(var, raising=False)
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


def test_the_default_root_sits_in_the_cluster_managers_scratch_space(tmp_root, monkeypatch):
    scratch = tmp_root / "yarn-appcache"
    scratch.mkdir()
    monkeypatch.setenv("LOCAL_DIRS", f"{tmp_root / 'missing'},{scratch}")
    assert local_layout.default_local_root() == str(scratch / f"sparkstate-local-{os.getuid()}")


_OWNER = """
import sys, time
from sparkstate.engine import Store
sys.path.insert(0, {tests!r})
from engine.conftest import kv, make_spec
store = Store(make_spec({ckpt!r}, sys.argv[1]), {root!r})
store.load(0)
store.apply_batch([kv(i) for i in range(20)])
store.commit()
print("ready", flush=True)
time.sleep(600)
"""


def _start_owner(instance: str, ckpt: str, root: str) -> subprocess.Popen:
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = _OWNER.format(tests=tests, ckpt=ckpt, root=root)
    return subprocess.Popen([sys.executable, "-c", code, instance], stdout=subprocess.PIPE, text=True)


def test_directories_of_killed_workers_are_reclaimed_at_the_next_start(tmp_path, monkeypatch):
    root, ckpt = str(tmp_path / "local"), "file:" + str(tmp_path / "ckpt" / "state" / "0" / "1")
    # Ten killed owners, one live one, and one directory two live processes use (a store that moved from one
    # worker of an executor to another, the first still alive), one of which is killed.
    owners = [_start_owner(f"dead-{i}", ckpt, root) for i in range(10)] + [_start_owner("alive", ckpt, root)]
    try:
        for p in owners:
            assert p.stdout.readline().strip() == "ready"
        for _ in range(2):  # one after the other, as the provider moves a store
            owners.append(_start_owner("shared", ckpt, root))
            assert owners[-1].stdout.readline().strip() == "ready"
        for p in owners[:10] + owners[-1:]:
            p.send_signal(signal.SIGKILL)
            p.wait(30)
        assert len(os.listdir(root)) == 12
        old_unowned = os.path.join(root, "left-by-an-old-release")
        os.makedirs(os.path.join(old_unowned, "cache"))
        an_hour_ago = time.time() - 3600
        os.utime(old_unowned, (an_hour_ago, an_hour_ago))
        os.makedirs(os.path.join(root, "being-created"))  # no lock yet, but too young to be anybody's leftover

        monkeypatch.setattr(local_layout, "_reclaimed", set())  # this process starts afresh
        store = Store(make_spec(ckpt, "next"), root)
        try:
            store.load(1)
            assert sorted(os.listdir(root)) == ["alive", "being-created", "next", "shared"]
        finally:
            store.close()
        assert sorted(os.listdir(root)) == ["alive", "being-created", "shared"]
    finally:
        for p in owners:
            p.kill()
            p.wait(30)


def test_a_directory_is_reclaimed_only_when_no_layout_holds_it(tmp_path):
    a = local_layout.InstanceLayout(str(tmp_path / "inst"))
    b = local_layout.InstanceLayout(str(tmp_path / "inst"))
    a.ensure_private()
    b.ensure_private()
    a.release_owner_lock()
    assert local_layout.reclaim_dead_instances(str(tmp_path)) == [], "b still holds it"
    b.release_owner_lock()
    local_layout._reclaimed.discard(str(tmp_path))
    assert local_layout.reclaim_dead_instances(str(tmp_path)) == [str(tmp_path / "inst")]
