"""Restore operations for the RocksDB backend, one class per situation.

Each prepares a fresh local database directory and reports what it holds; the backend then opens it.
They never touch a live database, so a failed restore leaves nothing half-opened.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa

from ...checkpoint import Manifest
from ...errors import disk_errors_named
from ..backend_contract import BackendContext
from .. import arrow_files as hf
from .private_files import unpack_private_files
from .snapshot import CommittedFiles


@dataclass
class RestoredDir:
    """A database directory holding a version's SST set, and the change logs to replay on top of it."""
    db_dir: str
    num_keys: int
    logs: list[tuple[int, str, str]] = field(default_factory=list)  # (version, local copy, remote path)

    def log_columns(self) -> Iterator[tuple[pa.Array, pa.Array]]:
        """The writes of the change logs as (keys, values) columns, oldest version first, a record batch at
        a time (a null value is a delete)."""
        for version, path, source in self.logs:
            yield from hf.read_columns(path, hf.KIND_DELTA, version, source)


class EmptyRestore:
    """Nothing committed yet (version 0 without a manifest): an empty directory."""

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    def run(self) -> RestoredDir:
        return RestoredDir(db_dir=self.ctx.layout.new_db_dir(), num_keys=0)


class IncrementalRestore:
    """Rebuild a version from its manifest through the verified local cache.

    Shared files are downloaded once per instance (verified by size + crc32). SST files are hard-linked
    into the database directory under their local names; the private files are unpacked from their pack
    (private_files.py), or written from the manifest where formats v1 to v3 embedded them.
    Hard links make a warm restore cost O(number of files), not O(bytes), and RocksDB deleting a
    compacted file only drops its link, never the cached copy. Change logs stay in the cache, for the
    backend to replay once it opened the database.
    """

    def __init__(self, ctx: BackendContext, manifest: Manifest) -> None:
        self.ctx = ctx
        self.manifest = manifest

    def run(self) -> RestoredDir:
        fm, layout, m = self.ctx.file_manager, self.ctx.layout, self.manifest
        verify = self.ctx.settings.verify_local_cache
        files = CommittedFiles.of(m)
        cached = fm.fetch_all(m.shared_files, layout.cache_dir, m.version, verify)
        db_dir = layout.new_db_dir()
        try:
            with disk_errors_named("write the restored database into", db_dir):
                for local in files.ssts:
                    _link_or_copy(cached[local], os.path.join(db_dir, local))
                if files.pack is not None:
                    unpack_private_files(cached[files.pack.local], db_dir, fm.file_path(files.pack.remote))
                for pf in m.private_files:
                    with open(os.path.join(db_dir, pf.name), "wb") as f:
                        f.write(pf.data)
        except BaseException:
            shutil.rmtree(db_dir, ignore_errors=True)
            raise
        logs = [(version, cached[ref.local], fm.file_path(ref.remote)) for version, ref in files.logs]
        return RestoredDir(db_dir=db_dir, num_keys=m.num_keys, logs=logs)


def choose_restore(ctx: BackendContext, manifest: Manifest | None) -> EmptyRestore | IncrementalRestore:
    return EmptyRestore(ctx) if manifest is None else IncrementalRestore(ctx, manifest)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)  # e.g. a file system without hard links
