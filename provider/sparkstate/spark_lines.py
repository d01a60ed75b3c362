"""The Spark lines sparkstate serves.

The package ships one shim jar per line (Spark's state store API differs between them, see
jvm-shim/src/).
"""
from __future__ import annotations

from .errors import SparkstateError

SPARK_LINES = ("3.5", "4.0", "4.1", "4.2", "4.3")


class UnsupportedSparkLineError(SparkstateError):
    """A Spark version sparkstate has no shim for."""


def spark_line(version: str) -> str:
    """The supported Spark line of a Spark version ("3.5.9" -> "3.5")."""
    line = ".".join(version.strip().split(".")[:2])
    if line not in SPARK_LINES:
        raise UnsupportedSparkLineError(
            f"sparkstate supports Spark {', '.join(SPARK_LINES)}, not Spark {version}")
    return line
