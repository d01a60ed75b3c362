"""LocalFileIO: FileIO on the local file system, accepting plain paths and `file:` URIs.

Spark hands checkpoint locations as Hadoop `Path` strings, e.g. `file:/tmp/ckpt/state/0/1`. Hadoop's
`Path.toString` does not percent-encode, so the path part is taken literally (no unquoting).
Durability: new content is written to a temporary sibling, fsynced, renamed over the target with
`os.replace`, and the directory is fsynced, so a crash leaves the old or the new file, never a torn one.
"""
from __future__ import annotations

import errno
import os
import uuid
from typing import Any, BinaryIO, Callable, Iterable

from .. import liveness
from ..errors import disk_errors_named
from .fileio import FileInfo, FileIO

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


def local_path_or_none(path: str) -> str | None:
    """The local path of `path`, or None when it names another storage (e.g. `s3://`)."""
    if "://" in path and path[:5].lower() != "file:":
        return None
    return local_path(path)


def _write_fsynced_tmp(target: str, data: bytes) -> str:
    """Write `data` to a private temporary sibling of `target`, fsynced; return its path."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    tmp = _tmp_sibling(target)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


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

    def local_path(self, path: str) -> str:
        return local_path(path)

    def open_write(self, path: str) -> BinaryIO:
        target = local_path(path)
        with disk_errors_named("create", target):
            directory = os.path.dirname(target) or "."
            os.makedirs(directory, exist_ok=True)
            f = open(target, "xb")
            try:
                _fsync_dir(directory)  # the entry is durable now, while the file is written, not at commit
            except BaseException:
                f.close()
                _remove_quietly(target)
                raise
        return f

    def read_bytes(self, path: str) -> bytes:
        target = local_path(path)
        with disk_errors_named("read", target), open(target, "rb") as f:
            return f.read()

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        target = local_path(path)
        with disk_errors_named("write", target):
            tmp = _write_fsynced_tmp(target, data)
        try:
            os.replace(tmp, target)
        except BaseException:
            _remove_quietly(tmp)
            raise
        _fsync_dir(os.path.dirname(target) or ".")

    def create_exclusive(self, path: str, data: bytes) -> bool:
        # Write a private fsynced temporary file, then hard-link it to the target: link() fails with
        # EEXIST if the target exists, so exactly one of two racing creators wins, and readers never
        # see a partial file (same guarantee as S3's If-None-Match: *).
        target = local_path(path)
        with disk_errors_named("write", target):
            tmp = _write_fsynced_tmp(target, data)
        try:
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
        finally:
            _remove_quietly(tmp)
        _fsync_dir(os.path.dirname(target) or ".")
        return True

    def upload_file(self, local_path_: str, path: str) -> None:
        # Uploaded files are immutable (SSTs, staged files), so on the same file system a hard link is
        # the copy: no bytes move. Elsewhere (another mount, no hard links) the bytes are copied.
        target = local_path(path)
        with disk_errors_named("write", target):
            try:
                _replace_via_tmp(target, lambda tmp: _link_fsynced(local_path_, tmp))
            except _CannotLink:
                self._copy(local_path_, target)

    def download_file(self, path: str, local_path_: str) -> None:
        with disk_errors_named("copy", local_path_):
            self._copy(local_path(path), local_path_)

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def list(self, prefix_dir: str) -> list[str]:
        target = local_path(prefix_dir)
        try:
            with disk_errors_named("list", target):
                return [e.name for e in os.scandir(target) if e.is_file()]
        except FileNotFoundError:
            return []

    def delete_many(self, paths: Iterable[str]) -> None:
        for p in paths:
            _remove_quietly(local_path(p))

    def size(self, path: str) -> int:
        target = local_path(path)
        with disk_errors_named("read", target):
            return os.stat(target).st_size

    def list_info(self, prefix_dir: str, recursive: bool = False) -> list[FileInfo]:
        root = local_path(prefix_dir)
        out: list[FileInfo] = []
        if not os.path.isdir(root):
            return out
        if recursive:
            for d, _dirs, files in os.walk(root):
                for name in files:
                    full = os.path.join(d, name)
                    try:
                        st = os.stat(full)
                    except FileNotFoundError:
                        continue  # deleted while we walked
                    out.append(FileInfo(os.path.relpath(full, root).replace(os.sep, "/"), st.st_size, st.st_mtime))
            return out
        for e in os.scandir(root):
            try:
                if e.is_file():
                    st = e.stat()
                    out.append(FileInfo(e.name, st.st_size, st.st_mtime))
            except FileNotFoundError:
                continue
        return out

    @staticmethod
    def _copy(src: str, dst: str) -> None:
        _replace_via_tmp(dst, lambda tmp: _copy_fsynced(src, tmp))


class _CannotLink(Exception):
    """This file system cannot hard-link the two paths (another mount, or no hard links at all)."""


def _replace_via_tmp(target: str, fill: Callable[[str], None]) -> None:
    """Make `target` appear complete or not at all: `fill` writes a private temporary sibling (durably),
    which is renamed over `target`; then the directory entry is made durable."""
    directory = os.path.dirname(target) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = _tmp_sibling(target)
    try:
        fill(tmp)
        os.replace(tmp, target)
    except BaseException:
        _remove_quietly(tmp)
        raise
    _fsync_dir(directory)


def _link_fsynced(src: str, tmp: str) -> None:
    try:
        os.link(src, tmp)
    except OSError as e:
        if e.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise _CannotLink() from e
        raise
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)  # the content is the writer's; make sure it reached the disk
    finally:
        os.close(fd)


def _copy_fsynced(src: str, tmp: str) -> None:
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            fout.write(chunk)
            liveness.tick()  # a large copy is progress, not a hang (worker heartbeat)
        fout.flush()
        os.fsync(fout.fileno())


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise


def open_fileio(_conf: Any) -> FileIO:
    """The FileIO of plain paths and `file:` URIs (see storage.fileio)."""
    return LocalFileIO()


def storage_options(_settings: Any, _hadoop_conf: Any) -> None:
    return None
