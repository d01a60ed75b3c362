"""What `sparkstate rescale` and `sparkstate migrate` share: their file sink, Spark and output arguments, the
check before Spark starts, the Spark session of the job, the run and its report, and the file sink repair
(`--repair-file-sink`, and after a run that had nothing to do)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .common import add_json_argument
from .console import EXIT_OK, EXIT_PROBLEM, Output

if TYPE_CHECKING:
    from ..errors import AlreadyDoneError
    from ..rewrite.tool import RewriteTool


class Summary(Protocol):
    def describe(self) -> str: ...


# (the arguments, the Spark session, the --conf pairs it was given, the progress bar) -> what the rewrite did
RewriteJob = Callable[[argparse.Namespace, Any, dict[str, str], Any], Summary]
# the arguments -> what is wrong with them for the rewrite (not for --repair-file-sink), or None
ArgumentCheck = Callable[[argparse.Namespace], str | None]
# (the arguments, the checkpoint's FileIO) -> the checkpoint already is as asked, read without Spark, or None
DoneCheck = Callable[[argparse.Namespace, Any], "AlreadyDoneError | None"]


def add_rewrite_arguments(p: argparse.ArgumentParser, command: str, conf_example: str) -> None:
    """The arguments `command` (rescale or migrate) takes after its own: file sinks, the Spark master and
    conf, --json."""
    tool = _tool(command)
    p.add_argument("--file-sink", action="append", default=[], metavar="PATH",
                   help=f"output path of a file sink of the query (repeatable): its own batch log gets the "
                        f"{tool.noun}'s batch, which Spark's file sink needs to restart")
    p.add_argument("--repair-file-sink", metavar="PATH",
                   help=f"instead of {tool.gerund}: add the rescale and migration batches missing from the file "
                        "sink log at PATH (a checkpoint rescaled or migrated without --file-sink whose query, or "
                        "a read of its output, fails with BATCH_METADATA_NOT_FOUND)")
    p.add_argument("--master", default=None, help=f"Spark master for the {tool.noun} job (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help=f"extra Spark conf, e.g. {conf_example}")
    add_json_argument(p)


def run_rewrite(command: str, args: argparse.Namespace, out: Output, wrong_arguments: ArgumentCheck,
                job: RewriteJob, with_sparkstate: bool = False, done_before_spark: DoneCheck | None = None) -> int:
    """`sparkstate <command>` (rescale or migrate): the file sink repair if asked for; else, after refusing wrong
    arguments and a checkpoint that is not there, `job` in a Spark session of its own (`with_sparkstate`: with
    our jar), and its summary, or that the checkpoint already was as asked, or why it was refused.
    `done_before_spark` finds a checkpoint already as asked without the Spark start."""
    from ..errors import AlreadyDoneError, SparkstateError

    if args.repair_file_sink:
        return repair_sink(command, args.checkpoint, args.repair_file_sink, args.conf, out)
    wrong = wrong_arguments(args)
    if wrong:
        out.error(command, wrong)
        return EXIT_PROBLEM
    try:
        fileio = check_before_spark(args.checkpoint, args.conf)
    except SparkstateError as e:
        out.error(command, f"refused: {e}")
        return EXIT_PROBLEM
    done = done_before_spark(args, fileio) if done_before_spark is not None else None
    if done is not None:
        return already_done(command, args.checkpoint, done, args.file_sink, args.conf, out)
    spark, extra = start_spark(f"sparkstate-{command}", args.master, args.conf, with_sparkstate)
    try:
        from ..rewrite.session import require_classic_session
        require_classic_session(spark, command)  # SPARK_REMOTE or --conf spark.remote=... give a Connect one
        with out.progress(command, None) as bar:
            summary = job(args, spark, extra, bar)
    except AlreadyDoneError as e:
        return already_done(command, args.checkpoint, e, args.file_sink, args.conf, out)
    except SparkstateError as e:
        out.error(command, f"refused/failed: {e}")
        return EXIT_PROBLEM
    finally:
        spark.stop()
    out.line(summary.describe())
    out.document(summary)
    if not args.file_sink:
        out.note(f"If the query writes to a file sink, give its output path the {_tool(command).noun}'s batch before "
                 f"the restart: sparkstate {command} --checkpoint {args.checkpoint} --repair-file-sink <output path>")
    return EXIT_OK


def storage_conf_items(conf: list[str]) -> list[str]:
    """The --conf items that say how to reach storage (sparkstate settings, S3A keys), out of a Spark conf."""
    from ..config import PREFIX
    return [c for c in conf if c.startswith((PREFIX, "fs.s3a.", "spark.hadoop.fs.s3a."))]


def check_before_spark(checkpoint: str, conf: list[str]) -> Any:
    """Refuse a checkpoint that is not there before paying for a Spark start; returns its FileIO."""
    from ..checkpoint.location import open_fileio
    from ..errors import SparkstateError
    from .common import parse_conf, require_checkpoint

    for item in conf:
        if "=" not in item:
            raise SparkstateError(f"--conf expects KEY=VALUE, got {item!r}")
    settings, s3a = parse_conf(storage_conf_items(conf))
    fileio = open_fileio(checkpoint, settings, s3a)
    require_checkpoint(fileio, checkpoint)
    return fileio


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
        added = {sink: _repair(command, checkpoint, sink, conf, out) for sink in sinks}
    except SparkstateError as e:
        out.error(command, f"refused/failed: {e}")
        return EXIT_PROBLEM
    out.document({"nothing_to_do": str(error), "file_sinks": added})
    return EXIT_OK


def repair_sink(command: str, checkpoint: str, sink: str, conf: list[str], out: Output) -> int:
    """`--repair-file-sink` of `command` (rescale or migrate): the same repair for either."""
    from ..errors import SparkstateError

    try:
        added = _repair(command, checkpoint, sink, conf, out)
    except SparkstateError as e:
        out.error(command, f"refused/failed: {e}")
        return EXIT_PROBLEM
    out.document({"sink": sink, "added": added})
    return EXIT_OK


def _repair(command: str, checkpoint: str, sink: str, conf: list[str], out: Output) -> list[int]:
    """Add the rescale and migration batches missing from the file sink log at `sink`; says what it added."""
    from ..rewrite.file_sink import COMPACT_INTERVAL_KEY, compact_interval_setting, repair_file_sink
    from ..rewrite.stopped_query import normalize_checkpoint

    tool = _tool(command)
    given = dict(item.partition("=")[::2] for item in conf)
    interval = compact_interval_setting(given.get(COMPACT_INTERVAL_KEY), tool)
    added = repair_file_sink(normalize_checkpoint(checkpoint), sink, interval, tool)
    out.line(f"{sink}: added the empty entries of rescale and migration batches {added}" if added
             else f"{sink}: nothing to repair (its log has every rescale and migration batch)")
    return added


def _tool(command: str) -> RewriteTool:
    """The rewrite a command does, whose words its messages use and whose error it raises."""
    from ..rewrite.tool import MIGRATION, RESCALE
    return {"rescale": RESCALE, "migrate": MIGRATION}[command]
