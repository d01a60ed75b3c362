"""Chain: the files that rebuild one version of a heap store, parsed once from its manifest.

A version v is at most one full snapshot `full-<s>.arrow` followed by the deltas `delta-<u>.arrow` with
s < u <= v, in version order (s = 0, the empty state, without a full snapshot; a version that changed
nothing has no delta of its own, so versions may be missing). The manifest lists exactly `Chain.refs`;
the backend keeps one Chain per version it holds and derives the next one by appending a delta or by
swapping the prefix for a newer full snapshot.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...checkpoint import Manifest, SharedFileRef
from ...errors import CorruptCheckpointError
from .. import arrow_files as hf


@dataclass(frozen=True)
class Chain:
    full: SharedFileRef | None = None
    full_version: int = 0
    deltas: tuple[tuple[int, SharedFileRef], ...] = ()  # (version, ref), ascending

    @property
    def refs(self) -> tuple[SharedFileRef, ...]:
        """The files in the manifest's order: the full snapshot, then the deltas."""
        return ((self.full,) if self.full else ()) + tuple(ref for _, ref in self.deltas)

    def remote_names(self) -> frozenset[str]:
        return frozenset(ref.remote for ref in self.refs)

    def with_delta(self, version: int, ref: SharedFileRef) -> "Chain":
        return Chain(self.full, self.full_version, self.deltas + ((version, ref),))

    def rebased(self, version: int, full_version: int, full: SharedFileRef,
                replaces: frozenset[str]) -> "Chain | None":
        """This chain (of `version`) with the files a full snapshot of `full_version` stands for
        (`replaces`: the remote names of that version's chain) swapped for it; None if the snapshot is not
        of a prefix of this chain. That happens when the store went back to an older version and
        committed again after the snapshot's version was pinned: the same version numbers then name
        other files, and a snapshot newer than this chain would leave its deltas out of order."""
        if full_version > version or not replaces <= self.remote_names():
            return None
        if self.full is not None and self.full.remote not in replaces:
            return None
        kept = tuple((v, r) for v, r in self.deltas if r.remote not in replaces)
        if any(v <= full_version for v, _ in kept):
            return None
        return Chain(full, full_version, kept)

    @classmethod
    def of(cls, manifest: Manifest, source: str) -> "Chain":
        """The chain a manifest lists, checked: heap files only, one full snapshot at most, deltas after it
        and up to the manifest's version, each version once."""
        full: tuple[int, SharedFileRef] | None = None
        deltas: list[tuple[int, SharedFileRef]] = []
        for ref in manifest.shared_files:
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
        if len(set(versions)) != len(versions) or any(not start < v <= manifest.version for v in versions):
            raise CorruptCheckpointError(
                f"manifest {source} of version {manifest.version}: deltas {versions} do not follow the "
                f"{'full snapshot of version %d' % start if full else 'empty state'} up to {manifest.version}")
        return cls(full[1] if full else None, start, tuple(deltas))


EMPTY_CHAIN = Chain()
