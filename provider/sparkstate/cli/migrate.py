"""`sparkstate migrate`: move a stopped query's state between state store providers."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .console import Output
from .rewrite_command import add_rewrite_arguments, run_rewrite

if TYPE_CHECKING:
    from ..errors import AlreadyMigratedError

HELP = "move a stopped query's state between Spark's providers (hdfs, rocksdb) and sparkstate"
DESCRIPTION = """\
Move the state of a STOPPED query to another state store provider: from Spark's HDFS or RocksDB provider
to sparkstate (--to sparkstate [--backend rocksdb|heap]), or back (--to hdfs, --to rocksdb). Runs as a
Spark job (local[*] unless --master) that reads every store through the source provider and writes it
through the target provider as one new batch, verifies key counts and checksums, then records the new
provider in the checkpoint. Restart the unchanged query with the new provider set (and, for sparkstate,
its jar). With --partitions N the state is also rescaled to N partitions, as `sparkstate rescale` does
(sparkstate must be on one side). The source provider's files stay; an interrupted run changes nothing
Spark reads, and running it again finishes."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="the query's checkpointLocation")
    p.add_argument("--to", choices=("sparkstate", "hdfs", "rocksdb"), help="the target provider (required "
                                                                          "unless --repair-file-sink)")
    p.add_argument("--backend", choices=("rocksdb", "heap"), help="with --to sparkstate: its backend (default "
                                                                   "rocksdb)")
    p.add_argument("--partitions", type=int, metavar="N",
                   help="also rescale the state to N partitions (sparkstate on one side; a second job)")
    add_rewrite_arguments(p, "migrate", "the query's spark.sql.streaming.stateStore.* settings")


def run(args: argparse.Namespace, out: Output) -> int:
    return run_rewrite("migrate", args, out, _wrong_arguments, _migrate, with_sparkstate=True,
                       done_before_spark=_migrated_already)


def _migrated_already(args: argparse.Namespace, fileio: Any) -> AlreadyMigratedError | None:
    from ..migration.plan import migrated_already
    return migrated_already(args.checkpoint, args.to, args.backend, args.partitions, fileio)


def _wrong_arguments(args: argparse.Namespace) -> str | None:
    if args.to is None:
        return "--to is required (or --repair-file-sink)"
    if args.backend and args.to != "sparkstate":
        return f"--backend applies to --to sparkstate only (got --to {args.to})"
    if args.partitions is not None and args.partitions < 1:
        return f"--partitions must be a positive integer, got {args.partitions}"
    return None


def _migrate(args: argparse.Namespace, spark: Any, _extra: dict[str, str], bar: Any) -> Any:
    from ..migration import migrate, migrate_and_rescale

    steps = {"name": "migrate"}
    options = dict(backend=args.backend, file_sinks=args.file_sink,
                   progress=lambda done, total: bar.update(done, total, f"partitions ({steps['name']})"))
    if args.partitions is None:
        return migrate(spark, args.checkpoint, args.to, **options)
    return migrate_and_rescale(spark, args.checkpoint, args.to, args.partitions,
                               step=lambda name: steps.update(name=name), **options)
