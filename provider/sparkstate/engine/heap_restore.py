"""Restore operations of the heap backend, one class per situation; each returns the contents as a dict.

EmptyHeapRestore   nothing committed yet (version 0 without a manifest).
ChainRestore       the manifest's chain: at most one `full-<s>.arrow`, then the `delta-<u>.arrow` files with
                   s < u <= v in order (s = 0 without a full snapshot; a version without changes has none). Files are fetched through the verified local cache
                   (size + crc32), read, and dropped from the cache again: the data now lives in memory.
"""
from __future__ import annotations

from ..checkpoint import Manifest, SharedFileRef
from ..errors import CorruptCheckpointError
from . import heap_files as hf
from .backend import BackendContext


class EmptyHeapRestore:
    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    def run(self) -> dict[bytes, bytes]:
        return {}


def parse_chain(m: Manifest, source: str) -> tuple[SharedFileRef | None, list[tuple[int, SharedFileRef]]]:
    """(full snapshot ref or None, [(version, delta ref)] ascending), checked to be contiguous up to v."""
    full: tuple[int, SharedFileRef] | None = None
    deltas: list[tuple[int, SharedFileRef]] = []
    for ref in m.shared_files:
        parsed = hf.parse_local_name(ref.local)
        if parsed is None:
            raise CorruptCheckpointError(f"manifest {source}: {ref.local!r} is not a heap checkpoint file")
        kind, v = parsed
        if kind == hf.KIND_FULL:
            if full is not None:
                raise CorruptCheckpointError(f"manifest {source} lists two full snapshots")
            full = (v, ref)
        else:
            deltas.append((v, ref))
    deltas.sort(key=lambda d: d[0])
    start = full[0] if full else 0
    versions = [v for v, _ in deltas]
    # Versions without changes have no delta file, so gaps are fine; order and range are checked.
    if len(set(versions)) != len(versions) or any(not start < v <= m.version for v in versions):
        raise CorruptCheckpointError(
            f"manifest {source} of version {m.version}: deltas {versions} do not follow the "
            f"{'full snapshot of version %d' % start if full else 'empty state'} up to {m.version}")
    return (full[1] if full else None), deltas


class ChainRestore:
    def __init__(self, ctx: BackendContext, manifest: Manifest) -> None:
        self.ctx = ctx
        self.manifest = manifest

    def run(self) -> dict[bytes, bytes]:
        m, fm, layout = self.manifest, self.ctx.file_manager, self.ctx.layout
        source = fm.manifest_path(m.version)
        full, deltas = parse_chain(m, source)
        data: dict[bytes, bytes] = {}
        verify = self.ctx.settings.verify_local_cache
        try:
            steps = ([(hf.KIND_FULL, int(hf.parse_local_name(full.local)[1]), full)] if full else []) + \
                    [(hf.KIND_DELTA, v, ref) for v, ref in deltas]  # type: ignore[index]
            for kind, v, ref in steps:
                path = fm.fetch_to_cache(ref, layout.cache_dir, m.version, verify)
                hf.apply_file(data, path, kind, v, fm.file_path(ref.remote))
        finally:
            fm.prune_cache(layout.cache_dir, ())
        if len(data) != m.num_keys:
            raise CorruptCheckpointError(f"version {m.version} at {source}: replaying its chain gives "
                                         f"{len(data)} keys, the manifest says {m.num_keys}")
        return data


def choose_restore(ctx: BackendContext, manifest: Manifest | None) -> EmptyHeapRestore | ChainRestore:
    return EmptyHeapRestore(ctx) if manifest is None else ChainRestore(ctx, manifest)
