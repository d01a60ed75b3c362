"""A migration and a rescale in one run: `sparkstate migrate --partitions N`.

The two steps are the two commands, each adding its own batch, in the order that keeps sparkstate on the
side that rescales (only sparkstate's key groups can be rescaled): into sparkstate, migrate then rescale;
out of it, rescale then migrate. Each step is skipped when the last committed batch already has what it
would give (the provider, the partition count), so a run interrupted anywhere is finished by running the
same command again: the step in flight resumes as the plain command would, the finished one is skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..config import PROVIDER_CLASS
from ..errors import MigrationError
from ..rescaling import RescaleSummary, rescale
from ..rewrite.stopped_query import normalize_checkpoint
from ..storage import fileio_for
from .plan import (PROVIDERS, already_migrated, committed_logs, pinned_provider, provider_name,
                   refuse_backend_switch)
from .runner import MigrationSummary, ProgressFn, migrate, session_stores

StepFn = Callable[[str], None]


@dataclass
class MigrateAndRescaleSummary:
    migration: MigrationSummary | None   # None: the query already ran on the target provider
    rescale: RescaleSummary | None       # None: the state already had the partition count

    def describe(self) -> str:
        return "\n".join(s.describe() for s in (self.migration, self.rescale) if s is not None)


def migrate_and_rescale(spark: Any, checkpoint: str, to: str, partitions: int, *, backend: str | None = None,
                        file_sinks: Sequence[str] = (), progress: ProgressFn | None = None,
                        step: StepFn | None = None) -> MigrateAndRescaleSummary:
    """Move the stopped query at `checkpoint` to provider `to` with `partitions` state partitions; `step` is
    told the name of each step as it starts ("migrate", "rescale")."""
    if to not in PROVIDERS:
        raise MigrationError(f"--to must be one of {', '.join(PROVIDERS)}, got {to!r}")
    if not isinstance(partitions, int) or partitions < 1:
        raise MigrationError(f"--partitions must be a positive integer, got {partitions!r}")
    checkpoint = normalize_checkpoint(checkpoint)
    provider, count, last = _committed(checkpoint)
    target = PROVIDERS[to]
    if provider == target == PROVIDER_CLASS:
        refuse_backend_switch(fileio_for(checkpoint), checkpoint, last, backend,
                              session_stores(spark, checkpoint))
    if provider == target and count == partitions:
        raise already_migrated(checkpoint, target, partitions)
    if PROVIDER_CLASS not in (provider, target):
        raise MigrationError(f"--partitions needs sparkstate on one side (only its state carries key groups); "
                             f"{provider_name(provider)} -> {to} can be migrated without it, then rescaled by "
                             "Spark's own repartition")

    def do_migrate() -> MigrationSummary | None:
        if _committed(checkpoint)[0] == target:  # an interrupted migration is not committed: it resumes
            return None
        if step:
            step("migrate")
        return migrate(spark, checkpoint, to, backend=backend, file_sinks=file_sinks, progress=progress)

    def do_rescale() -> RescaleSummary | None:
        if _committed(checkpoint)[1] == partitions:
            return None
        if step:
            step("rescale")
        return rescale(spark, checkpoint, partitions, file_sinks=file_sinks,
                       progress=(lambda p: progress(p.partitions_done, p.partitions_total)) if progress else None)

    if target == PROVIDER_CLASS:
        migrated = do_migrate()
        return MigrateAndRescaleSummary(migrated, do_rescale())
    rescaled = do_rescale()
    return MigrateAndRescaleSummary(do_migrate(), rescaled)


def _committed(checkpoint: str) -> tuple[str, int | None, int]:
    """(provider class, partition count, batch id) of the last committed batch."""
    logs, _, commits = committed_logs(fileio_for(checkpoint), checkpoint)
    entry = logs.read_offset(commits[-1])
    return pinned_provider(entry), entry.shuffle_partitions, commits[-1]

