"""Restore operations of the heap backend, one class per situation; each returns the contents (a live
table) and the chain of files they were read from.

EmptyHeapRestore   nothing committed yet (version 0 without a manifest).
ChainRestore       the manifest's chain (chain.py) in order: the full snapshot, if any, then the deltas.
                   Files are fetched through the verified local cache (size + crc32), read, and dropped
                   from the cache again: the data now lives in memory. The files' Arrow columns are
                   merged in Arrow (last write per key wins) and go into the live table in one bulk
                   load (live_table.table_from_columns), with no per-key insert.
FullSnapshotRestore one full snapshot alone (snapshot replay starts from it, change_feed.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...checkpoint import CheckpointFileManager, Manifest, SharedFileRef
from ...errors import ChangeFeedError, CheckpointError, CorruptCheckpointError
from ..backend import BackendContext
from .. import arrow_files as hf
from .chain import EMPTY_CHAIN, Chain
from .live_table import LiveTable, new_live_table, table_from_columns
from .packed_table import concat_large_binary


@dataclass
class RestoredHeap:
    table: LiveTable
    chain: Chain


class EmptyHeapRestore:
    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    def run(self) -> RestoredHeap:
        return RestoredHeap(new_live_table(self.ctx.settings.heap_layout), EMPTY_CHAIN)


Batches = list[tuple[pa.Array, pa.Array]]


def merge_chain(full: Batches, deltas: Batches) -> Batches:
    """The rows of a full snapshot's batches (possibly none) with the deltas' rows applied in order (last
    write wins, a null value removes the key), as batches of distinct keys. Arrow's hash kernels do the
    work: they find each changed key's last write and drop the full snapshot's rows of changed keys; no
    Python object is made per row."""
    if not deltas:
        return full
    # 64-bit offsets throughout: a chain's keys or values may pass 2 GiB
    keys, values = concat_large_binary([k for k, _ in deltas]), concat_large_binary([v for _, v in deltas])
    # each key's last write: one hash pass numbers the distinct keys, numpy keeps each number's last row
    ids = pc.dictionary_encode(keys).indices.to_numpy()
    last = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, np.int64)
    np.maximum.at(last, ids, np.arange(len(ids), dtype=np.int64))
    changed, written = keys.take(pa.array(last)), values.take(pa.array(last))
    out: Batches = []
    if full:
        untouched = pc.invert(pc.is_in(concat_large_binary([k for k, _ in full]), value_set=changed))
        full_keys = pa.chunked_array([k for k, _ in full], pa.binary())
        full_values = pa.chunked_array([v for _, v in full], pa.binary())
        out.extend(zip(full_keys.filter(untouched).chunks, full_values.filter(untouched).chunks))
    present = pc.is_valid(written)
    out.append((changed.filter(present), written.filter(present)))
    return out


class ChainRestore:
    def __init__(self, ctx: BackendContext, manifest: Manifest) -> None:
        self.ctx = ctx
        self.manifest = manifest

    def run(self) -> RestoredHeap:
        m, fm, layout = self.manifest, self.ctx.file_manager, self.ctx.layout
        source = fm.manifest_path(m.version)
        chain = Chain.of(m, source)
        full: Batches = []
        deltas: Batches = []
        verify = self.ctx.settings.verify_local_cache
        steps = ([(hf.KIND_FULL, chain.full_version, chain.full)] if chain.full else []) + \
                [(hf.KIND_DELTA, v, ref) for v, ref in chain.deltas]
        try:
            for kind, v, ref in steps:
                path = fm.fetch_to_cache(ref, layout.cache_dir, m.version, verify)
                remote = fm.file_path(ref.remote)
                (full if kind == hf.KIND_FULL else deltas).extend(hf.read_columns(path, kind, v, remote))
            table = table_from_columns(self.ctx.settings.heap_layout, merge_chain(full, deltas))
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
        "(the heap backend writes one every spark.sql.streaming.stateStore.sparkstate.heap."
        "snapshotEveryVersions versions)")


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
            columns = hf.read_columns(path, hf.KIND_FULL, self.version, fm.file_path(self.ref.remote))
            table = table_from_columns(self.ctx.settings.heap_layout, columns)
        finally:
            fm.prune_cache(layout.cache_dir, ())
        return RestoredHeap(table, Chain(self.ref, self.version, ()))


def choose_restore(ctx: BackendContext, manifest: Manifest | None) -> EmptyHeapRestore | ChainRestore:
    return EmptyHeapRestore(ctx) if manifest is None else ChainRestore(ctx, manifest)
