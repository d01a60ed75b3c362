"""sparkstate: a Spark Structured Streaming state store provider backed by Python.

Users need two things from this module: `jar_path()` (the shim jar for `spark.jars`) and
`configure(builder)`, which sets the jar, the provider class and the worker interpreter.

The package ships one shim jar per Spark line (SPARK_LINES): Spark's state store API differs between
lines, so each jar is compiled against its own line and refuses, at its first use, a JVM of another line.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from .config import PREFIX, PROVIDER_CLASS, PROVIDER_CLASS_KEY, Settings
from .spark_lines import SPARK_LINES, spark_line

__version__ = "0.1.0"
__all__ = ["jar_path", "configure", "rescale", "migrate", "PROVIDER_CLASS", "SPARK_LINES", "__version__"]


_JARS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars")  # the build writes the jars here


def installed_spark_version() -> str:
    """The version of the pyspark this interpreter imports."""
    import pyspark
    return pyspark.__version__


def jar_path(spark_version: str | None = None) -> str:
    """Absolute path of the JVM shim jar for a Spark version (default: the installed pyspark's)."""
    line = spark_line(spark_version or installed_spark_version())
    path = os.path.join(_JARS_DIR, f"sparkstate-spark-{line}.jar")
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"the sparkstate shim jar for Spark {line} is missing at {path}; reinstall with `pip install .` "
            "(the jars are built with javac during the install; SPARKSTATE_SPARK_LINES, if set, must "
            f"include {line})")
    return path


def build_id() -> str | None:
    """The id of the build this package came from (the shim jar beside it carries the same), or None for
    a source tree whose jar was never built."""
    path = os.path.join(_JARS_DIR, "build-id")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except FileNotFoundError:
        return None


def configure(builder: Any, **settings: Any) -> Any:
    """Point a `SparkSession.Builder` at sparkstate and return it.

    Sets `spark.jars` (appending to any jars already configured), the provider class, and the worker
    interpreter to this one. Keyword arguments are sparkstate settings by short key, e.g.
    `configure(builder, backend="rocksdb", transport="py4j")`; they are validated here, on the driver.
    """
    conf: dict[str, str] = {PREFIX + "pythonExec": sys.executable}
    for key, value in settings.items():
        conf[PREFIX + key] = str(value).lower() if isinstance(value, bool) else str(value)
    Settings.parse(conf)  # fail fast on the driver with the same message an executor would give
    existing = builder._options.get("spark.jars") if hasattr(builder, "_options") else None
    jars = jar_path() if not existing else f"{existing},{jar_path()}"
    builder = builder.config("spark.jars", jars).config(PROVIDER_CLASS_KEY, PROVIDER_CLASS)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder


def rescale(spark: Any, checkpoint: str, num_partitions: int, **options: Any) -> Any:
    """Change the number of state partitions of a stopped sparkstate query (key-group rescaling).

    Runs one Spark job on `spark` (a classic session: a Spark Connect one is refused) and returns a
    `sparkstate.rescaling.RescaleSummary`; a plain restart of the unchanged query then runs with
    `num_partitions` partitions. See `sparkstate.rescaling`.
    """
    from .rescaling import rescale as _rescale
    from .rewrite.session import require_classic_session
    require_classic_session(spark, "sparkstate.rescale")
    return _rescale(spark, checkpoint, num_partitions, **options)


def migrate(spark: Any, checkpoint: str, to: str = "sparkstate", **options: Any) -> Any:
    """Move the state of a stopped query to another state store provider: `to` is "sparkstate" (with
    `backend="rocksdb"` or `"heap"`), "hdfs" or "rocksdb" (Spark's providers).

    Runs one Spark job on `spark` (a classic session with the sparkstate jar: `sparkstate.configure`) and
    returns a `sparkstate.migration.MigrationSummary`; a plain restart of the unchanged query, with the new
    provider in its conf, continues from the migrated state. With `partitions=N` the state is also rescaled
    to N partitions (a second job) and a `MigrateAndRescaleSummary` is returned. See `sparkstate.migration`.
    """
    from .migration import migrate as _migrate
    from .migration import migrate_and_rescale
    from .rewrite.session import require_classic_session
    require_classic_session(spark, "sparkstate.migrate")
    partitions = options.pop("partitions", None)
    if partitions is not None:
        return migrate_and_rescale(spark, checkpoint, to, partitions, **options)
    return _migrate(spark, checkpoint, to, **options)
