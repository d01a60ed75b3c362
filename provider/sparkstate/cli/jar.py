"""`sparkstate jar`: the path of the shim jar, for `--jars` or `spark.jars`."""
from __future__ import annotations

import argparse

from .console import EXIT_OK, Output

HELP = "print the path of the shim jar (for --jars / spark.jars)"
DESCRIPTION = "Print the path of this install's shim jar, e.g. spark-submit --jars $(sparkstate jar) ..."


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, out: Output) -> int:
    from .. import jar_path
    print(jar_path())
    return EXIT_OK
