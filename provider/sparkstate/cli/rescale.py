"""`sparkstate rescale`: the command-line front of `sparkstate.rescale()`."""
from __future__ import annotations

import argparse
from typing import Any

from .common import add_json_argument
from .console import EXIT_PROBLEM, Output
from .rewrite_command import repair_sink, run_rewrite

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


def run(args: argparse.Namespace, out: Output) -> int:
    if args.repair_file_sink:
        return repair_sink("rescale", args.checkpoint, args.repair_file_sink, args.conf, out)
    if args.partitions is None:
        out.error("rescale", "--partitions is required (or --repair-file-sink)")
        return EXIT_PROBLEM
    if args.partitions < 1:
        out.error("rescale", f"--partitions must be a positive integer, got {args.partitions}")
        return EXIT_PROBLEM

    def job(spark: Any, extra: dict[str, str], bar: Any) -> Any:
        from ..rescaling.runner import rescale

        def progress(p) -> None:
            bar.update(p.partitions_done, p.partitions_total,
                       f"new partitions, {p.rows_moved} entries moved, {p.phase}")
        return rescale(spark, args.checkpoint, args.partitions, conf=extra, progress=progress,
                       file_sinks=args.file_sink)

    return run_rewrite("rescale", args, out, job)
