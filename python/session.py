"""Local Spark sessions for the demo and the benchmarks, with the state store provider chosen by name.

Every job here runs the same code against any provider; only the session conf differs:

| name                | provider class                                                       | extra conf |
|---------------------|----------------------------------------------------------------------|------------|
| `sparkstate`        | `io.sparkstate.PythonStateStoreProvider` (via `sparkstate.configure`) | shim jar, worker interpreter, `--backend` |
| `hdfs`              | Spark's `HDFSBackedStateStoreProvider` (Spark's default)              | none |
| `rocksdb`           | Spark's `RocksDBStateStoreProvider`                                   | none |
| `rocksdb-changelog` | Spark's `RocksDBStateStoreProvider`                                   | `rocksdb.changelogCheckpointing.enabled=true` |

The provider is pinned in the checkpoint's offset log on the first batch: a query restarted on an existing
checkpoint keeps its original provider whatever the session says (Spark only logs a warning). The demo
therefore records the provider next to its checkpoint and refuses to switch.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Mapping

STATE_PREFIX = "spark.sql.streaming.stateStore."
PROVIDER_CLASS_KEY = STATE_PREFIX + "providerClass"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

PROVIDERS = ("sparkstate", "hdfs", "rocksdb", "rocksdb-changelog")


class ProviderUnavailable(RuntimeError):
    """The sparkstate package or its shim jar cannot be found; the message says how to fix it."""


def provider_conf(provider: str, backend: str | None = None) -> dict[str, str]:
    """Spark conf entries selecting a built-in provider (`sparkstate` is set up by `configure`)."""
    if provider == "hdfs":
        return {PROVIDER_CLASS_KEY: HDFS_PROVIDER}
    if provider == "rocksdb":
        return {PROVIDER_CLASS_KEY: ROCKSDB_PROVIDER}
    if provider == "rocksdb-changelog":
        return {PROVIDER_CLASS_KEY: ROCKSDB_PROVIDER,
                STATE_PREFIX + "rocksdb.changelogCheckpointing.enabled": "true"}
    if provider == "sparkstate":
        return {}
    raise ValueError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")


def _sparkstate_module() -> Any:
    try:
        import sparkstate  # noqa: PLC0415 - optional until the user asks for our provider
    except ImportError as exc:
        raise ProviderUnavailable(
            "provider 'sparkstate' needs the sparkstate package: `pip install .` in the repository, or "
            "PYTHONPATH=<repo>/provider for a checkout (the Python workers inherit it). "
            "Use --provider hdfs or rocksdb to run with Spark's built-in providers.") from exc
    try:
        sparkstate.jar_path()
    except FileNotFoundError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    return sparkstate


def new_session(app_name: str, provider: str, *, master: str = "local[2]", shuffle_partitions: int = 4,
                backend: str | None = None, conf: Mapping[str, str] | None = None,
                driver_memory: str | None = None) -> Any:
    """Start (or fail clearly) a local SparkSession whose stateful operators use `provider`.

    `backend` is passed to sparkstate as its `backend` setting and rejected for the built-in providers.
    `conf` entries are applied last, so callers can override anything (tuning presets, experiments).
    """
    if backend is not None and provider != "sparkstate":
        raise ValueError(f"--backend only applies to --provider sparkstate (got provider {provider!r})")
    # Without this Spark binds its driver to the VM's external address (see docs/benchmarks/index.md).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python UDF workers and sparkstate's default worker interpreter: this very Python.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession  # noqa: PLC0415 - keep `--help` fast

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               # Stateful operators: one store per shuffle partition; no AQE coalescing on a 2-core box.
               .config("spark.sql.adaptive.enabled", "false"))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    if provider == "sparkstate":
        settings = {"backend": backend} if backend else {}
        builder = _sparkstate_module().configure(builder, **settings)
    for key, value in provider_conf(provider).items():
        builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def parse_conf_pairs(pairs: list[str] | None) -> dict[str, str]:
    """`["k=v", ...]` from repeated `--conf k=v` flags."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def read_conf_file(path: str) -> dict[str, str]:
    """Entries of a spark-defaults style file (`key value` or `key=value`; `#` comments), e.g. conf/presets."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if "=" in line.split(None, 1)[0]:
                key, _, value = line.partition("=")
            else:
                key, _, value = line.partition(" ")
            out[key.strip()] = value.strip()
    return out
