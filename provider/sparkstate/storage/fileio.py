"""FileIO: the handful of file verbs the checkpoint layer needs, independent of the storage system.

Why so few verbs (ten): every file operation of the checkpoint layer goes through this interface, so
tests inject faults by path, and an object store (S3) only has to implement these. Nothing here relies
on rename being atomic on the remote side except `write_bytes_atomic`, whose contract is "readers see
the old or the new content, never a torn one" (os.replace locally; a single PUT on object stores).

Paths are strings in the storage's own syntax (a local path, or a URI such as `file:/tmp/x`), joined
with `join`. Missing files raise `FileNotFoundError` from `read_bytes`, `download_file` and `size`.

Implementations are chosen by URI scheme and imported on first use (`fileio_for`), so the interface
imports none of them: local use never imports boto3, and no implementation imports back into here
beyond the interface.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int
    mtime: float  # seconds since the epoch (storage clock)


class FileIO(ABC):
    """Storage verbs. Implementations are stateless enough to be shared between threads."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The whole content of a (small) file."""

    @abstractmethod
    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        """Create or replace `path` so that readers see either the old or the new content."""

    @abstractmethod
    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create `path` with `data` only if it does not exist (put-if-absent), atomically: of two
        concurrent callers exactly one gets True. False means the file already existed (unchanged).
        Locally: `os.link` of a fsynced temporary file; on S3: `PutObject` with `If-None-Match: *`."""

    @abstractmethod
    def upload_file(self, local_path: str, path: str) -> None:
        """Copy a local file to `path` (durable on return; `path` appears complete or not at all). The
        local file must not change afterwards: a local FileIO may hard-link it instead of copying."""

    @abstractmethod
    def download_file(self, path: str, local_path: str) -> None:
        """Copy `path` to a local file (the caller verifies the content)."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def list(self, prefix_dir: str) -> list[str]:
        """Names (not paths) of the files directly under `prefix_dir`; empty when it does not exist."""

    @abstractmethod
    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete files; paths that are already gone are ignored (two cleaners may race)."""

    @abstractmethod
    def size(self, path: str) -> int: ...

    @abstractmethod
    def list_info(self, prefix_dir: str, recursive: bool = False) -> list[FileInfo]:
        """Files under `prefix_dir` with size and modification time; `name` is relative to `prefix_dir`
        ('/'-separated when recursive). Used by the offline orphan collector, never on the commit path."""

    def join(self, *parts: str) -> str:
        """Join path parts with '/', the separator of every supported scheme (see `join_path`)."""
        return join_path(*parts)


    def open_write(self, path: str) -> BinaryIO | None:
        """A new file at `path` opened for writing in place, its directory entry already durable; None
        where the storage cannot write in place (object stores: the caller stages the file locally and
        uploads it). The caller fsyncs and closes it; `path` must not exist (names are unique)."""
        return None

    def local_path(self, path: str) -> str | None:
        """The local file system path of `path`, when this storage is the local file system: a caller may
        then write a file in place instead of staging and uploading it. None for remote storage."""
        return None


# Scheme -> the module under `sparkstate.storage` that implements it, imported on first use. Each module
# defines `open_fileio(storage_conf)` and `storage_options(settings, hadoop_conf)`.
_SCHEMES = {"": "local", "file": "local", "s3": "s3", "s3a": "s3"}


def join_path(base: str, *parts: str) -> str:
    """`base/part/...` in any supported scheme: a trailing '/' of `base` and the slashes around each
    part are dropped, so `join_path("s3://b/x/", "state")` is `s3://b/x/state`."""
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])


def scheme_of(uri: str) -> str:
    """'' for plain paths, else the lower-case URI scheme (`file`, `s3`, `s3a`, ...)."""
    return urlsplit(uri).scheme.lower() if "://" in uri or uri.lower().startswith("file:") else ""


def _implementation(uri: str) -> Any:
    scheme = scheme_of(uri)
    module = _SCHEMES.get(scheme)
    if module is None:
        raise ConfigError(
            f"checkpoint location {uri!r} uses scheme '{scheme}:', which sparkstate cannot write "
            f"(supported: plain paths, {', '.join(s + ':' for s in sorted(_SCHEMES) if s)})")
    return importlib.import_module(f"{__package__}.{module}")


def fileio_for(uri: str, storage_conf: Any = None) -> FileIO:
    """The FileIO for a location: plain paths and `file:` URIs are local, `s3://` and `s3a://` are S3.
    `storage_conf` is the implementation's options object (None: its defaults)."""
    return _implementation(uri).open_fileio(storage_conf)


def storage_options(uri: str, settings: Any, hadoop_conf: Mapping[str, str]) -> Any:
    """The options object for `uri`'s storage built from sparkstate settings and the Hadoop conf's
    entries (e.g. S3 endpoint and credentials); None where the storage takes none."""
    return _implementation(uri).storage_options(settings, hadoop_conf)
