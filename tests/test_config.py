import os

import pytest

from sparkstate.config import PREFIX, Settings, settings_table_markdown
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
                                       ("rocksdb.writeBufferSizeMB", "0"), ("workerStartTimeoutMs", "soon")])
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
