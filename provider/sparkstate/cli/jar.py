"""`sparkstate jar`: the path of the shim jar, for `--jars` or `spark.jars`."""
from __future__ import annotations

import argparse

from .console import EXIT_OK, Output

HELP = "print the path of the shim jar (for --jars / spark.jars)"
DESCRIPTION = ("Print the path of this install's shim jar for a Spark version (default: the installed "
               "pyspark's), e.g. spark-submit --jars $(sparkstate jar) ...")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spark-version", metavar="VERSION",
                   help="the Spark version the jar will run in, e.g. 3.5.9 (default: the installed pyspark's)")


def run(args: argparse.Namespace, out: Output) -> int:
    from .. import jar_path
    print(jar_path(args.spark_version))
    return EXIT_OK
