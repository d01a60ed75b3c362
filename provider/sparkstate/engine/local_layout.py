"""The local working directory of one store instance: `<localRoot>/<instanceId>/`.

    cache/<remote name>   verified immutable checkpoint files (filled and pruned by CheckpointFileManager)
    db-<n>/               live database; a restore always builds a fresh db-<n+1>, then drops older ones
    ckpt-<n>/             temporary database checkpoint of one commit
    staging/              files of a commit written here before an upload (remote storage only)

Numbers only grow (scanned at start), so a directory name is never reused while something may still
hold it open, e.g. an old DB whose LOCK a leaked iterator keeps.

State files are private to the user: an instance directory is 0700, and the default local root
(`default_local_root`) is a directory of this user's that nobody else can enter.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import tempfile
import threading

from ..errors import local_disk_error

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"^(db|ckpt)-(\d+)$")
_default_root: str | None = None
_default_root_lock = threading.Lock()


def default_local_root() -> str:
    """`<tmp>/sparkstate-local-<uid>`, private to this user: made 0700, or, when it exists, used only if it
    is a real directory owned by this user (its mode is then tightened to 0700). A path someone else
    prepared (another owner, a symlink, a file) is never used: a fresh private directory replaces it, with a
    warning. Decided once per process."""
    global _default_root
    with _default_root_lock:
        if _default_root is None:
            _default_root = _private_dir(os.path.join(tempfile.gettempdir(), f"sparkstate-local-{os.getuid()}"))
        return _default_root


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

    def _scan_max(self) -> int:
        try:
            names = os.listdir(self.instance_dir)
        except FileNotFoundError:
            return 0
        return max((int(m.group(2)) for n in names if (m := _NUMBERED.match(n))), default=0)

    def ensure_private(self) -> None:
        """Create the instance directory, 0700: what is below it is reachable by this user only."""
        try:
            os.makedirs(self.instance_dir, mode=0o700, exist_ok=True)
            if stat.S_IMODE(os.stat(self.instance_dir).st_mode) != 0o700:
                os.chmod(self.instance_dir, 0o700)
        except OSError as e:
            raise local_disk_error(e, self.instance_dir, "create the store's local directory") from e

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
