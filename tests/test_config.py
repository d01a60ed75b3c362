import os

import pytest

from sparkstate.config import PREFIX, Settings, settings_spark_defaults, settings_table_markdown
from sparkstate.errors import ConfigError

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_defaults_and_typed_values():
    s = Settings.parse({PREFIX + "transport": "PY4J", PREFIX + "rocksdb.blockCacheSizeMB": "16",
                        "spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "true"})
    assert s.transport == "py4j" and s.rocksdb_block_cache_mb == 16 and s.backend == "rocksdb"


def test_unknown_key_names_the_key_and_the_known_ones():
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + "bakend": "rocksdb"})
    assert PREFIX + "bakend" in str(err.value) and "backend" in str(err.value)


@pytest.mark.parametrize("key,value", [("backend", "cassandra"), ("transport", "carrier-pigeon"),
                                       ("rocksdb.writeBufferSizeMB", "0"), ("workerStartTimeoutMs", "soon"),
                                       ("heap.layout", "btree")])
def test_invalid_value_names_key_and_valid_values(key, value):
    with pytest.raises(ConfigError) as err:
        Settings.parse({PREFIX + key: value})
    assert PREFIX + key in str(err.value) and repr(value) in str(err.value) and "expected" in str(err.value)


def test_to_conf_round_trips():
    s = Settings.parse({PREFIX + "transport": "py4j", PREFIX + "checkpoint.verifyLocalCache": "true"})
    assert Settings.parse(s.to_conf()) == s


def test_readme_settings_table_is_generated_from_the_declarations():
    with open(README, encoding="utf-8") as f:
        assert settings_table_markdown() in f.read(), "regenerate with `sparkstate conf-docs`"


def test_spark_defaults_template_lists_every_setting_with_its_default():
    path = os.path.join(os.path.dirname(README), "conf", "spark-defaults.conf")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert settings_spark_defaults() in text, "regenerate with `sparkstate conf-docs --spark-defaults`"
    parsed = {}
    for line in text.splitlines():  # every commented-out setting parses, and to its default
        if line.startswith("#" + PREFIX) and len(line.split()) == 2:
            key, value = line[1:].split()
            parsed[key] = value
    assert PREFIX + "transport" in parsed and PREFIX + "heap.maxVersionsInMemory" in parsed
    assert Settings.parse(parsed) == Settings()


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
