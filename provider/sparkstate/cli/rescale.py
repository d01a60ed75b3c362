"""`sparkstate rescale`: the command-line front of `sparkstate.rescale()`."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .console import Output
from .rewrite_command import add_rewrite_arguments, run_rewrite

if TYPE_CHECKING:
    from ..errors import AlreadyRescaledError

HELP = "change the number of state partitions of a stopped query (key groups)"
DESCRIPTION = """\
Change the number of state partitions of a STOPPED sparkstate streaming query. A plain restart of the
unchanged query then runs with the new count and continues from its state. Runs as a Spark job (local[*]
unless --master); an interrupted run leaves the checkpoint as it was, and running it again finishes."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="the query's checkpointLocation")
    p.add_argument("--partitions", type=int, help="the new number of state partitions")
    add_rewrite_arguments(p, "rescale", "spark.sql.streaming.stateStore.sparkstate.stateLocation=...")


def run(args: argparse.Namespace, out: Output) -> int:
    return run_rewrite("rescale", args, out, _wrong_arguments, _rescale, done_before_spark=_rescaled_already)


def _rescaled_already(args: argparse.Namespace, fileio: Any) -> AlreadyRescaledError | None:
    from ..rescaling.plan import rescaled_already
    return rescaled_already(args.checkpoint, args.partitions, fileio)


def _wrong_arguments(args: argparse.Namespace) -> str | None:
    if args.partitions is None:
        return "--partitions is required (or --repair-file-sink)"
    if args.partitions < 1:
        return f"--partitions must be a positive integer, got {args.partitions}"
    return None


def _rescale(args: argparse.Namespace, spark: Any, extra: dict[str, str], bar: Any) -> Any:
    from ..rescaling.runner import rescale

    def progress(p) -> None:
        bar.update(p.partitions_done, p.partitions_total, f"new partitions, {p.rows_moved} entries moved, {p.phase}")
    return rescale(spark, args.checkpoint, args.partitions, conf=extra, progress=progress, file_sinks=args.file_sink)
