"""FileIO: the handful of file verbs the checkpoint layer needs, independent of the storage system.

Why so few verbs: every engine file operation goes through this interface, so tests can inject faults
by path, and an object store (S3) only has to implement these. Nothing here relies on rename being
atomic on the remote side except `write_bytes_atomic`, whose contract is "readers see the old or the
new content, never a torn one" (os.replace locally; a single PUT on object stores).

Paths are strings in the storage's own syntax (a local path, or a URI such as `file:/tmp/x`), joined
with `join`. Missing files raise `FileNotFoundError` from `read_bytes`, `download_file` and `size`.
"""
from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterable
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
        """Copy a local file to `path` (durable on return; `path` appears complete or not at all)."""

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
        """Join path parts with '/', the separator of every supported scheme."""
        return posixpath.join(*parts)


# Scheme -> factory(storage_conf). The checkpoint layer needs no change per scheme because it only ever
# holds a FileIO and path strings. `storage_conf` is scheme-specific (an `S3Options` for s3/s3a, ignored
# locally) and may be None (defaults: e.g. boto3's standard credential chain).
_FACTORIES: dict[str, Callable[[Any], FileIO]] = {}


def register_scheme(scheme: str, factory: Callable[[Any], FileIO]) -> None:
    _FACTORIES[scheme.lower()] = factory


def _ensure_registered() -> None:
    # S3 registers itself on import; imported lazily so local-only use never imports boto3.
    if "s3" not in _FACTORIES:
        from . import s3  # noqa: F401


def fileio_for(uri: str, storage_conf: Any = None) -> FileIO:
    """The FileIO for a checkpoint location: plain paths and `file:` URIs are local, `s3://` and
    `s3a://` are S3."""
    _ensure_registered()
    scheme = urlsplit(uri).scheme.lower() if "://" in uri or uri.lower().startswith("file:") else ""
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise ConfigError(
            f"checkpoint location {uri!r} uses scheme '{scheme}:', which sparkstate cannot write yet "
            f"(supported: plain paths, {', '.join(s + ':' for s in sorted(_FACTORIES) if s)})")
    return factory(storage_conf)
