"""Where a store's files live, and the one way to open its file manager.

Spark names a store by its checkpoint location, `<checkpointLocation>/state/<op>/<part>[/<storeName>]`
(the default store's name is left out). Its sparkstate files live there, or, with the `stateLocation`
setting, at `<stateLocation>/<query key>/<op>/<part>[/<storeName>]`: the layout below `<ckpt>/state`,
under a key derived from the checkpoint root so that two queries given the same stateLocation never share
(and silently replace) each other's versions. Every tool that reads or writes a store's files (the
worker's stores, `sparkstate gc`, rescaling) addresses it through `StoreLocation` and opens it with
`open_file_manager`, so the storage options (S3 endpoint, credentials, retries) and the I/O parallelism
are chosen in one place.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..storage import FileIO, fileio_for, join_path
from ..storage.fileio import scheme_of, storage_options
from .file_manager import CheckpointFileManager


@dataclass(frozen=True)
class StoreLocation:
    """One store's address: Spark's store checkpoint location, the operator, partition and store name,
    and the `stateLocation` setting (None: files live under the checkpoint location)."""

    checkpoint_location: str
    operator_id: int
    partition_id: int
    store_name: str = "default"
    state_location_setting: str | None = None

    def checkpoint_root(self) -> str:
        """The query's checkpointLocation: the store location minus `/state/<op>/<part>[/<name>]`."""
        loc = self.checkpoint_location.rstrip("/")
        for tail in (f"/state/{self.operator_id}/{self.partition_id}/{self.store_name}",
                     f"/state/{self.operator_id}/{self.partition_id}"):
            if loc.endswith(tail):
                return loc[: -len(tail)]
        return loc

    def state_location(self) -> str:
        """Where this store's files live (see the module doc)."""
        base = self.state_location_setting
        if not base:
            return self.checkpoint_location
        parts = [base.rstrip("/"), query_key(self.checkpoint_root()), str(self.operator_id), str(self.partition_id)]
        if self.store_name != "default":
            parts.append(self.store_name)
        return "/".join(parts)

    def describe(self) -> str:
        return (f"store (op={self.operator_id}, part={self.partition_id}, name={self.store_name}) "
                f"at {self.state_location()}")


def spark_store_location(checkpoint_root: str, operator_id: int, partition_id: int,
                         store_name: str = "default") -> str:
    """Spark's `StateStoreId.storeCheckpointLocation()` for a query at `checkpoint_root`: the default
    store leaves its name out."""
    base = join_path(checkpoint_root, "state", str(operator_id), str(partition_id))
    return base if store_name == "default" else join_path(base, store_name)


def query_key(checkpoint_root: str) -> str:
    """`<last path component>-<10 hex of sha256(normalized root)>`: stable for one checkpoint location,
    readable, and distinct between queries. Local roots are normalized (`file:` URIs and relative paths
    to absolute paths) so `sparkstate gc --checkpoint /x` finds what Spark wrote for `file:/x`. Moving a
    checkpoint to another path therefore needs its state moved too."""
    root = checkpoint_root.rstrip("/")
    local = fileio_for(root).local_path(root) if scheme_of(root) in ("", "file") else None
    if local is not None:
        root = os.path.normpath(os.path.abspath(local))
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", root.rsplit("/", 1)[-1])[:40] or "root"
    return f"{name}-{hashlib.sha256(root.encode('utf-8')).hexdigest()[:10]}"


def state_root(checkpoint: str, state_location: str | None) -> str:
    """Where the stores of the query at `checkpoint` live: `<checkpoint>/state`, or
    `<stateLocation>/<query key>` (the parent of every `StoreLocation.state_location()` of the query)."""
    if not state_location:
        return checkpoint.rstrip("/") + "/state"
    return state_location.rstrip("/") + "/" + query_key(checkpoint)


def open_file_manager(location: str, settings: Any, hadoop_conf: Mapping[str, str] | None = None,
                      fileio: FileIO | None = None) -> CheckpointFileManager:
    """The file manager of the store whose files live at `location` (`StoreLocation.state_location()`),
    with the storage options and I/O parallelism of `settings`; `fileio` replaces the storage (tests)."""
    if fileio is None:
        fileio = fileio_for(location, storage_options(location, settings, hadoop_conf or {}))
    return CheckpointFileManager(location, fileio, io_threads=settings.io_threads)


def open_fileio(location: str, settings: Any, hadoop_conf: Mapping[str, str] | None = None) -> FileIO:
    """The FileIO of `location` with the storage options of `settings` (for tools that list or delete)."""
    return fileio_for(location, storage_options(location, settings, hadoop_conf or {}))


def discover_stores(root: str, fileio: FileIO) -> list[str]:
    """The stores under a query's state root, as paths relative to it (`<op>/<part>[/<name>]`): every
    directory holding a `sparkstate/` tree. One recursive listing: for offline tools, never the commit path."""
    mark = "sparkstate/"
    return sorted({info.name[: info.name.index(mark)].rstrip("/")
                   for info in fileio.list_info(root, recursive=True) if mark in info.name})
