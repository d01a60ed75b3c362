"""The worker's heartbeat: a thread that proves to the JVM, several times a second, that this process runs.

The shim creates `<worker dir>/heartbeat` (64 bytes) before it starts the worker and maps it; this thread
writes two little-endian int64 into it every interval:

    offset 0   beats      +1 per interval: the process is scheduled and can take the GIL
    offset 8   progress   sparkstate.liveness.progress(): the store's work moves on

A stopped process, or one whose interpreter lock is held by a call that never returns, stops beating;
a deadlocked call keeps beating but stops progressing. The shim's watchdog tells the two apart and kills
the worker (jvm-shim Liveness.java). Only this thread writes the file: 8-byte aligned stores, read whole
on x86-64.
"""
from __future__ import annotations

import mmap
import os
import struct
import threading
import time

from .. import liveness

HEARTBEAT_BYTES = 64
_WORDS = struct.Struct("<qq")


class Heartbeat:
    def __init__(self, path: str, interval_s: float) -> None:
        fd = os.open(path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, HEARTBEAT_BYTES)
        finally:
            os.close(fd)
        self._interval_s = interval_s
        self._beats = 0
        self._stop = threading.Event()

    def beat(self) -> None:
        self._beats += 1
        _WORDS.pack_into(self._map, 0, self._beats, liveness.progress())

    def start(self) -> None:
        self.beat()
        threading.Thread(target=self._run, name="sparkstate-heartbeat", daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.beat()

    def stop(self) -> None:
        self._stop.set()


def start_from_env(socket_dir: str) -> Heartbeat | None:
    """The heartbeat the shim asked for (`SPARKSTATE_HEARTBEAT_INTERVAL_MS` and `<socket dir>/heartbeat`)."""
    interval_ms = os.environ.pop("SPARKSTATE_HEARTBEAT_INTERVAL_MS", None)
    path = os.path.join(socket_dir, "heartbeat")
    if not interval_ms or not os.path.exists(path):
        return None
    heartbeat = Heartbeat(path, max(0.01, int(interval_ms) / 1000.0))
    heartbeat.start()
    time.sleep(0)  # let the thread start before the slow imports that follow
    return heartbeat
