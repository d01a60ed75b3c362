"""A FileIO that fails (or counts) chosen operations by path pattern: the fault-injection seam."""
from __future__ import annotations

import fnmatch
from collections import Counter

from sparkstate.storage import LocalFileIO


class InjectedFault(OSError):
    pass


class FaultyFileIO(LocalFileIO):
    def __init__(self) -> None:
        self.rules: list[tuple[str, str]] = []  # (verb, glob on the path)
        self.calls: Counter[str] = Counter()

    def fail(self, verb: str, pattern: str) -> None:
        self.rules.append((verb, pattern))

    def heal(self) -> None:
        self.rules.clear()

    def _check(self, verb: str, path: str) -> None:
        self.calls[verb] += 1
        for v, pattern in self.rules:
            if v == verb and fnmatch.fnmatch(path, pattern):
                raise InjectedFault(f"injected {verb} failure on {path}")

    def read_bytes(self, path):
        self._check("read_bytes", path)
        return super().read_bytes(path)

    def write_bytes_atomic(self, path, data):
        self._check("write_bytes_atomic", path)
        return super().write_bytes_atomic(path, data)

    def create_exclusive(self, path, data):
        self._check("create_exclusive", path)
        return super().create_exclusive(path, data)

    def list_info(self, prefix_dir, recursive=False):
        self._check("list", prefix_dir)
        return super().list_info(prefix_dir, recursive)

    def upload_file(self, local_path_, path):
        self._check("upload_file", path)
        return super().upload_file(local_path_, path)

    def download_file(self, path, local_path_):
        self._check("download_file", path)
        return super().download_file(path, local_path_)

    def list(self, prefix_dir):
        self._check("list", prefix_dir)
        return super().list(prefix_dir)

    def delete_many(self, paths):
        paths = list(paths)
        for p in paths:
            self._check("delete", p)
        return super().delete_many(paths)
