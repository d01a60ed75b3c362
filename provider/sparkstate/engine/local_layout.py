"""The local working directory of one store instance: `<localRoot>/<instanceId>/`.

    cache/<remote name>   verified immutable checkpoint files (filled and pruned by CheckpointFileManager)
    db-<n>/               live database; a restore always builds a fresh db-<n+1>, then drops older ones
    ckpt-<n>/             temporary database checkpoint of one commit
    staging/              files of a commit written here before an upload (remote storage only)

Numbers only grow (scanned at start), so a directory name is never reused while something may still
hold it open, e.g. an old DB whose LOCK a leaked iterator keeps.
"""
from __future__ import annotations

import os
import re
import shutil
import threading

_NUMBERED = re.compile(r"^(db|ckpt)-(\d+)$")


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

    def _new(self, kind: str) -> str:
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
