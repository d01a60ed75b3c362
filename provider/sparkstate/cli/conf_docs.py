"""`sparkstate conf-docs`: the settings table, or a spark-defaults file for this install."""
from __future__ import annotations

import argparse
import sys

from .console import EXIT_OK, Output

HELP = "print the settings table, or (--spark-defaults) a spark-defaults file for this install"
DESCRIPTION = ("Print every sparkstate setting with its default, valid values and meaning (the README's "
               "table is generated from it). With --spark-defaults: a properties file for spark-submit "
               "--properties-file with this install's jar and interpreter filled in.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spark-defaults", action="store_true",
                   help="print conf/spark-defaults.conf for this install instead of the table")


def run(args: argparse.Namespace, out: Output) -> int:
    from ..config import settings_table_markdown, spark_defaults_file
    if args.spark_defaults:
        from .. import jar_path
        sys.stdout.write(spark_defaults_file(jar_path(), sys.executable))
    else:
        sys.stdout.write(settings_table_markdown() + "\n")
    sys.stdout.flush()
    return EXIT_OK
