"""LocalFileIO: FileIO on the local file system, accepting plain paths and `file:` URIs.

Spark hands checkpoint locations as Hadoop `Path` strings, e.g. `file:/tmp/ckpt/state/0/1`. Hadoop's
`Path.toString` does not percent-encode, so the path part is taken literally (no unquoting).
Durability: new content is written to a temporary sibling, fsynced, renamed over the target with
`os.replace`, and the directory is fsynced, so a crash leaves the old or the new file, never a torn one.
"""
from __future__ import annotations

import errno
import os
import shutil
import uuid
from typing import Iterable

from .fileio import FileIO, register_scheme

_CHUNK = 1 << 20


def local_path(path: str) -> str:
    """A plain local path for `path` or a `file:` URI (`file:/a`, `file:///a`, `file://localhost/a`)."""
    if path[:5].lower() != "file:":
        return path
    rest = path[5:]
    if rest.startswith("//"):
        authority, _, tail = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise ValueError(f"file URI with a remote host is not local: {path!r}")
        return "/" + tail
    return rest


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _tmp_sibling(target: str) -> str:
    d, name = os.path.split(target)
    return os.path.join(d, f".{name}.tmp-{uuid.uuid4().hex[:8]}")


class LocalFileIO(FileIO):
    """FileIO over `os`; parent directories are created on write."""

    def read_bytes(self, path: str) -> bytes:
        with open(local_path(path), "rb") as f:
            return f.read()

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        target = local_path(path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        tmp = _tmp_sibling(target)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            _remove_quietly(tmp)
            raise
        _fsync_dir(os.path.dirname(target) or ".")

    def upload_file(self, local_path_: str, path: str) -> None:
        self._copy(local_path_, local_path(path))

    def download_file(self, path: str, local_path_: str) -> None:
        self._copy(local_path(path), local_path_)

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def list(self, prefix_dir: str) -> list[str]:
        try:
            return [e.name for e in os.scandir(local_path(prefix_dir)) if e.is_file()]
        except FileNotFoundError:
            return []

    def delete_many(self, paths: Iterable[str]) -> None:
        for p in paths:
            _remove_quietly(local_path(p))

    def size(self, path: str) -> int:
        return os.stat(local_path(path)).st_size

    @staticmethod
    def _copy(src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        tmp = _tmp_sibling(dst)
        try:
            with open(src, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, _CHUNK)
                fout.flush()
                os.fsync(fout.fileno())
            os.replace(tmp, dst)
        except BaseException:
            _remove_quietly(tmp)
            raise
        _fsync_dir(os.path.dirname(dst) or ".")


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise


register_scheme("", LocalFileIO)
register_scheme("file", LocalFileIO)
