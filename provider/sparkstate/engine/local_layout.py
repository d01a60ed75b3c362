"""The local working directory of one store instance: `<localRoot>/<instanceId>/`.

    owner.lock            held (flock) by the process that owns the directory, for as long as it lives
    cache/<remote name>   verified immutable checkpoint files (filled and pruned by CheckpointFileManager)
    db-<n>/               live database; a restore always builds a fresh db-<n+1>, then drops older ones
    ckpt-<n>/             temporary database checkpoint of one commit
    staging/              files of a commit written here before an upload (remote storage only)

Numbers only grow (scanned at start), so a directory name is never reused while something may still
hold it open, e.g. an old DB whose LOCK a leaked iterator keeps.

State files are private to the user: an instance directory is 0700, and the default local root
(`default_local_root`) is a directory of this user's that nobody else can enter. The default root sits
in the directories the cluster manager gives the application when there are any (YARN's container
`LOCAL_DIRS`, a standalone worker's `SPARK_EXECUTOR_DIRS`, `SPARK_LOCAL_DIRS` on Kubernetes), so they go
with the application; else in the system's temporary directory.

A killed executor or driver cannot delete its instance directories. Every process using a directory holds
a shared lock on its `owner.lock`, which the kernel drops when the process dies, so the first store a
process opens on a root reclaims every directory there whose lock it can take exclusively
(`reclaim_dead_instances`): dead owners' copies never pile up across crashes.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time

from ..errors import local_disk_error

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"^(db|ckpt)-(\d+)$")
OWNER_LOCK = "owner.lock"
# An instance directory without an owner lock is reclaimed only when older than this: its creator takes the
# lock right after creating it, and directories of releases without locks are old.
UNOWNED_GRACE_S = 600.0
# Where cluster managers put an application's scratch space, in Spark's order (Utils.getConfiguredLocalDirs)
_CLUSTER_LOCAL_DIRS = (("LOCAL_DIRS", ","), ("SPARK_EXECUTOR_DIRS", os.pathsep), ("SPARK_LOCAL_DIRS", ","))
_default_root: str | None = None
_default_root_lock = threading.Lock()
_reclaimed: set[str] = set()
_reclaimed_lock = threading.Lock()


def default_local_root() -> str:
    """`<base>/sparkstate-local-<uid>`, private to this user, where `<base>` is the first scratch directory
    the cluster manager gave the application (see the module doc) or the system's temporary directory.
    Made 0700, or, when it exists, used only if it is a real directory owned by this user (its mode is then
    tightened to 0700). A path someone else prepared (another owner, a symlink, a file) is never used: a
    fresh private directory replaces it, with a warning. Decided once per process."""
    global _default_root
    with _default_root_lock:
        if _default_root is None:
            base = _cluster_scratch_dir() or tempfile.gettempdir()
            _default_root = _private_dir(os.path.join(base, f"sparkstate-local-{os.getuid()}"))
        return _default_root


def _cluster_scratch_dir() -> str | None:
    for var, sep in _CLUSTER_LOCAL_DIRS:
        for entry in os.environ.get(var, "").split(sep):
            if entry.strip() and os.path.isdir(entry.strip()):
                return entry.strip()
    return None


def _private_dir(path: str) -> str:
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, 0o700)
        return path
    fresh = tempfile.mkdtemp(prefix=f"sparkstate-local-{os.getuid()}-")
    log.warning("sparkstate: %s is not a private directory of this user (owner uid %d, mode %o%s); keeping "
                "local state in %s instead. Remove it, or set spark.sql.streaming.stateStore.sparkstate."
                "localDir.", path, st.st_uid, stat.S_IMODE(st.st_mode),
                ", a symlink" if stat.S_ISLNK(st.st_mode) else "", fresh)
    return fresh


def reclaim_dead_instances(root: str) -> list[str]:
    """Delete the instance directories under `root` whose owner is gone (their `owner.lock` is free), once
    per process and root; returns what was deleted. Never blocks: a held lock is skipped at once."""
    with _reclaimed_lock:
        if root in _reclaimed:
            return []
        _reclaimed.add(root)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        path = os.path.join(root, name)
        try:
            if _owner_is_gone(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        except OSError as e:  # another reclaimer, or a file we cannot read: leave it
            log.debug("not reclaiming %s: %r", path, e)
    if removed:
        log.info("sparkstate: removed %d local store directories of processes that are gone, under %s",
                 len(removed), root)
    return removed


def _owner_is_gone(path: str) -> bool:
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return False
    lock_path = os.path.join(path, OWNER_LOCK)
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return time.time() - st.st_mtime > UNOWNED_GRACE_S
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live owner holds it shared
        # Still the directory's lock (not one replaced meanwhile)? Then its owner is gone; holding the lock
        # while deleting keeps a new owner from taking it over in between.
        return os.fstat(fd).st_ino == os.stat(lock_path).st_ino
    finally:
        os.close(fd)


def _hold_shared(instance_dir: str) -> int:
    """Make the directory (0700) and hold a shared lock on its owner.lock; returns the lock's fd. Shared:
    every live process that uses the directory holds one (two workers of one executor may open one store
    instance); a reclaimer takes it exclusively only when none does. A reclaimer holding it makes this
    wait for the moment it deletes the directory; the directory is then made again."""
    for _ in range(100):
        os.makedirs(instance_dir, mode=0o700, exist_ok=True)
        try:
            fd = os.open(os.path.join(instance_dir, OWNER_LOCK),
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            continue  # deleted between makedirs and open
        fcntl.flock(fd, fcntl.LOCK_SH)
        if _still_locked(fd, instance_dir):
            return fd
        os.close(fd)  # a reclaimer deleted the directory meanwhile: make it again
    raise OSError(f"cannot take the owner lock of {instance_dir}: it keeps being deleted")


def _still_locked(fd: int, instance_dir: str) -> bool:
    """Whether `fd` is still the lock file the directory holds (it was not deleted and made again)."""
    try:
        return os.fstat(fd).st_ino == os.stat(os.path.join(instance_dir, OWNER_LOCK)).st_ino
    except FileNotFoundError:
        return False


def safe_name(text: str) -> str:
    """A file-system-safe version of an id."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "_"


class InstanceLayout:
    def __init__(self, instance_dir: str) -> None:
        self.instance_dir = instance_dir
        self.cache_dir = os.path.join(instance_dir, "cache")
        self.staging_dir = os.path.join(instance_dir, "staging")
        self._lock = threading.Lock()
        self._next = self._scan_max() + 1
        self._owner_fd: int | None = None  # a shared lock on owner.lock while this layout uses the directory

    def _scan_max(self) -> int:
        try:
            names = os.listdir(self.instance_dir)
        except FileNotFoundError:
            return 0
        return max((int(m.group(2)) for n in names if (m := _NUMBERED.match(n))), default=0)

    def ensure_private(self) -> None:
        """Create the instance directory, 0700 (what is below it is reachable by this user only), and hold
        its owner lock (`reclaim_dead_instances` leaves it alone while this process lives)."""
        try:
            os.makedirs(self.instance_dir, mode=0o700, exist_ok=True)
            if stat.S_IMODE(os.stat(self.instance_dir).st_mode) != 0o700:
                os.chmod(self.instance_dir, 0o700)
            self._hold_owner_lock()
        except OSError as e:
            raise local_disk_error(e, self.instance_dir, "create the store's local directory") from e

    def _hold_owner_lock(self) -> None:
        with self._lock:
            if self._owner_fd is not None and _still_locked(self._owner_fd, self.instance_dir):
                return
            if self._owner_fd is not None:
                os.close(self._owner_fd)  # the directory was removed and made again: lock its new file
            self._owner_fd = _hold_shared(self.instance_dir)

    def release_owner_lock(self) -> None:
        with self._lock:
            fd, self._owner_fd = self._owner_fd, None
        if fd is not None:
            os.close(fd)

    def _new(self, kind: str) -> str:
        self.ensure_private()
        with self._lock:
            self._next = max(self._next, self._scan_max() + 1)
            n = self._next
            self._next += 1
        path = os.path.join(self.instance_dir, f"{kind}-{n}")
        os.makedirs(path)
        return path

    def new_db_dir(self) -> str:
        return self._new("db")

    def new_ckpt_dir(self) -> str:
        """A path for a checkpoint that does not exist yet (RocksDB creates it)."""
        path = self._new("ckpt")
        os.rmdir(path)
        return path

    def remove_other_dbs(self, keep: str) -> None:
        """Drop stale db-* and ckpt-* directories (left by earlier restores or crashed commits)."""
        try:
            names = os.listdir(self.instance_dir)
        except FileNotFoundError:
            return
        for name in names:
            path = os.path.join(self.instance_dir, name)
            if _NUMBERED.match(name) and os.path.abspath(path) != os.path.abspath(keep):
                shutil.rmtree(path, ignore_errors=True)

    def delete_all(self) -> None:
        shutil.rmtree(self.instance_dir, ignore_errors=True)
        self.release_owner_lock()
