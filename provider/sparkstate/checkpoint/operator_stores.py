"""The stores of a stopped query's stateful operators and their schemas, as the offline tools need them.

Spark 4 records each operator's name and stores in its operator metadata (`state/<op>/_metadata/metadata`).
Spark 3.5 writes no such file, so there the stores are read from the checkpoint's layout:

- a stream-stream join keeps its four stores in directories named after them (`state/<op>/0/left-keyToNumValues`
  and so on); every other operator has the one store `default`;
- every store has Spark's state schema file (`_metadata/schema` of partition 0);
- only a session window scans by key prefix: its key is the grouping columns followed by the session's
  start (a timestamp named `sessionStartTime`), and its value is the whole input row, which holds every
  grouping column. Its prefix is the grouping columns. A streaming aggregation's value holds its buffer
  only, deduplication's a placeholder, (flat)MapGroupsWithState's the user's state: none holds the key's
  columns.

An operator found this way gets the name Spark 4 would give it where its layout tells (a join, a session
window); the others have none (`operator_name` None).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterator

from ..errors import SparkCheckpointError
from ..storage import FileIO, join_path
from ..storage.local import local_path_or_none
from .location import spark_store_location
from .spark_logs import is_single_partition_key, parse_state_schema, read_operator_metadata

JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
               "right-keyWithIndexToValue")
DEFAULT_STORE = "default"
JOIN_OPERATOR = "symmetricHashJoin"  # the operator names of Spark 4's operator metadata
SESSION_WINDOW_OPERATOR = "sessionWindowStateStoreSaveExec"
SESSION_START = "sessionStartTime"  # the last key column of a session window's store


@dataclass(frozen=True)
class OperatorStore:
    operator_id: int
    operator_name: str | None  # None: Spark wrote no operator metadata (3.5)
    store_name: str
    num_cols_prefix_key: int
    key_schema: dict           # StructType JSON
    value_schema: dict

    @property
    def single_partition(self) -> bool:
        return is_single_partition_key(self.key_schema, self.num_cols_prefix_key)

    @property
    def label(self) -> str:
        return f"op {self.operator_id} ({self.operator_name or 'unnamed'}) store {self.store_name}"


def metadata_path(checkpoint: str, operator_id: int) -> str:
    return join_path(checkpoint, "state", str(operator_id), "_metadata", "metadata")


def schema_path(checkpoint: str, operator_id: int, store_name: str) -> str:
    return join_path(spark_store_location(checkpoint, operator_id, 0, store_name), "_metadata", "schema")


def operator_stores(fio: FileIO, checkpoint: str) -> list[OperatorStore]:
    """Every store of every stateful operator, in operator order. Raises SparkCheckpointError naming the file
    that is missing or unreadable (a store whose schema file is missing cannot be opened)."""
    return [store for op in operator_ids(fio, checkpoint) for store in stores_of_operator(fio, checkpoint, op)]


def stores_of_operator(fio: FileIO, checkpoint: str, op: int) -> list[OperatorStore]:
    """The stores of operator `op`: from its operator metadata, or from the layout where it has none."""
    if not fio.exists(metadata_path(checkpoint, op)):
        return _stores_from_layout(fio, checkpoint, op)
    meta = read_operator_metadata(fio, metadata_path(checkpoint, op))
    return [OperatorStore(op, meta.operator_name, info.store_name, info.num_cols_prefix_key,
                          *_schemas(fio, checkpoint, op, info.store_name)) for info in meta.stores]


def operator_ids(fio: FileIO, checkpoint: str) -> list[int]:
    """The operator ids under `state/`: listed on a local file system; probed densely from 0 on an object
    store (Spark numbers stateful operators 0, 1, ...), by their metadata or their partition 0 schema files."""
    state_root = join_path(checkpoint, "state")
    local = local_path_or_none(state_root)
    if local is not None:
        if not os.path.isdir(local):
            return []
        names = os.listdir(local)
        bad = [n for n in names if not n.isdigit()]
        if bad:
            raise SparkCheckpointError(f"unexpected entries {bad} under {state_root}: unknown state layout")
        return sorted(int(n) for n in names)
    ids: list[int] = []
    while any(fio.exists(p) for p in _marker_paths(checkpoint, len(ids))):
        ids.append(len(ids))
    return ids


def _marker_paths(checkpoint: str, op: int) -> Iterator[str]:
    yield metadata_path(checkpoint, op)
    yield schema_path(checkpoint, op, DEFAULT_STORE)
    yield schema_path(checkpoint, op, JOIN_STORES[0])


def _schemas(fio: FileIO, checkpoint: str, op: int, store_name: str) -> tuple[dict, dict]:
    path = schema_path(checkpoint, op, store_name)
    try:
        raw = fio.read_bytes(path)
    except FileNotFoundError:
        raise SparkCheckpointError(f"state schema {path} is missing: cannot tell the key and value columns of "
                                   f"operator {op} store {store_name}") from None
    return parse_state_schema(raw, path)


def _stores_from_layout(fio: FileIO, checkpoint: str, op: int) -> list[OperatorStore]:
    if fio.exists(schema_path(checkpoint, op, JOIN_STORES[0])):
        return [OperatorStore(op, JOIN_OPERATOR, name, 0, *_schemas(fio, checkpoint, op, name))
                for name in JOIN_STORES]
    key, value = _schemas(fio, checkpoint, op, DEFAULT_STORE)
    prefix = session_prefix_columns(key, value)
    return [OperatorStore(op, SESSION_WINDOW_OPERATOR if prefix else None, DEFAULT_STORE, prefix, key, value)]


def session_prefix_columns(key_schema: dict, value_schema: dict) -> int:
    """The prefix a session window's store scans by (its grouping columns), or 0 for a store that is not a
    session window's (see the module doc)."""
    keys = key_schema.get("fields") or []
    if not keys or not _is_session_start(keys[-1]):
        return 0
    values = {_column(f) for f in value_schema.get("fields") or []}
    return len(keys) - 1 if all(_column(f) in values for f in keys[:-1]) else 0


def _column(field: dict) -> tuple[str, str]:
    return str(field.get("name")), json.dumps(field.get("type"), sort_keys=True)


def _is_session_start(field: dict) -> bool:
    return field.get("name") == SESSION_START and field.get("type") in ("timestamp", "timestamp_ntz")
