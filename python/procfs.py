"""The Linux process facts the benchmarks and tests read about a Spark run's processes, from /proc.

A process that exits while it is read is simply not there: every function treats a vanished /proc entry
as "no such process".
"""
from __future__ import annotations

import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")   # the unit of /proc's CPU times


def pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def parent_of(pid: int) -> int | None:
    try:
        return int(_stat_fields(pid)[1])
    except OSError:
        return None


def is_live(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> list[int]:
    return [p for p in pids() if parent_of(p) == pid]


def cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def is_store_worker(pid: int) -> bool:
    """A sparkstate worker process (`python -m sparkstate.worker`)."""
    return b"sparkstate.worker" in cmdline(pid)


def status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as {field: value}; raises OSError when the process is gone."""
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f if ":" in line)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...), read from one pass over /proc."""
    kids: dict[int, list[int]] = {}
    for p in pids():
        parent = parent_of(p)
        if parent is not None:
            kids.setdefault(parent, []).append(p)
    out, todo = [], list(kids.get(pid, ()))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def thread_cpu_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """{thread id: (thread name, user + system CPU in clock ticks)} of every thread of `pid`."""
    out: dict[int, tuple[str, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, int(fields[11]) + int(fields[12]))
    return out
