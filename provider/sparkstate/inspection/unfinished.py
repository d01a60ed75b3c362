"""An unfinished `sparkstate rescale` or `sparkstate migrate`: the query's newest batch pins another
partition count or state store provider than the batch before it and has no commit log entry.

Both commands write that offset log entry first and the commit log entry last, so a run killed between
them leaves the query unable to run on (Spark refuses an unfinished repartition; a migrated batch re-run
on the new provider finds no version to load). Running the same command again finishes it. `verify`
refuses such a checkpoint with that command and `inspect` shows it in a note: judged by the commit log,
the stores of the new layout would look damaged.
"""
from __future__ import annotations

from ..checkpoint.spark_logs import OffsetEntry, SparkLogs
from ..config import PROVIDER_CLASS, PROVIDER_CLASS_KEY
from ..errors import CheckpointError
from ..migration.plan import provider_name


def unfinished_rewrite(entries: dict[int, OffsetEntry], offsets: list[int], commits: list[int],
                       checkpoint: str) -> str | None:
    """What is unfinished and the command that finishes it, or None. `entries`: the readable offset log
    entries by batch (the newest two are enough)."""
    if not offsets or (commits and commits[-1] >= offsets[-1]):
        return None
    batch = offsets[-1]
    cur, prev = entries.get(batch), entries.get(batch - 1)
    if cur is None or prev is None:
        return None
    sinks = ", with --file-sink <output path> for each file sink the query writes"
    head = f"the query at {checkpoint} has an unfinished "
    tail = (" and has no commit log entry, so the query cannot run on until it has. Finish it by running the "
            "same command again: ")
    new, old = cur.shuffle_partitions, prev.shuffle_partitions
    ours = cur.conf.get(PROVIDER_CLASS_KEY) in (None, PROVIDER_CLASS)  # else Spark's own repartition
    if ours and None not in (new, old) and new != old:
        return (f"{head}rescale to {new} partitions: its batch {batch} pins {new} partitions (batch {batch - 1}: "
                f"{old}){tail}`sparkstate rescale --checkpoint {checkpoint} --partitions {new}`{sinks}")
    target, source = cur.conf.get(PROVIDER_CLASS_KEY), prev.conf.get(PROVIDER_CLASS_KEY)
    if None not in (target, source) and target != source:
        backend = " --backend <the backend it was given>" if target == PROVIDER_CLASS else ""
        return (f"{head}migration to {target}: its batch {batch} pins that provider (batch {batch - 1}: {source})"
                f"{tail}`sparkstate migrate --checkpoint {checkpoint} --to {provider_name(target)}{backend}`{sinks}")
    return None


def newest_entries(logs: SparkLogs, offsets: list[int]) -> dict[int, OffsetEntry]:
    """The newest two offset log entries that can be read, by batch."""
    entries = {}
    for batch in offsets[-2:]:
        try:
            entries[batch] = logs.read_offset(batch)
        except (CheckpointError, OSError):
            continue
    return entries
