"""The worker's progress counter: how the JVM tells a busy worker from a stuck one.

Long-running work (frames handled, files moved, records restored or written) calls `tick()` as it goes;
the worker's heartbeat thread publishes the count next to its beat (worker/heartbeat.py), and the shim's
watchdog kills a worker only when a call has been in flight and the count has not moved for
`workerStallTimeoutMs` (docs/internals/workers.md, "Liveness"). A tick is one integer add under the
GIL: cheap enough for once per frame or per file, not meant for once per key.

Imports nothing of the package, so every layer (storage included) may tick.
"""
from __future__ import annotations

_progress = 0


def tick() -> None:
    """Record that the worker made headway."""
    global _progress
    _progress += 1


def progress() -> int:
    """Ticks so far (only ever grows)."""
    return _progress
