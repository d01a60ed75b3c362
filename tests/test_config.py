import os

import pytest

from sparkstate.cli import main as cli_main
from sparkstate.config import (
    PREFIX,
    PROVIDER_CLASS,
    Settings,
    settings_spark_defaults,
    spark_defaults_file,
)
from sparkstate.errors import ConfigError

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_defaults_and_typed_values():
    s = Settings.parse({PREFIX + "transport": "PY4J", PREFIX + "rocksdb.blockCacheSizeMB": "16",
                        "spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "true"})
    assert s.transport == "py4j" and s.rocksdb_block_cache_mb == 16 and s.backend == "rocksdb"


def test_a_misspelled_key_names_the_closest_known_one():
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + "bakend": "rocksdb"})
    assert str(err.value) == f"unknown setting '{PREFIX}bakend'; did you mean '{PREFIX}backend'?"
    with pytest.raises(ConfigError, match=f"did you mean '{PREFIX}rocksdb.blockCacheSizeMB'"):
        Settings.parse({PREFIX + "rocksdb.blockcachesize": "8"})


def test_an_unknown_key_far_from_any_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + "zzz": "1"})
    assert PREFIX + "zzz" in str(err.value) and "backend, transport" in str(err.value)


@pytest.mark.parametrize("value,reason", [
    ("s3://", "s3://<bucket>"), ("s3:/bucket/x", "s3://<bucket>"), ("s3a:/bucket", "s3a://<bucket>"),
    ("relative/state", "relative path"), ("file:relative", "relative path"), ("hdfs://nn/state", "'hdfs:'")])
def test_a_state_location_that_would_not_be_written_where_meant_is_refused(value, reason):
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + "stateLocation": value})
    assert PREFIX + "stateLocation" in str(err.value) and repr(value) in str(err.value) and reason in str(err.value)


@pytest.mark.parametrize("value", ["s3://bucket", "s3a://bucket/prefix/", "file:/tmp/state", "file:///tmp/s", "/abs"])
def test_state_locations_users_write(value):
    assert Settings.parse({PREFIX + "stateLocation": value}).state_location == value


@pytest.mark.parametrize("value,reason", [("s3://bucket/x", "'s3:' is not a local"), ("local", "relative path")])
def test_a_local_dir_must_be_an_absolute_local_path(value, reason):
    with pytest.raises(ConfigError, match=reason):
        Settings.parse({PREFIX + "localDir": value})
    assert Settings.parse({PREFIX + "localDir": "/mnt/ssd/sparkstate"}).local_dir == "/mnt/ssd/sparkstate"


@pytest.mark.parametrize("key,value", [("backend", "cassandra"), ("transport", "carrier-pigeon"),
                                       ("rocksdb.writeBufferSizeMB", "0"), ("workerStartTimeoutMs", "soon"),
                                       ("rocksdb.blockSizeKB", str(4 << 20)),
                                       ("rocksdb.maxBytesForLevelBaseMB", "100000000000000"),
                                       ("workerHeartbeatTimeoutMs", "10000000000000"),
                                       ("workerStallTimeoutMs", str(24 * 3600 * 1000 + 1)),
                                       ("s3.readTimeoutMs", "99999999999"), ("s3.maxAttempts", "1000"),
                                       ("checkpoint.ioThreads", "100000"),
                                       ("heap.layout", "btree")])
def test_invalid_value_names_key_and_valid_values(key, value):
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + key: value})
    assert PREFIX + key in str(err.value) and repr(value) in str(err.value) and "expected" in str(err.value)


def test_to_conf_round_trips():
    s = Settings.parse({PREFIX + "transport": "py4j", PREFIX + "checkpoint.verifyLocalCache": "true"})
    assert Settings.parse(s.to_conf()) == s


def test_spark_defaults_template_lists_every_setting_with_its_default():
    path = os.path.join(os.path.dirname(README), "conf", "spark-defaults.conf")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == spark_defaults_file(), "regenerate with spark_defaults_file() (placeholders for the paths)"
    assert settings_spark_defaults() in text
    parsed = {}
    for line in text.splitlines():  # every commented-out setting parses, and to its default
        if line.startswith("#" + PREFIX) and len(line.split()) == 2:
            key, value = line[1:].split()
            parsed[key] = value
    assert PREFIX + "transport" in parsed and PREFIX + "heap.maxVersionsInMemory" in parsed
    assert Settings.parse(parsed) == Settings()


def test_conf_docs_prints_a_spark_defaults_file_for_this_install(capsys):
    import sys

    import sparkstate

    assert cli_main(["conf-docs", "--spark-defaults"]) == 0
    entries = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines()
                   if line and not line.startswith("#"))
    assert entries["spark.jars"] == sparkstate.jar_path() and os.path.exists(entries["spark.jars"])
    assert entries[PREFIX + "pythonExec"] == sys.executable
    assert entries["spark.sql.streaming.stateStore.providerClass"] == PROVIDER_CLASS


@pytest.mark.parametrize("preset", ["low-latency.conf", "large-state.conf"])
def test_tuning_presets_hold_valid_settings(preset):
    path = os.path.join(os.path.dirname(README), "conf", "presets", preset)
    entries = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                key, value = line.split(None, 1)
                entries[key] = value
    ours = {k: v for k, v in entries.items() if k.startswith(PREFIX)}
    assert ours, f"{preset} sets no sparkstate setting"
    Settings.parse(ours)  # raises ConfigError naming the key if a preset went stale


@pytest.mark.parametrize("raw, ms", [("30d", 30 * 86_400_000), ("12h", 12 * 3_600_000), ("90s", 90_000),
                                     ("5m", 300_000), ("500ms", 500), (" 2H ", 7_200_000), ("none", None)])
def test_ttl_durations_parse_to_milliseconds(raw, ms):
    assert Settings.parse({PREFIX + "ttl": raw}).ttl_ms == ms


@pytest.mark.parametrize("raw", ["", "30", "1.5h", "-3d", "0s", "3 weeks", "1y", "101000d"])
def test_a_bad_ttl_is_refused_naming_the_key(raw):
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + "ttl": raw})
    assert PREFIX + "ttl" in str(err.value) and "duration" in str(err.value)


def test_ttl_per_operator_overrides_the_query_duration():
    s = Settings.parse({PREFIX + "ttl": "1h", PREFIX + "ttl.operator.2": "none", PREFIX + "TTL.Operator.0": "90s"})
    assert (s.ttl_for(0), s.ttl_for(1), s.ttl_for(2)) == (90_000, 3_600_000, None)
    assert Settings().ttl_for(0) is None  # unset: nothing expires
    assert Settings.parse(s.to_conf()) == s


@pytest.mark.parametrize("key", ["ttl.operator.x", "ttl.operator.", "ttl.operators.1"])
def test_a_malformed_per_operator_key_is_unknown(key):
    with pytest.raises(ConfigError, match="unknown setting"):
        Settings.parse({PREFIX + key: "1h"})


def test_a_bad_per_operator_ttl_names_its_key():
    with pytest.raises(ConfigError, match=r"ttl\.operator\.7'"):
        Settings.parse({PREFIX + "ttl.operator.7": "soon"})
