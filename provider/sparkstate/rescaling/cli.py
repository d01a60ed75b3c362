"""`sparkstate rescale --checkpoint PATH --partitions N`: the command-line front of `rescale()`."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from .runner import Progress, _mb


class ProgressBar:
    """One text line, redrawn in place on a terminal (one line per change otherwise)."""

    def __init__(self, out: TextIO, width: int = 30) -> None:
        self.out, self.width = out, width
        self.tty = out.isatty()

    def __call__(self, p: Progress) -> None:
        filled = int(self.width * p.partitions_done / max(1, p.partitions_total))
        bar = "#" * filled + "." * (self.width - filled)
        line = (f"[{bar}] {p.partitions_done}/{p.partitions_total} new partitions written, "
                f"{_mb(p.bytes_moved)} moved ({p.rows_moved} entries)  {p.phase}")
        if self.tty:
            self.out.write("\r" + line.ljust(100))
            if p.phase == "done":
                self.out.write("\n")
        else:
            self.out.write(line + "\n")
        self.out.flush()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="sparkstate rescale",
        description="Change the number of state partitions of a STOPPED sparkstate streaming query. A plain "
                    "restart of the unchanged query then runs with the new count and continues from its state.")
    p.add_argument("--checkpoint", required=True, help="the query's checkpointLocation")
    p.add_argument("--partitions", type=int, help="the new number of state partitions")
    p.add_argument("--file-sink", action="append", default=[], metavar="PATH",
                   help="output path of a file sink of the query (repeat for several): its own batch log gets "
                        "the rescale's batch, which Spark's file sink needs to restart")
    p.add_argument("--repair-file-sink", metavar="PATH",
                   help="instead of rescaling: add the rescale batches missing from the file sink log at PATH "
                        "(a checkpoint rescaled without --file-sink whose query fails with "
                        "BATCH_METADATA_NOT_FOUND)")
    p.add_argument("--master", default=None, help="Spark master for the rescale job (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark conf, e.g. spark.sql.streaming.stateStore.sparkstate.stateLocation=...")
    args = p.parse_args(argv)
    if args.repair_file_sink:
        return _repair(args.checkpoint, args.repair_file_sink, args.conf)
    if args.partitions is None:
        p.error("--partitions is required (or --repair-file-sink)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from ..errors import SparkstateError
    from .runner import rescale

    builder = SparkSession.builder.appName("sparkstate-rescale").config("spark.ui.showConsoleProgress", "false")
    builder = builder.master(args.master or "local[*]")
    extra = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--conf expects KEY=VALUE, got {item!r}")
        builder = builder.config(key, value)
        extra[key] = value
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        summary = rescale(spark, args.checkpoint, args.partitions, conf=extra, progress=ProgressBar(sys.stdout),
                          file_sinks=args.file_sink)
    except SparkstateError as e:
        print(f"\nsparkstate rescale: refused/failed: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(summary.describe())
    if not args.file_sink:
        print(f"If the query writes to a file sink, give its output path the rescale's batch before the "
              f"restart: sparkstate rescale --checkpoint {args.checkpoint} --repair-file-sink <output path>")
    return 0


def _repair(checkpoint: str, sink: str, conf: list[str]) -> int:
    from ..errors import SparkstateError
    from .file_sink import COMPACT_INTERVAL_KEY, compact_interval_setting, repair_file_sink
    from .plan import normalize_checkpoint

    given = dict(item.partition("=")[::2] for item in conf)
    try:
        interval = compact_interval_setting(given.get(COMPACT_INTERVAL_KEY))
        added = repair_file_sink(normalize_checkpoint(checkpoint), sink, interval)
    except SparkstateError as e:
        print(f"sparkstate rescale: refused/failed: {e}", file=sys.stderr)
        return 1
    print(f"{sink}: added the empty entries of rescale batches {added}" if added
          else f"{sink}: nothing to repair (its log has every rescale batch)")
    return 0
