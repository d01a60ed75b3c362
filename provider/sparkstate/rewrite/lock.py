"""One rescale or migration of a checkpoint at a time: `<ckpt>/sparkstate-rescale/lock`.

The lock is created put-if-absent and names its holder (pid, host, start, task). A lock left by a dead
process on this host is taken over; any other holder refuses the second rewrite with who holds it.
"""
from __future__ import annotations

import json
import os
import socket
import time

from ..storage import FileIO, join_path
from .tool import RewriteTool

# The rewrites' own directory in a checkpoint: the lock, and a rescale's staging (`<plan id>/`)
WORK_DIR = "sparkstate-rescale"


class RewriteLock:
    """The lock of the checkpoint at `checkpoint`, taken for `tool` (whose error a refusal raises)."""

    def __init__(self, fio: FileIO, checkpoint: str, tool: RewriteTool) -> None:
        self.fio, self.path, self.tool = fio, join_path(checkpoint, WORK_DIR, "lock"), tool
        self.held = False

    def acquire(self, task: str) -> None:
        """Take the lock for `task` ("rescale to 4 partitions"), which a refused rewrite is told."""
        me = {"pid": os.getpid(), "host": socket.gethostname(), "startedMs": int(time.time() * 1000),
              "task": task}
        for _ in range(2):
            if self.fio.create_exclusive(self.path, json.dumps(me).encode()):
                self.held = True
                return
            try:
                other = json.loads(self.fio.read_bytes(self.path))
            except (FileNotFoundError, ValueError):
                continue
            if other.get("host") == me["host"] and not _pid_alive(int(other.get("pid", -1))):
                self.fio.delete_many([self.path])  # its owner died (killed rescale or migration): take over
                continue
            raise self.tool.error(
                f"another {other.get('task') or 'rescale or migration'} (pid {other.get('pid')} on "
                f"{other.get('host')}, started at {other.get('startedMs')} ms) holds {self.path}; wait for it, or "
                "delete that file if it is certainly dead")
        raise self.tool.error(f"could not take the lock {self.path}")

    def release(self) -> None:
        if self.held:
            self.fio.delete_many([self.path])
            self.held = False


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
