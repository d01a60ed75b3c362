"""Finding the processes a test started, by a marker in their environment (workers inherit the JVM's)."""
from __future__ import annotations

import os

from sparkstate_jobs import procfs


def live_pids(environ_marker: str, cmdline_part: str | None = None) -> list[int]:
    """Live (not zombie) processes other than this one whose environment contains `environ_marker` and, if
    given, whose command line contains `cmdline_part`."""
    marker = environ_marker.encode()
    part = cmdline_part.encode() if cmdline_part is not None else None
    return [pid for pid in procfs.pids()
            if pid != os.getpid() and (part is None or part in procfs.cmdline(pid))
            and marker in procfs.environ(pid) and procfs.is_live(pid)]
