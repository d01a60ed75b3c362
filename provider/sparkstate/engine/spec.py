"""StoreSpec: what the worker's `open` call says about a store (docs/internals/bridge.md, "Control calls")."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..checkpoint import StoreIdentity
from ..checkpoint.location import StoreLocation, query_key
from ..config import Settings
from ..errors import ConfigError


@dataclass(frozen=True)
class StoreSpec:
    """What the worker's `open` call says about a store (docs/internals/bridge.md, "Control calls")."""

    checkpoint_location: str
    operator_id: int
    partition_id: int
    store_name: str
    instance_id: str
    query_run_id: str
    key_schema_json: str
    value_schema_json: str
    num_cols_prefix_key: int
    num_partitions: int
    min_versions_to_retain: int
    # True when the key group of every key routes it to this partition (pmod(kg, numPartitions)); false for
    # stores without a typed partition-key column (a global aggregate's single partition)
    key_groups_route: bool = False
    # Spark's checkpoint format v2 (`stateStore.checkpointFormatVersion=2`): every commit gets a unique id
    checkpoint_ids: bool = False
    settings: Settings = field(default_factory=Settings)
    # The Hadoop conf's `fs.s3a.*` entries (endpoint, credentials...). May hold secrets: never in repr.
    hadoop_s3a: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    _FIELDS = (("checkpointLocation", "checkpoint_location", str), ("operatorId", "operator_id", int),
               ("partitionId", "partition_id", int), ("storeName", "store_name", str),
               ("instanceId", "instance_id", str), ("queryRunId", "query_run_id", str),
               ("keySchema", "key_schema_json", str), ("valueSchema", "value_schema_json", str),
               ("numColsPrefixKey", "num_cols_prefix_key", int), ("numPartitions", "num_partitions", int),
               ("minVersionsToRetain", "min_versions_to_retain", int))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | str) -> "StoreSpec":
        if isinstance(doc, str):
            doc = json.loads(doc)
        values: dict[str, Any] = {}
        for key, name, kind in cls._FIELDS:
            if key not in doc:
                raise ConfigError(f"store spec lacks '{key}'")
            try:
                values[name] = kind(doc[key])
            except (TypeError, ValueError):
                raise ConfigError(f"store spec field '{key}' is not a valid {kind.__name__}: {doc[key]!r}") from None
        values["key_groups_route"] = bool(doc.get("keyGroupsRoute", False))
        values["checkpoint_ids"] = bool(doc.get("checkpointIds", False))
        values["settings"] = Settings.parse({str(k): str(v) for k, v in (doc.get("settings") or {}).items()})
        values["hadoop_s3a"] = {str(k): str(v) for k, v in (doc.get("hadoopS3a") or {}).items()}
        return cls(**values)

    @classmethod
    def standalone(cls, checkpoint_location: str, settings: Settings, instance_id: str = "standalone",
                   num_partitions: int = 1) -> "StoreSpec":
        """A store opened outside Spark (benchmarks, tools): partition 0 of operator 0's default store, with no
        schemas, retaining 100 versions."""
        return cls(checkpoint_location=checkpoint_location, operator_id=0, partition_id=0, store_name="default",
                   instance_id=instance_id, query_run_id="standalone", key_schema_json="{}",
                   value_schema_json="{}", num_cols_prefix_key=0, num_partitions=num_partitions,
                   min_versions_to_retain=100, settings=settings)

    @property
    def location(self) -> StoreLocation:
        return StoreLocation(self.checkpoint_location, self.operator_id, self.partition_id, self.store_name,
                             self.settings.state_location)

    def same_partition(self, other: "StoreSpec") -> bool:
        """Whether `other` is a store of the same query, operator and partition (any store name)."""
        mine, theirs = self.location, other.location
        return (self.operator_id, self.partition_id, mine.checkpoint_root(), mine.state_location_setting) == \
            (other.operator_id, other.partition_id, theirs.checkpoint_root(), theirs.state_location_setting)

    def identity(self) -> StoreIdentity:
        """What the manifests of this store say they belong to."""
        return StoreIdentity(query_key(self.location.checkpoint_root()), self.operator_id, self.partition_id,
                             self.store_name)

    def state_location(self) -> str:
        """Where this store's files live (`StoreLocation.state_location`)."""
        return self.location.state_location()

    def describe(self) -> str:
        return self.location.describe()
