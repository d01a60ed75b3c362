"""The settings of the Spark session that runs a rewrite: how it reaches the query's state.

A rewrite opens the query's stores from the driver and its job's tasks, so it takes the sparkstate
settings (`stateLocation`, S3 options) and the Hadoop `fs.s3a.*` keys the query runs with from the session,
as the shim forwards them to the store workers.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..config import PREFIX
from ..errors import ClassicSessionRequired


def require_classic_session(spark: Any, command: str) -> None:
    """Refuse a Spark Connect session (`pyspark.sql.connect.session.SparkSession`) at once, before anything is
    read: `command` runs a Spark job whose tasks reach the stores through the executors' JVMs."""
    connect = next((c for c in type(spark).__mro__ if c.__module__.startswith("pyspark.sql.connect")), None)
    if connect is None:
        return
    raise ClassicSessionRequired(
        f"{command} needs a classic SparkSession (pyspark.sql.SparkSession) and was given a Spark Connect "
        f"session ({connect.__module__}.{connect.__qualname__}): it runs a Spark job of its own that opens the "
        f"stores on the executors, which a Connect client cannot do. Run it with a classic session against "
        f"the same cluster: `sparkstate {command.removeprefix('sparkstate.')} --master <the cluster's master> "
        f"...`, or a script started with spark-submit or `pyspark --master ...` (without SPARK_REMOTE / "
        f"--remote) that calls {command}.")


def session_sparkstate_conf(spark: Any) -> dict[str, str]:
    """The sparkstate settings of `spark`'s session (full keys), without the backend (the checkpoint's manifests
    say it) and the worker interpreter (this host's)."""
    out = {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(PREFIX)}
    out.update({k: v for k, v in session_conf(spark).items() if k.startswith(PREFIX)})
    out.pop(PREFIX + "backend", None)  # the backend comes from the checkpoint's manifests
    out.pop(PREFIX + "pythonExec", None)
    return out


def session_s3a(spark: Any) -> dict[str, str]:
    """The `fs.s3a.*` entries of the Hadoop conf `spark`'s queries run with (its `spark.hadoop.fs.s3a.*` keys,
    core-site.xml, and session confs): what the shim forwards to the workers to reach state on S3."""
    jconf = spark.sparkContext._jsc.hadoopConfiguration()
    out = {"fs.s3a." + str(k): str(v) for k, v in dict(jconf.getPropsWithPrefix("fs.s3a.")).items()}
    out.update(s3a_entries(session_conf(spark)))
    return out


def session_conf(spark: Any) -> dict[str, str]:
    """Every setting of `spark`'s session: PySpark 4's `RuntimeConfig.getAll`, or on PySpark 3.5 (which has
    no such property) the JVM session's own map."""
    if hasattr(type(spark.conf), "getAll"):
        return dict(spark.conf.getAll)
    confs = spark._jsparkSession.sessionState().conf().getAllConfs()
    return {str(k): str(v) for k, v in dict(spark._jvm.scala.collection.JavaConverters.mapAsJavaMap(confs)).items()}


def s3a_entries(conf: Mapping[str, str]) -> dict[str, str]:
    """The `fs.s3a.*` entries of a Spark conf, given as `fs.s3a.*` or `spark.hadoop.fs.s3a.*`."""
    out = {}
    for key, value in conf.items():
        key = key.removeprefix("spark.hadoop.")
        if key.startswith("fs.s3a.") and value is not None:
            out[key] = str(value)
    return out
