"""Where a recovery's CPU goes: CPU seconds of every thread of a Spark run's processes over a window,
summed by part (the JVM's JIT compilers, query planning, tasks, GC, state workers, ...).

Why per thread: on 2 cores the first batch after a restart is CPU-bound, and what is busy tells whether
a state store could make it shorter. A JVM's threads carry names that say what they are, cut to 15
characters in /proc ("C2 CompilerThre", "Executor task l", "stream executio"; the "Thread-<n>" threads
serve the Python driver's py4j calls, among them `start()`). sparkstate's workers are separate Python
processes. Linux only (/proc); elsewhere the sampler reports nothing.

The sampler reads /proc every `interval_s` in a background thread (a few ms of CPU per read for a JVM's
~200 threads), so a thread that ends inside the window still counts up to its last read.
"""
from __future__ import annotations

import os
import threading
from typing import Callable

from sparkstate_jobs import procfs

# (part, test on the process kind and the thread name), first match wins
_PARTS: list[tuple[str, Callable[[str, str], bool]]] = [
    ("state workers (Python)", lambda proc, name: proc == "worker"),
    ("benchmark driver (Python)", lambda proc, name: proc == "self"),
    ("RocksDB background threads", lambda proc, name: name.startswith("rocksdb:")),
    ("JIT compilers", lambda proc, name: "CompilerThre" in name),
    ("GC", lambda proc, name: name.startswith(("GC Thread", "G1 ", "VM Thread"))),
    ("tasks", lambda proc, name: name.startswith("Executor task")),
    ("query start and planning", lambda proc, name: name.startswith(("stream executio", "Thread-"))),
]
OTHER = "JVM, other threads"
# the order of a report's columns: the JVM's warm-up first, the benchmark's own process last
PARTS = ["JIT compilers", "query start and planning", "tasks", "state workers (Python)", "RocksDB background threads",
         "GC", OTHER, "benchmark driver (Python)"]


def part_of(proc: str, thread_name: str) -> str:
    """`proc`: "worker" (a sparkstate worker), "self" (this Python process) or "jvm" (any other process)."""
    for name, test in _PARTS:
        if test(proc, thread_name):
            return name
    return OTHER


class ThreadCpuSampler:
    """CPU per part of this process and its descendants between `start()` and `stop()`."""

    def __init__(self, root_pid: int | None = None, interval_s: float = 0.2) -> None:
        self.root = root_pid or os.getpid()
        self.interval_s = interval_s
        self._first: dict[tuple[int, int], int] = {}   # (pid, tid) -> ticks at its first read
        self._last: dict[tuple[int, int], tuple[str, int]] = {}
        self._kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.available = os.path.isdir(f"/proc/{self.root}/task")

    def _read(self, first: bool) -> None:
        for pid in [self.root, *procfs.descendants(self.root)]:
            kind = self._kind.get(pid)
            if kind is None:
                kind = self._kind[pid] = ("self" if pid == self.root else
                                          "worker" if procfs.is_store_worker(pid) else "jvm")
            for tid, (name, ticks) in procfs.thread_cpu_ticks(pid).items():
                key = (pid, tid)
                if key not in self._first:
                    # a thread already running at the start counts from there; one born later from zero
                    self._first[key] = ticks if first else 0
                self._last[key] = (name, ticks)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._read(first=False)

    def start(self) -> ThreadCpuSampler:
        if self.available:
            self._read(first=True)
            self._thread = threading.Thread(target=self._run, name="thread-cpu-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds per part (parts with none left out), in the order of PARTS."""
        if self._thread is None:
            return {}
        self._stop.set()
        self._thread.join()
        self._read(first=False)
        seconds = dict.fromkeys(PARTS, 0.0)
        for key, (name, ticks) in self._last.items():
            seconds[part_of(self._kind[key[0]], name)] += (ticks - self._first[key]) / procfs.CLOCK_TICKS
        return {part: round(s, 2) for part, s in seconds.items() if s > 0}


def core_share(cpu: dict[str, float], window_s: float, cores: int) -> str:
    """The window's CPU as a share of what `cores` could give in it, e.g. "86%"."""
    return f"{sum(cpu.values()) / (window_s * cores):.0%}"


def timed(window_s: float, cpu: dict[str, float], cores: int | None = None) -> str:
    """One line: the window, the CPU in it and its share of the cores, the largest parts."""
    cores = cores or os.cpu_count() or 1
    parts = ", ".join(f"{p} {s:.2f}" for p, s in sorted(cpu.items(), key=lambda kv: -kv[1]))
    return (f"{sum(cpu.values()):.2f} s CPU in {window_s:.2f} s ({core_share(cpu, window_s, cores)} of {cores} "
            f"cores): {parts}")
