"""Bad input gets a clear error that says what to fix, and never loads wrong state.

Each corruption test also repairs the damage and finishes the query, comparing with the batch result:
the failed attempt must not have lost or changed any committed state.
"""
from __future__ import annotations

import glob
import os
import shutil
import stat
import sys

import pytest

from conftest import selected_provider
from spark_harness import PREFIX, AggregationCase
from spark_harness import session_conf as harness_session_conf

import sparkstate

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's own errors")



@pytest.fixture()
def session_conf(spark):
    """Set session confs for one test; afterwards each is put back as the session had it."""
    blocks = []

    def set_conf(key, value):
        block = harness_session_conf(spark, {key: value})
        block.__enter__()
        blocks.append(block)

    yield set_conf
    for block in reversed(blocks):
        block.__exit__(None, None, None)


def test_configure_rejects_an_unknown_backend_on_the_driver():
    from pyspark.sql import SparkSession
    from sparkstate.errors import ConfigError

    with pytest.raises(ConfigError, match=r"backend.*expected rocksdb"):
        sparkstate.configure(SparkSession.builder, backend="cassandra")


def test_unknown_backend_set_at_runtime_fails_the_query_naming_the_key(spark, tmp_path, session_conf):
    case = AggregationCase(spark, tmp_path, seed=31)
    case.source.add_all(case.files)
    session_conf(PREFIX + "backend", "cassandra")
    message = case.failure_of_run()
    assert PREFIX + "backend" in message and "'cassandra'" in message and "rocksdb" in message
    _assert_reported_cleanly(message, f"ConfigError: invalid value 'cassandra' for '{PREFIX}backend'")


def _assert_reported_cleanly(message: str, error: str) -> None:
    """The store's failure is one line carrying the Python error, with no worker traceback or py4j wrapping
    behind it (the worker's stderr has the traceback). The foreachBatch sink wraps the whole failure in its
    own py4j traceback, which is Spark's and PySpark's, not ours."""
    lines = [ln for ln in message.splitlines() if "io.sparkstate.PythonStoreException:" in ln]
    assert lines and all(error in ln for ln in lines), message[:3000]
    assert "sparkstate/worker/" not in message and "RuntimeError: ConfigError" not in message, message[:3000]


def test_a_misspelled_key_set_at_runtime_names_the_closest_one(spark, tmp_path, session_conf):
    case = AggregationCase(spark, tmp_path, seed=34)
    case.source.add_all(case.files)
    session_conf(PREFIX + "rocksdb.blockCacheSize", "8")
    message = case.failure_of_run()
    _assert_reported_cleanly(message, f"did you mean '{PREFIX}rocksdb.blockCacheSizeMB'?")


@pytest.mark.parametrize("location", ["s3:/bucket/state", "s3://", "relative/state"])
def test_a_state_location_that_would_go_astray_fails_before_any_state_is_written(
        spark, tmp_path, session_conf, location):
    case = AggregationCase(spark, tmp_path, seed=35)
    case.source.add_all(case.files)
    session_conf(PREFIX + "stateLocation", location)
    message = case.failure_of_run()
    assert PREFIX + "stateLocation" in message and repr(location) in message, message[:3000]
    assert not glob.glob(os.path.join(case.checkpoint, "commits", "*"))
    assert not glob.glob(os.path.join(case.checkpoint, "state", "*", "*", "sparkstate"))
    # the workers run in the JVM's working directory, this process's: where a relative location would land
    assert not os.path.exists("s3:") and not os.path.exists("relative")


def test_unusable_python_executable_names_the_interpreter(spark, tmp_path, session_conf):
    case = AggregationCase(spark, tmp_path, seed=32)
    case.source.add_all(case.files)
    session_conf(PREFIX + "pythonExec", "/nonexistent/bin/python3")
    message = case.failure_of_run()
    assert "/nonexistent/bin/python3" in message and "pythonExec" in message


def test_a_worker_interpreter_with_another_build_of_sparkstate_is_refused(spark, tmp_path, session_conf):
    """The interpreter that pythonExec names imports another install of sparkstate (here: a copy of this one
    whose build id differs, first on its path): its workers are refused at registration, and the error
    names the interpreter, where its sparkstate lies and what to set."""
    other = tmp_path / "other-install"
    shutil.copytree(os.path.dirname(sparkstate.__file__), other / "sparkstate",
                    ignore=shutil.ignore_patterns("__pycache__", "*.jar"))
    (other / "sparkstate" / "jars" / "build-id").write_text("0123456789abcdef")
    python = tmp_path / "python-with-another-sparkstate"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={other} exec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    case = AggregationCase(spark, tmp_path, seed=34)
    case.source.add_all(case.files)
    session_conf(PREFIX + "pythonExec", str(python))
    message = case.failure_of_run()
    assert "runs another build of sparkstate (0123456789abcdef" in message, message[:3000]
    assert str(other / "sparkstate") in message and "pythonExec" in message, message[:3000]


def test_corrupted_sst_file_is_detected_and_nothing_wrong_is_loaded(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=33)
    case.source.add_all(case.files[:2])
    case.run()
    sst = sorted(glob.glob(os.path.join(case.store_dirs()[0], "files", "*.sst")))[-1]
    with open(sst, "rb") as f:
        original = f.read()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0xFF
    with open(sst, "wb") as f:
        f.write(bytes(damaged))

    case.source.add_all(case.files[2:])
    message = case.failure_of_run()
    assert os.path.basename(sst) in message and "checksum" in message.lower()

    with open(sst, "wb") as f:  # repair: the committed state must still be complete and correct
        f.write(original)
    case.run()
    case.assert_matches_batch()


def test_deleted_manifest_fails_naming_the_version(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=34)
    case.source.add_all(case.files[:2])
    case.run()
    manifests = glob.glob(os.path.join(case.store_dirs()[1], "manifests", "*.manifest"))
    latest = max(manifests, key=lambda p: int(os.path.basename(p).split(".")[0]))
    version = os.path.basename(latest).split(".")[0]
    os.rename(latest, latest + ".moved")

    case.source.add_all(case.files[2:])
    message = case.failure_of_run()
    assert f"version {version}" in message and "manifest" in message

    os.rename(latest + ".moved", latest)
    case.run()
    case.assert_matches_batch()
