"""The Spark lines sparkstate serves, and refusing a feature on a line that lacks it.

The package ships one shim jar per line (Spark's state store API differs between them, see
jvm-shim/src/). A feature a line lacks is refused by name, with the first line that has it.
"""
from __future__ import annotations

from .errors import SparkstateError

SPARK_LINES = ("3.5", "4.0", "4.1", "4.2", "4.3")


class UnsupportedSparkLineError(SparkstateError):
    """A Spark version sparkstate has no shim for, or a feature the running line lacks."""


def spark_line(version: str) -> str:
    """The supported Spark line of a Spark version ("3.5.9" -> "3.5")."""
    line = ".".join(version.strip().split(".")[:2])
    if line not in SPARK_LINES:
        raise UnsupportedSparkLineError(
            f"sparkstate supports Spark {', '.join(SPARK_LINES)}, not Spark {version}")
    return line


def require(version: str, first_line: str, feature: str) -> None:
    """Refuses `feature` on a Spark older than `first_line`, naming both."""
    if _key(spark_line(version)) < _key(first_line):
        raise UnsupportedSparkLineError(f"{feature} needs Spark {first_line} or later; this Spark is {version}")


def _key(line: str) -> tuple[int, int]:
    major, minor = line.split(".")
    return int(major), int(minor)
