"""Restore operations of the heap backend, one class per situation; each returns the contents (a live
table) and the chain of files they were read from.

EmptyHeapRestore   nothing committed yet (version 0 without a manifest).
ChainRestore       the manifest's chain (chain.py) in order: the full snapshot, if any, then the deltas.
                   Files are fetched through the verified local cache (size + crc32), read, and dropped
                   from the cache again: the data now lives in memory. The files' rows, in order, are
                   a log of writes (write_log.py) that goes into the live table in one bulk replay
                   (live_table.table_from_writes): a key's last write wins, with no per-key insert.
FullSnapshotRestore one full snapshot alone (snapshot replay starts from it, change_feed.py).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from ...checkpoint import CheckpointFileManager, Manifest, SharedFileRef
from ...errors import ChangeFeedError, CheckpointError, CorruptCheckpointError
from ..backend_contract import BackendContext
from .. import arrow_files as hf
from .chain import EMPTY_CHAIN, Chain
from .live_table import LiveTable, new_live_table, table_from_writes
from .write_log import WriteLog


@dataclass
class RestoredHeap:
    table: LiveTable
    chain: Chain


def _libc_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _libc_malloc_trim()


def return_freed_memory() -> None:
    """Give the memory a restore freed back to the OS: its log and its arrays of one number per row. Arrow's
    allocator and glibc's both keep freed memory for reuse; without this, a worker that restored a 2.5M-key
    store stays resident at over three times the table's size (docs/benchmarks/heap_restore.md)."""
    pa.default_memory_pool().release_unused()
    if _malloc_trim is not None:
        _malloc_trim(0)


def replay(layout: str, batches: Iterable[tuple[pa.Array, pa.Array]]) -> LiveTable:
    """The live table of the rows `batches` yields in write order (a log of writes, write_log.py), with the
    memory the replay freed handed back. The log is the only holder of the rows while the table builds."""
    table = table_from_writes(layout, WriteLog.of(batches))
    return_freed_memory()
    return table


class EmptyHeapRestore:
    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    def run(self) -> RestoredHeap:
        return RestoredHeap(new_live_table(self.ctx.settings.heap_layout), EMPTY_CHAIN)


class ChainRestore:
    def __init__(self, ctx: BackendContext, manifest: Manifest) -> None:
        self.ctx = ctx
        self.manifest = manifest

    def run(self) -> RestoredHeap:
        m, fm, layout = self.manifest, self.ctx.file_manager, self.ctx.layout
        source = fm.manifest_path(m.version)
        chain = Chain.of(m, source)
        verify = self.ctx.settings.verify_local_cache
        steps = ([(hf.KIND_FULL, chain.full_version, chain.full)] if chain.full else []) + \
                [(hf.KIND_DELTA, v, ref) for v, ref in chain.deltas]

        def rows() -> Iterator[tuple[pa.Array, pa.Array]]:
            for kind, v, ref in steps:
                path = fm.fetch_to_cache(ref, layout.cache_dir, m.version, verify)
                yield from hf.read_columns(path, kind, v, fm.file_path(ref.remote))
        try:
            table = replay(self.ctx.settings.heap_layout, rows())
        finally:
            fm.prune_cache(layout.cache_dir, ())
        if len(table) != m.num_keys:
            raise CorruptCheckpointError(f"version {m.version} at {source}: replaying its chain gives "
                                         f"{len(table)} keys, the manifest says {m.num_keys}")
        return RestoredHeap(table, chain)


def find_full_snapshot(fm: CheckpointFileManager, version: int, lineage: Sequence[Manifest]) -> SharedFileRef:
    """The heap backend's full snapshot of `version`, as a retained manifest lists it: one of `lineage` (the
    manifests a replay reads) or, under checkpoint format 1 (no attempt ids), a later version's (a full
    snapshot finished in the background is named by a commit after it)."""
    name = hf.local_name(hf.KIND_FULL, version)
    fulls: set[int] = set()
    for manifest in _manifests_naming_snapshots(fm, lineage):
        for ref in manifest.shared_files:
            if ref.local == name:
                return ref
            parsed = hf.parse_local_name(ref.local)
            if parsed is not None and parsed[0] == hf.KIND_FULL:
                fulls.add(parsed[1])
    listed = ", ".join(f"{s} (batch {s - 1})" for s in sorted(fulls)) or "none yet"
    raise ChangeFeedError(
        f"no full snapshot of version {version} (batch {version - 1}) is retained at {fm.root}; the heap "
        f"backend's retained full snapshots: {listed}. Choose one of those as snapshotStartBatchId "
        "(the heap backend writes one at a maintenance once spark.sql.streaming.stateStore.sparkstate.heap."
        "snapshotEveryVersions versions or more follow the last; see heap.snapshotMinDeltaPercent)")


def _manifests_naming_snapshots(fm: CheckpointFileManager, lineage: Sequence[Manifest]) -> Iterator[Manifest]:
    yield from lineage
    if lineage and lineage[0].checkpoint_id is not None:
        return  # format v2: only the recorded lineage counts
    for v in reversed(fm.versions()):
        if v <= lineage[0].version:
            break
        try:
            yield fm.read_manifest(v)
        except CheckpointError:
            continue


class FullSnapshotRestore:
    def __init__(self, ctx: BackendContext, ref: SharedFileRef, version: int) -> None:
        self.ctx, self.ref, self.version = ctx, ref, version

    def run(self) -> RestoredHeap:
        fm, layout = self.ctx.file_manager, self.ctx.layout
        try:
            path = fm.fetch_to_cache(self.ref, layout.cache_dir, self.version, self.ctx.settings.verify_local_cache)
            table = replay(self.ctx.settings.heap_layout,
                           hf.read_columns(path, hf.KIND_FULL, self.version, fm.file_path(self.ref.remote)))
        finally:
            fm.prune_cache(layout.cache_dir, ())
        return RestoredHeap(table, Chain(self.ref, self.version, ()))


def choose_restore(ctx: BackendContext, manifest: Manifest | None) -> EmptyHeapRestore | ChainRestore:
    return EmptyHeapRestore(ctx) if manifest is None else ChainRestore(ctx, manifest)
