"""`sparkstate rescale`: the command-line front of `sparkstate.rescale()`."""
from __future__ import annotations

import argparse
import os
import sys

from .common import add_json_argument
from .console import EXIT_OK, EXIT_PROBLEM, Output

HELP = "change the number of state partitions of a stopped query (key groups)"
DESCRIPTION = """\
Change the number of state partitions of a STOPPED sparkstate streaming query. A plain restart of the
unchanged query then runs with the new count and continues from its state. Runs as a Spark job (local[*]
unless --master); an interrupted run leaves the checkpoint as it was, and running it again finishes."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="the query's checkpointLocation")
    p.add_argument("--partitions", type=int, help="the new number of state partitions")
    p.add_argument("--file-sink", action="append", default=[], metavar="PATH",
                   help="output path of a file sink of the query (repeat for several): its own batch log gets "
                        "the rescale's batch, which Spark's file sink needs to restart")
    p.add_argument("--repair-file-sink", metavar="PATH",
                   help="instead of rescaling: add the rescale and migration batches missing from the file sink "
                        "log at PATH (a checkpoint rescaled or migrated without --file-sink whose query, or a "
                        "read of its output, fails with BATCH_METADATA_NOT_FOUND)")
    p.add_argument("--master", default=None, help="Spark master for the rescale job (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark conf, e.g. spark.sql.streaming.stateStore.sparkstate.stateLocation=...")
    add_json_argument(p)


def storage_conf_items(conf: list[str]) -> list[str]:
    """The --conf items that say how to reach storage (sparkstate settings, S3A keys), out of a Spark conf."""
    from ..config import PREFIX
    return [c for c in conf if c.startswith((PREFIX, "fs.s3a.", "spark.hadoop.fs.s3a."))]


def check_before_spark(checkpoint: str, conf: list[str]) -> None:
    """Refuse a checkpoint that is not there before paying for a Spark start."""
    from ..checkpoint.location import open_fileio
    from .common import parse_conf, require_checkpoint

    for item in conf:
        if "=" not in item:
            from ..errors import SparkstateError
            raise SparkstateError(f"--conf expects KEY=VALUE, got {item!r}")
    settings, s3a = parse_conf(storage_conf_items(conf))
    require_checkpoint(open_fileio(checkpoint, settings, s3a), checkpoint)


def run(args: argparse.Namespace, out: Output) -> int:
    from ..errors import AlreadyDoneError, SparkstateError

    if args.repair_file_sink:
        return repair_sink("rescale", args.checkpoint, args.repair_file_sink, args.conf, out)
    if args.partitions is None:
        out.error("rescale", "--partitions is required (or --repair-file-sink)")
        return EXIT_PROBLEM
    if args.partitions < 1:
        out.error("rescale", f"--partitions must be a positive integer, got {args.partitions}")
        return EXIT_PROBLEM
    try:
        check_before_spark(args.checkpoint, args.conf)
    except SparkstateError as e:
        out.error("rescale", f"refused: {e}")
        return EXIT_PROBLEM
    from ..rescaling.runner import rescale

    spark, extra = start_spark("sparkstate-rescale", args.master, args.conf)
    try:
        with out.progress("rescale", None) as bar:
            def progress(p) -> None:
                bar.update(p.partitions_done, p.partitions_total,
                           f"new partitions, {p.rows_moved} entries moved, {p.phase}")
            summary = rescale(spark, args.checkpoint, args.partitions, conf=extra, progress=progress,
                              file_sinks=args.file_sink)
    except AlreadyDoneError as e:
        return already_done("rescale", args.checkpoint, e, args.file_sink, args.conf, out)
    except SparkstateError as e:
        out.error("rescale", f"refused/failed: {e}")
        return EXIT_PROBLEM
    finally:
        spark.stop()
    out.line(summary.describe())
    out.document(summary)
    if not args.file_sink:
        out.note(f"If the query writes to a file sink, give its output path the rescale's batch before the "
                 f"restart: sparkstate rescale --checkpoint {args.checkpoint} --repair-file-sink <output path>")
    return EXIT_OK


def start_spark(app_name: str, master: str | None, conf: list[str], with_sparkstate: bool = False):
    """A SparkSession for an offline job (`with_sparkstate`: with our jar and worker interpreter), and the
    --conf pairs it was given."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    builder = builder.master(master or "local[*]")
    if with_sparkstate:
        from .. import configure
        builder = configure(builder)
    extra = {}
    for item in conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
        extra[key] = value
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, extra


def already_done(command: str, checkpoint: str, error: Exception, sinks: list[str], conf: list[str],
                 out: Output) -> int:
    """A rescale or migration whose checkpoint already is as asked: succeed, so that running the command again
    after it finished is harmless, and give each --file-sink the batches it may still miss (a first run
    without --file-sink)."""
    from ..errors import SparkstateError

    out.line(f"nothing to do: {error}")
    try:
        added = {sink: _repair(checkpoint, sink, conf, out) for sink in sinks}
    except SparkstateError as e:
        out.error(command, f"refused/failed: {e}")
        return EXIT_PROBLEM
    out.document({"nothing_to_do": str(error), "file_sinks": added})
    return EXIT_OK


def repair_sink(command: str, checkpoint: str, sink: str, conf: list[str], out: Output) -> int:
    """`--repair-file-sink` of `command` (rescale or migrate): the same repair for either."""
    from ..errors import SparkstateError

    try:
        added = _repair(checkpoint, sink, conf, out)
    except SparkstateError as e:
        out.error(command, f"refused/failed: {e}")
        return EXIT_PROBLEM
    out.document({"sink": sink, "added": added})
    return EXIT_OK


def _repair(checkpoint: str, sink: str, conf: list[str], out: Output) -> list[int]:
    """Add the rescale and migration batches missing from the file sink log at `sink`; says what it added."""
    from ..rescaling.file_sink import COMPACT_INTERVAL_KEY, compact_interval_setting, repair_file_sink
    from ..rescaling.plan import normalize_checkpoint

    given = dict(item.partition("=")[::2] for item in conf)
    interval = compact_interval_setting(given.get(COMPACT_INTERVAL_KEY))
    added = repair_file_sink(normalize_checkpoint(checkpoint), sink, interval)
    out.line(f"{sink}: added the empty entries of rescale and migration batches {added}" if added
             else f"{sink}: nothing to repair (its log has every rescale and migration batch)")
    return added
