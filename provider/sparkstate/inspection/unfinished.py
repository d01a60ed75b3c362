"""An unfinished `sparkstate rescale` or `sparkstate migrate`: the query's newest batch pins another
partition count or state store provider than the batch before it and has no commit log entry.

Both commands write that offset log entry first and the commit log entry last, so a run killed between
them leaves the query unable to run on (Spark refuses an unfinished repartition; a migrated batch re-run
on the new provider finds no version to load). Running the same command again finishes it. `verify`
refuses such a checkpoint with that command and `inspect` shows it in a note: judged by the commit log,
the stores of the new layout would look damaged.
"""
from __future__ import annotations

from ..checkpoint.spark_logs import SparkLogs
from ..config import PROVIDER_CLASS, PROVIDER_CLASS_KEY
from ..errors import CheckpointError
from ..migration.plan import provider_name


def unfinished_rewrite(logs: SparkLogs, offsets: list[int], commits: list[int], checkpoint: str) -> str | None:
    """What is unfinished and the command that finishes it, or None (also when an entry cannot be read)."""
    if not offsets or (commits and commits[-1] >= offsets[-1]):
        return None
    batch = offsets[-1]
    try:
        cur, prev = logs.read_offset(batch), logs.read_offset(batch - 1)
        rescale, migration = logs.is_repartition_batch(batch), logs.is_migration_batch(batch)
    except (CheckpointError, OSError):
        return None
    sinks = ", with --file-sink <output path> for each file sink the query writes"
    head = f"the query at {checkpoint} has an unfinished "
    tail = (" and has no commit log entry, so the query cannot run on until it has. Finish it by running the "
            "same command again: ")
    target, source = cur.conf.get(PROVIDER_CLASS_KEY), prev.conf.get(PROVIDER_CLASS_KEY)
    if rescale and target in (None, PROVIDER_CLASS):  # on Spark's provider: Spark's own repartition
        new, old = cur.shuffle_partitions, prev.shuffle_partitions
        return (f"{head}rescale to {new} partitions: its batch {batch} pins {new} partitions (batch {batch - 1}: "
                f"{old}){tail}`sparkstate rescale --checkpoint {checkpoint} --partitions {new}`{sinks}")
    if migration:
        backend = " --backend <the backend it was given>" if target == PROVIDER_CLASS else ""
        return (f"{head}migration to {target}: its batch {batch} pins that provider (batch {batch - 1}: {source})"
                f"{tail}`sparkstate migrate --checkpoint {checkpoint} --to {provider_name(target)}{backend}`{sinks}")
    return None
