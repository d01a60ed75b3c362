"""Operator stores: from Spark 4's operator metadata, and from the layout of a Spark 3.5 checkpoint (no
metadata), where a join's stores and a session window's prefix come from the directories and schemas."""
from __future__ import annotations

import os

import pytest

from sparkstate.checkpoint.operator_stores import (
    JOIN_STORES,
    operator_stores,
    session_prefix_columns,
)
from sparkstate.errors import SparkCheckpointError
from sparkstate.storage import fileio_for
from tests.rescaling import fake_checkpoint
from tests.rescaling.fake_checkpoint import AGG_KEY, JOIN_INDEX_KEY, JOIN_KEY, VALUE, schema_file


def _field(name: str, kind) -> dict:
    return {"name": name, "type": kind, "nullable": True, "metadata": {}}


SESSION = {"type": "struct", "fields": [_field("start", "timestamp"), _field("end", "timestamp")]}
# Spark's session window store: grouping columns, then the session's start; the value is the input row
SESSION_KEY = {"type": "struct", "fields": [_field("user", "string"), _field("sessionStartTime", "timestamp")]}
SESSION_VALUE = {"type": "struct", "fields": [_field("user", "string"), _field("t", "timestamp"),
                                              _field("session_window", SESSION)]}
# a windowed aggregation: the window struct ends the key, the value holds the buffer only
WINDOW_KEY = {"type": "struct", "fields": [_field("k", "integer"), _field("window", SESSION)]}
BUFFER = {"type": "struct", "fields": [_field("sum", "long"), _field("count", "long")]}
DEDUP_VALUE = {"type": "struct", "fields": [_field("__dummy__", "null")]}
# an aggregation grouped by a column that happens to be named like the session's start
START_KEY = {"type": "struct", "fields": [_field("user", "string"), _field("sessionStartTime", "timestamp")]}


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_the_prefix_of_a_session_window_and_of_nothing_else():
    assert session_prefix_columns(SESSION_KEY, SESSION_VALUE) == 1
    assert session_prefix_columns(WINDOW_KEY, BUFFER) == 0
    assert session_prefix_columns(WINDOW_KEY, DEDUP_VALUE) == 0
    assert session_prefix_columns(START_KEY, BUFFER) == 0
    assert session_prefix_columns(SESSION_KEY, {"type": "struct", "fields": [_field("user", "long")]}) == 0
    assert session_prefix_columns(AGG_KEY, VALUE) == 0
    assert session_prefix_columns({"type": "struct", "fields": []}, VALUE) == 0


def test_stores_from_operator_metadata(tmp_path):
    fake_checkpoint.build(str(tmp_path / "ck"), 3, "heap", str(tmp_path / "local"))
    stores = operator_stores(fileio_for(str(tmp_path / "ck")), str(tmp_path / "ck"))
    assert [(s.operator_id, s.operator_name, s.store_name) for s in stores] == (
        [(0, "stateStoreSave", "default")] + [(1, "symmetricHashJoin", n) for n in JOIN_STORES]
        + [(2, "stateStoreSave", "default")])
    assert [s.single_partition for s in stores] == [False] * 5 + [True]


def test_stores_from_the_layout_of_a_checkpoint_without_operator_metadata(tmp_path):
    ck = str(tmp_path / "ck")
    _write(os.path.join(ck, "state", "0", "0", "_metadata", "schema"), schema_file(WINDOW_KEY, BUFFER))
    for name in JOIN_STORES:
        key = JOIN_INDEX_KEY if name.endswith("keyWithIndexToValue") else JOIN_KEY
        _write(os.path.join(ck, "state", "1", "0", name, "_metadata", "schema"), schema_file(key, VALUE))
    _write(os.path.join(ck, "state", "2", "0", "_metadata", "schema"), schema_file(SESSION_KEY, SESSION_VALUE))
    stores = operator_stores(fileio_for(ck), ck)
    assert [(s.operator_id, s.operator_name, s.store_name, s.num_cols_prefix_key) for s in stores] == (
        [(0, None, "default", 0)] + [(1, "symmetricHashJoin", n, 0) for n in JOIN_STORES]
        + [(2, "sessionWindowStateStoreSaveExec", "default", 1)])
    assert stores[0].key_schema == WINDOW_KEY and stores[-1].value_schema == SESSION_VALUE


def test_a_missing_schema_file_is_named(tmp_path):
    ck = str(tmp_path / "ck")
    os.makedirs(os.path.join(ck, "state", "0", "0"))
    with pytest.raises(SparkCheckpointError, match=r"state/0/0/_metadata/schema is missing"):
        operator_stores(fileio_for(ck), ck)
