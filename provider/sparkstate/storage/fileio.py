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
from typing import Callable, Iterable
from urllib.parse import urlsplit

from ..errors import ConfigError


class FileIO(ABC):
    """Storage verbs. Implementations are stateless enough to be shared between threads."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The whole content of a (small) file."""

    @abstractmethod
    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        """Create or replace `path` so that readers see either the old or the new content."""

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

    def join(self, *parts: str) -> str:
        """Join path parts with '/', the separator of every supported scheme."""
        return posixpath.join(*parts)


# Scheme -> factory. S3 (s3, s3a) plugs in here with an `S3FileIO` that implements the same verbs; the
# checkpoint layer needs no change because it only ever holds a FileIO and path strings.
_FACTORIES: dict[str, Callable[[], FileIO]] = {}


def register_scheme(scheme: str, factory: Callable[[], FileIO]) -> None:
    _FACTORIES[scheme.lower()] = factory


def fileio_for(uri: str) -> FileIO:
    """The FileIO for a checkpoint location: plain paths and `file:` URIs are local."""
    scheme = urlsplit(uri).scheme.lower() if "://" in uri or uri.lower().startswith("file:") else ""
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise ConfigError(
            f"checkpoint location {uri!r} uses scheme '{scheme}:', which sparkstate cannot write yet "
            f"(supported: plain paths, {', '.join(s + ':' for s in sorted(_FACTORIES) if s)})")
    return factory()
