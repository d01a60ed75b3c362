"""Keeping a file sink's own batch log consistent with a rescale's or a migration's batch.

A rescale records its work as a batch of its own in the query's offset and commit logs, as Spark 4.3's
offline repartition does, and so does a migration (`sparkstate migrate`); the restarted query goes on with
the batch after it. Every sink is fine with that except Spark's file sink, which keeps a log of its own,
`<output>/_spark_metadata/<batch>`, and every `spark.sql.streaming.fileSink.log.compactInterval` batches
compacts the entries since the last compaction, failing with BATCH_METADATA_NOT_FOUND when one is missing
(and so does reading the output). Such a batch wrote no files, so its entry is what the sink writes for an
empty micro-batch: the log's version line and no file, or, when the batch id is one of the log's
compaction batches, `<batch>.compact` listing every file of the batches it folds in.
The compaction interval is Spark's: derived from the compaction files already in the log, else the
`spark.sql.streaming.fileSink.log.compactInterval` the query runs with (default 10).

Spark does not record a query's sink in the checkpoint, so the output path is given by the user
(`sparkstate rescale --file-sink PATH`, `rescale(..., file_sinks=[...])`, the same for `migrate`);
`repair_file_sink` adds the missing entries of a checkpoint rescaled or migrated without it.

A roll-back (`sparkstate verify --rollback-to N --file-sink PATH`) makes the query run batch N again. The
file sink skips a batch its log already holds, and a skipped batch does not run its stateful operators, so
the sink's entries from batch N on are removed too (`file_sink_rollback_entries`); the files they listed
stay in the output directory, unread (readers of a file sink's output go by its log).

Each function that can refuse takes the tool it works for (`tool.py`) and raises that tool's error.
"""
from __future__ import annotations

import re

from ..checkpoint.spark_logs import SparkLogs
from ..storage import FileIO, fileio_for, join_path
from .tool import RewriteTool

METADATA_DIR = "_spark_metadata"
VERSION_LINE = b"v1"
COMPACT_INTERVAL_KEY = "spark.sql.streaming.fileSink.log.compactInterval"
DEFAULT_COMPACT_INTERVAL = 10
_ENTRY = re.compile(r"^(\d+)(\.compact)?$")


def compact_interval_setting(raw: str | None, tool: RewriteTool) -> int:
    """The `spark.sql.streaming.fileSink.log.compactInterval` value the query runs with (None: Spark's default)."""
    try:
        value = int(raw) if raw else DEFAULT_COMPACT_INTERVAL
    except ValueError:
        value = 0
    if value <= 0:
        raise tool.error(f"invalid {COMPACT_INTERVAL_KEY}={raw!r}: expected a positive integer")
    return value


def sink_log_batches(fio: FileIO, sink_path: str, tool: RewriteTool) -> tuple[list[int], list[int]]:
    """The batch ids in the sink's log, and those of its compaction files."""
    log_dir = join_path(sink_path, METADATA_DIR)
    if not fio.exists(log_dir):
        raise tool.error(f"{sink_path} is not the output of a file sink: it has no {METADATA_DIR} directory")
    batches, compactions = [], []
    for name in fio.list(log_dir):
        m = _ENTRY.match(name)
        if m:
            batches.append(int(m.group(1)))
            if m.group(2):
                compactions.append(int(m.group(1)))
    return sorted(batches), sorted(compactions)


def check_file_sink(fio: FileIO, sink_path: str, last_committed_batch: int, tool: RewriteTool) -> None:
    """Refuse an output path whose log does not end with the query's last committed batch (another
    query's output, or a typo): the rewrite would change the wrong log."""
    batches, _ = sink_log_batches(fio, sink_path, tool)
    if not batches or batches[-1] != last_committed_batch:
        last = batches[-1] if batches else "none"
        raise tool.error(f"the file sink log at {join_path(sink_path, METADATA_DIR)} ends with batch {last}, "
                           f"but the query's last committed batch is {last_committed_batch}: is {sink_path} "
                           "the output of this query?")


def compact_interval(fio: FileIO, sink_path: str, default_interval: int, tool: RewriteTool) -> int:
    """The log's compaction interval, decided the way Spark's CompactibleFileStreamLog decides it."""
    compacted = sorted(sink_log_batches(fio, sink_path, tool)[1], reverse=True)
    if len(compacted) >= 2:
        return compacted[0] - compacted[1]
    if len(compacted) == 1:
        n = compacted[0] + 1
        if n <= default_interval or default_interval >= n // 2:
            return n
        return next((i for i in range(default_interval, n // 2 + 1) if n % i == 0), n)
    return default_interval


def record_empty_batch(fio: FileIO, sink_path: str, batch: int, default_interval: int, tool: RewriteTool) -> None:
    """The sink's entry of a batch that wrote no files (put-if-absent; the same entry already there, from
    an interrupted run, is fine)."""
    interval = compact_interval(fio, sink_path, default_interval, tool)
    compact = (batch + 1) % interval == 0
    data = VERSION_LINE
    if compact:  # what the sink's compaction writes: every entry of the batches folded in, in order
        for folded in range(max(0, batch - interval), batch):
            data += b"".join(b"\n" + line for line in _entries(fio, sink_path, folded, interval, tool))
    path = _entry_path(sink_path, batch, compact)
    if fio.create_exclusive(path, data):
        return
    if fio.read_bytes(path).rstrip(b"\n") != data:
        raise tool.error(f"{path} already exists with other files: batch {batch} of this file sink is not "
                         "the rescale's or migration's")


def _entry_path(sink_path: str, batch: int, compact: bool) -> str:
    return join_path(sink_path, METADATA_DIR, f"{batch}.compact" if compact else str(batch))


def _entries(fio: FileIO, sink_path: str, batch: int, interval: int, tool: RewriteTool) -> list[bytes]:
    path = _entry_path(sink_path, batch, (batch + 1) % interval == 0)
    try:
        lines = fio.read_bytes(path).split(b"\n")
    except FileNotFoundError:
        raise tool.error(f"the file sink log lacks {path}; it cannot be compacted") from None
    if lines[0].strip() != VERSION_LINE:
        raise tool.error(f"{path} has format {lines[0][:10]!r}; sparkstate knows file sink log v1 only")
    return [line for line in lines[1:] if line.strip()]


def repair_file_sink(checkpoint: str, sink_path: str, default_interval: int, tool: RewriteTool) -> list[int]:
    """Add the empty entries of the committed rescale and migration batches the file sink's log lacks (a
    checkpoint rescaled or migrated without `--file-sink`); returns the batch ids added. Batches folded
    into a compaction are left alone. `tool`: the command that repairs (rescale or migrate), for errors."""
    fio = fileio_for(checkpoint)
    logs = SparkLogs(fio, checkpoint)
    sink_fio = fileio_for(sink_path)
    present, compactions = sink_log_batches(sink_fio, sink_path, tool)
    compacted = max(compactions, default=-1)
    committed = set(logs.commit_batches())
    offsets = logs.offset_batches()
    readable = set(offsets)  # Spark's retention may have removed the oldest entries
    added = []
    for batch in offsets:
        if (batch in committed and batch - 1 in readable and batch > compacted and batch not in present
                and (logs.is_repartition_batch(batch) or logs.is_migration_batch(batch))):
            record_empty_batch(sink_fio, sink_path, batch, default_interval, tool)
            added.append(batch)
    return added


def file_sink_rollback_entries(fio: FileIO, sink_path: str, target: int, last_committed_batch: int,
                               tool: RewriteTool) -> list[str]:
    """The sink log entries a roll-back to batch `target` removes (batches >= target, newest first).
    Refused when a compaction at or after `target` folded earlier batches' entries into itself."""
    check_file_sink(fio, sink_path, last_committed_batch, tool)
    batches, compactions = sink_log_batches(fio, sink_path, tool)
    folded = [c for c in compactions if c >= target]
    if folded:
        raise tool.error(
            f"the file sink log at {join_path(sink_path, METADATA_DIR)} compacted batches up to {folded[0]} into "
            f"{folded[0]}.compact; a roll-back to batch {target} would lose the entries it folded in. Roll back "
            f"no further than version {folded[-1] + 1}, or restore the output from a backup")
    return [_entry_path(sink_path, b, False) for b in sorted(batches, reverse=True) if b >= target]
