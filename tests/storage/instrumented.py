"""The tests' one instrumented FileIO: fail, delay or count any verb by path pattern.

Every checkpoint write goes through FileIO (`upload_file`, `create_exclusive`, `write_bytes_atomic`, and
`open_write` for files written in place as a stream), so this wrapper is the fault-injection seam of every
engine and checkpoint test. Rules match a verb and a glob on the path:

    io = InstrumentedFileIO()                        # wraps a LocalFileIO
    io.fail("upload_file", "*/files/2-*")            # raise InjectedFault on a matching call
    io.fail("open_write", "*delta-*", after_bytes=100)   # the file accepts 100 bytes, then fails
    io.delay("open_write", "*full-*", gate=event)    # block until the event is set (or `seconds`)
    io.calls["read_bytes"]                           # how often a verb was called
    InstrumentedFileIO(in_place=False)               # behaves like remote storage: no open_write

Verbs: read_bytes, write_bytes_atomic, create_exclusive, upload_file, download_file, exists, list (also
list_info), delete (once per path of delete_many), size, open_write.
"""
from __future__ import annotations

import fnmatch
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, BinaryIO

from sparkstate.storage import FileIO, LocalFileIO


class InjectedFault(OSError):
    pass


@dataclass
class _Rule:
    verb: str
    pattern: str
    kind: str                      # "fail" or "delay"
    after_bytes: int | None = None
    times: int | None = None       # fail at most this often (None: always)
    seconds: float | None = None
    gate: threading.Event | None = None


class InstrumentedFileIO(FileIO):
    def __init__(self, inner: FileIO | None = None, *, in_place: bool = True) -> None:
        self.inner = inner if inner is not None else LocalFileIO()
        self.in_place = in_place
        self.rules: list[_Rule] = []
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    # ---- rules ----------------------------------------------------------------------------------
    def fail(self, verb: str, pattern: str, *, after_bytes: int | None = None, times: int | None = None) -> None:
        self.rules.append(_Rule(verb, pattern, "fail", after_bytes=after_bytes, times=times))

    def delay(self, verb: str, pattern: str, *, seconds: float | None = None,
              gate: threading.Event | None = None) -> None:
        self.rules.append(_Rule(verb, pattern, "delay", seconds=seconds, gate=gate))

    def heal(self) -> None:
        self.rules.clear()

    def _matching(self, verb: str, path: str) -> list[_Rule]:
        return [r for r in self.rules if r.verb == verb and fnmatch.fnmatch(path, r.pattern)]

    def _check(self, verb: str, path: str) -> _Rule | None:
        """Count the call, apply delays, raise for a failing rule; returns a rule that fails mid-write."""
        with self._lock:
            self.calls[verb] += 1
        midway = None
        for rule in self._matching(verb, path):
            if rule.kind == "delay":
                if rule.gate is not None:
                    assert rule.gate.wait(60), f"the test never opened the gate of {verb} on {path}"
                if rule.seconds:
                    time.sleep(rule.seconds)
                continue
            with self._lock:
                if rule.times is not None:
                    if rule.times <= 0:
                        continue
                    rule.times -= 1
            if rule.after_bytes is not None:
                midway = rule
                continue
            raise InjectedFault(f"injected {verb} failure on {path}")
        return midway

    # ---- verbs ----------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        self._check("read_bytes", path)
        return self.inner.read_bytes(path)

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        self._check("write_bytes_atomic", path)
        self.inner.write_bytes_atomic(path, data)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        self._check("create_exclusive", path)
        return self.inner.create_exclusive(path, data)

    def upload_file(self, local_path: str, path: str) -> None:
        self._check("upload_file", path)
        self.inner.upload_file(local_path, path)

    def download_file(self, path: str, local_path: str) -> None:
        self._check("download_file", path)
        self.inner.download_file(path, local_path)

    def exists(self, path: str) -> bool:
        self._check("exists", path)
        return self.inner.exists(path)

    def list(self, prefix_dir: str) -> list[str]:
        self._check("list", prefix_dir)
        return self.inner.list(prefix_dir)

    def list_info(self, prefix_dir: str, recursive: bool = False) -> list[Any]:
        self._check("list", prefix_dir)
        return self.inner.list_info(prefix_dir, recursive)

    def delete_many(self, paths) -> None:
        paths = list(paths)
        for p in paths:
            self._check("delete", p)
        self.inner.delete_many(paths)

    def size(self, path: str) -> int:
        self._check("size", path)
        return self.inner.size(path)

    def open_write(self, path: str) -> BinaryIO | None:
        if not self.in_place:
            return None
        midway = self._check("open_write", path)
        f = self.inner.open_write(path)
        if f is None or midway is None:
            return f
        return _FailingFile(f, midway.after_bytes or 0, path)

    def local_path(self, path: str) -> str | None:
        return self.inner.local_path(path) if self.in_place else None

    def join(self, *parts: str) -> str:
        return self.inner.join(*parts)


class _FailingFile:
    """A file that takes `budget` bytes, then fails every write (a disk that fills up mid-file)."""

    def __init__(self, f: BinaryIO, budget: int, path: str) -> None:
        self._f, self._budget, self._path = f, budget, path

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if n > self._budget:
            self._f.write(memoryview(data)[:self._budget])
            self._budget = 0
            raise InjectedFault(f"injected write failure in the middle of {self._path}")
        self._budget -= n
        return self._f.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def instrument_local_storage(monkeypatch: Any) -> InstrumentedFileIO:
    """Every local FileIO this process opens from now on (`fileio_for` of a plain path or `file:` URI)
    is one InstrumentedFileIO, returned for the test to set rules on: for code that opens its own FileIO
    (the rescale driver and tasks run in the test process)."""
    from sparkstate.storage import local

    io = InstrumentedFileIO()
    monkeypatch.setattr(local, "open_fileio", lambda _conf: io)
    return io
