"""`sparkstate conf-docs`: the settings table, the settings page, or a spark-defaults file for this install."""
from __future__ import annotations

import argparse
import sys

from .console import EXIT_OK, Output
from .shipped_env import ExecutorShape, archive_block, parse_mib

HELP = ("print the settings table, the settings page (--page), a spark-defaults file (--spark-defaults) or the "
        "settings for a Python environment shipped as an archive (--archive)")
DESCRIPTION = ("Print every sparkstate setting with its default, valid values and meaning. With --page: the "
               "whole of docs/configuration.md, which is generated this way. With --spark-defaults: a "
               "properties file for spark-submit --properties-file with this install's jar and interpreter "
               "filled in. With --archive env.tar.gz: one spark-defaults block for a cluster whose executors get "
               "their Python environment (packed with venv-pack or conda-pack) through spark.archives, with "
               "spark.executor.memoryOverhead sized for the store workers.")

PAGE_COMMAND = "sparkstate conf-docs --page > docs/configuration.md"


def page() -> str:
    """docs/configuration.md: a short header, then the settings table of `config.DECLARATIONS`."""
    from ..config import PREFIX, settings_table_markdown
    return f"""# Settings

Generated from `provider/sparkstate/config.py` by `{PAGE_COMMAND}`: edit config.py, not this page.

Every key is under `{PREFIX}` and is read on the executors through Spark's state
store conf. An unknown key or an invalid value fails the query with an error that names the key and the
valid values (for a misspelled key, the closest known one). `sparkstate.configure(builder, **settings)` takes the
keys without the prefix and checks them on the driver. `conf/spark-defaults.conf` lists every key at
its default; `conf/presets/` holds two tuned sets (large state, low latency).

{settings_table_markdown()}

Spark's own settings that sparkstate honours: `spark.sql.streaming.minBatchesToRetain` (versions kept by
cleanup), `spark.sql.streaming.stateStore.maintenanceInterval`,
`spark.sql.streaming.stateStore.commitValidation.enabled`,
`spark.sql.streaming.stateStore.checkpointFormatVersion` (1 or 2).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--page", action="store_true",
                      help=f"print docs/configuration.md (`{PAGE_COMMAND}`) instead of the table")
    what.add_argument("--spark-defaults", action="store_true",
                      help="print conf/spark-defaults.conf for this install instead of the table")
    what.add_argument("--archive", metavar="FILE[#DIR]",
                      help="print the spark-defaults block for a Python environment shipped as this archive "
                           "(unpacked as ./DIR, default ./environment, on every executor)")
    shape = ExecutorShape()
    p.add_argument("--executor-cores", type=int, default=shape.cores, metavar="N",
                   help=f"with --archive: spark.executor.cores (default {shape.cores})")
    p.add_argument("--executor-memory", default=f"{shape.memory_mib}m", metavar="SIZE",
                   help=f"with --archive: spark.executor.memory, e.g. 4g (default {shape.memory_mib}m)")
    p.add_argument("--backend", choices=("rocksdb", "heap"), default=shape.backend,
                   help="with --archive: the backend the overhead is sized for (default rocksdb)")
    p.add_argument("--state-in-memory", default="0m", metavar="SIZE",
                   help="with --archive: state each executor's workers hold in memory beyond the block "
                        "cache, added to the overhead (heap backend: about 300 bytes per entry of a 16-character "
                        "string key, a count and a sum, at peak; rocksdb: a batch's writes per store)")
    p.add_argument("--spark-version", metavar="VERSION",
                   help="with --spark-defaults or --archive: the Spark the jobs run on, e.g. 3.5.9 (default: "
                        "the installed pyspark's), whose line's jar the file names")


def run(args: argparse.Namespace, out: Output) -> int:
    from ..config import settings_table_markdown, spark_defaults_file
    if args.archive:
        from .. import jar_path
        shape = ExecutorShape(cores=args.executor_cores, memory_mib=parse_mib(args.executor_memory),
                              backend=args.backend, state_mib=parse_mib(args.state_in_memory))
        sys.stdout.write(archive_block(args.archive, jar_path(args.spark_version), sys.executable, shape))
    elif args.spark_defaults:
        from .. import jar_path
        sys.stdout.write(spark_defaults_file(jar_path(args.spark_version), sys.executable))
    elif args.page:
        sys.stdout.write(page())
    else:
        sys.stdout.write(settings_table_markdown() + "\n")
    sys.stdout.flush()
    return EXIT_OK
