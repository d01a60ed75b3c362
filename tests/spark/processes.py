"""Finding the processes a test started, by a marker in their environment (workers inherit the JVM's)."""
from __future__ import annotations

import os


def live_pids(environ_marker: str, cmdline_part: str | None = None) -> list[int]:
    """Live (not zombie) processes other than this one whose environment contains `environ_marker` and, if
    given, whose command line contains `cmdline_part`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if cmdline_part is not None:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if cmdline_part.encode() not in f.read():
                        continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if environ_marker.encode() not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found
