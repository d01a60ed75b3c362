"""One SparkSession per test module, pointed at the state store provider under test.

Provider switch, env `SPARKSTATE_TEST_PROVIDER`:
- `sparkstate` (default): `sparkstate.configure(builder, **settings)`; sparkstate is imported only then.
- `hdfs`: Spark's default HDFSBackedStateStoreProvider (set explicitly).
- `rocksdb`: Spark's RocksDBStateStoreProvider.

A module can pass extra sparkstate settings (ignored for the built-in providers) and extra Spark confs:

    pytestmark = [pytest.mark.sparkstate_settings(transport="py4j"),
                  pytest.mark.spark_conf({"spark.sql.streaming.stateStore.minDeltasForSnapshot": "5"})]

Variants: a test that takes the `variant` fixture runs once per store variant (`VARIANTS`: a backend or a
transport), each with the variant's settings set on the session for that test. Which variants: the
module's `VARIANTS` tuple if it has one, else the test's `@pytest.mark.variants(...)`, else rocksdb and
heap. With a built-in provider there is one variant, `builtin`, which sets nothing.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest

_STATE_PKG = "org.apache.spark.sql.execution.streaming.state."
BUILTIN_PROVIDERS = {
    "hdfs": _STATE_PKG + "HDFSBackedStateStoreProvider",
    "rocksdb": _STATE_PKG + "RocksDBStateStoreProvider",
}
PROVIDER_ENV = "SPARKSTATE_TEST_PROVIDER"

BASE_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "3",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    # Exercise maintenance (snapshots, cleanup) while the tests run, not only at shutdown.
    "spark.sql.streaming.stateStore.maintenanceInterval": "2s",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
    "spark.sql.streaming.minBatchesToRetain": "10",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "false",
    # Spark's default, stated: a module that asks for format v2 would otherwise leave it to the sessions
    # after it in the same process, where Spark's HDFS provider refuses it.
    "spark.sql.streaming.stateStore.checkpointFormatVersion": "1",
}


def selected_provider() -> str:
    name = os.environ.get(PROVIDER_ENV, "sparkstate").strip().lower()
    if name not in ("sparkstate", *BUILTIN_PROVIDERS):
        raise pytest.UsageError(f"{PROVIDER_ENV}={name!r}: expected sparkstate, hdfs or rocksdb")
    return name


PREFIX = "spark.sql.streaming.stateStore.sparkstate."
# heap.snapshotEveryVersions=1, whatever the deltas' bytes, makes background full snapshots (and chains
# that start from one) happen within these short queries: maintenance starts one after any commit, and a
# commit starts one itself once four deltas wait.
VARIANTS = {
    "rocksdb": {"backend": "rocksdb"},
    "heap": {"backend": "heap", "heap.snapshotEveryVersions": "1", "heap.snapshotMinDeltaPercent": "0"},
    "socket": {"backend": "rocksdb", "transport": "socket"},
    "py4j": {"backend": "rocksdb", "transport": "py4j"},
    # "rocksdb" commits as change logs between flushes (the default rocksdb.flushEveryVersions); this one
    # flushes every third version, so that restarts replay logs on a flush made within the query
    "rocksdb-logged": {"backend": "rocksdb", "rocksdb.flushEveryVersions": "3"},
    # a flush at every commit, its uncompressed SST files read through memory maps
    "rocksdb-mapped": {"backend": "rocksdb", "rocksdb.compression": "none", "rocksdb.mmapReads": "true",
                       "rocksdb.flushEveryVersions": "1"},
}
DEFAULT_VARIANTS = ("rocksdb", "heap")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "variant" not in metafunc.fixturenames:
        return
    if selected_provider() != "sparkstate":
        names: tuple[str, ...] = ("builtin",)
    elif hasattr(metafunc.module, "VARIANTS"):
        names = tuple(metafunc.module.VARIANTS)
    else:
        marker = metafunc.definition.get_closest_marker("variants")
        names = tuple(marker.args) if marker else DEFAULT_VARIANTS
        if marker:  # variants(..., slow=(...)): these run only in the slow selection
            slow = tuple(marker.kwargs.get("slow", ()))
            metafunc.parametrize("variant", [*names, *(pytest.param(n, marks=pytest.mark.slow) for n in slow)],
                                 indirect=True)
            return
    metafunc.parametrize("variant", names, indirect=True)


@pytest.fixture()
def variant(request: pytest.FixtureRequest, spark) -> Iterator[str]:
    """The store variant of this test run; its settings are set on the session for the test."""
    from spark_harness import session_conf

    conf = {PREFIX + k: v for k, v in VARIANTS.get(request.param, {}).items()}
    with session_conf(spark, conf):
        yield request.param


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sparkstate_settings(**settings): extra sparkstate settings "
                                       "for the module's SparkSession (sparkstate provider only)")
    config.addinivalue_line("markers", "spark_conf(dict): extra Spark confs for the module's SparkSession")
    config.addinivalue_line("markers", "variants(*names, slow=()): the store variants a test taking `variant` runs in; "
                                       "those in slow run only in the slow selection")


def pytest_report_header(config: pytest.Config) -> str:
    return f"state store provider under test: {selected_provider()} ({PROVIDER_ENV})"


def build_session(settings: dict[str, Any], extra_conf: dict[str, str]):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("sparkstate-operator-tests")
    for key, value in {**BASE_CONF, **extra_conf}.items():
        builder = builder.config(key, value)
    provider = selected_provider()
    if provider == "sparkstate":
        import sparkstate  # only needed (and only importable) when testing our provider

        # Explicit defaults: a later session in the same JVM must not inherit an earlier module's choice.
        builder = sparkstate.configure(builder, **{"backend": "rocksdb", "transport": "shm", **settings})
    else:
        builder = builder.config("spark.sql.streaming.stateStore.providerClass", BUILTIN_PROVIDERS[provider])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The module's SparkSession; stopped (with its SparkContext) when the module finishes."""
    settings: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("sparkstate_settings"))):
        settings.update(marker.kwargs)
    extra_conf: dict[str, str] = {}
    for marker in reversed(list(request.node.iter_markers("spark_conf"))):
        for arg in marker.args:
            extra_conf.update({k: str(v) for k, v in arg.items()})
    session = build_session(settings, extra_conf)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture()
def provider_class(spark) -> str:
    return spark.conf.get("spark.sql.streaming.stateStore.providerClass")
