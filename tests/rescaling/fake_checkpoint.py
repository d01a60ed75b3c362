"""A small synthetic sparkstate checkpoint (no Spark): Spark's logs and metadata plus stores written
through the engine's Store API, with storage keys laid out as the shim writes them (kg + UnsafeRow)."""
from __future__ import annotations

import json
import os
import random
import struct
from dataclasses import dataclass, field

from sparkstate.config import PREFIX, PROVIDER_CLASS
from sparkstate.engine import Store, StoreSpec

AGG_KEY = {"type": "struct", "fields": [{"name": "k", "type": "integer", "nullable": True, "metadata": {}}]}
EMPTY_KEY = {"type": "struct", "fields": []}
JOIN_KEY = {"type": "struct", "fields": [{"name": "field0", "type": "long", "nullable": True, "metadata": {}}]}
JOIN_INDEX_KEY = {"type": "struct", "fields": [
    {"name": "field0", "type": "long", "nullable": True, "metadata": {}},
    {"name": "index", "type": "long", "nullable": True, "metadata": {}}]}
VALUE = {"type": "struct", "fields": [{"name": "v", "type": "long", "nullable": True, "metadata": {}}]}
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
               "right-keyWithIndexToValue")


def row_of_longs(*values: int) -> bytes:
    """An UnsafeRow of non-null longs: 8-byte null bitset per 64 fields, then one slot each."""
    bitset = b"\0" * (((len(values) + 63) // 64) * 8)
    return bitset + b"".join(struct.pack("<q", v) for v in values)


def kg_bytes(kg: int) -> bytes:
    return kg.to_bytes(4, "big", signed=True)


def schema_file(key: dict, value: dict) -> bytes:
    def utf(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">H", len(raw)) + raw

    out = utf("v2")
    for schema in (key, value):
        out += struct.pack(">i", 1) + utf(json.dumps(schema))
    return out


@dataclass
class FakeCheckpoint:
    path: str
    partitions: int
    backend: str
    # (op, store name) -> {storage key: value}, the whole logical state
    state: dict[tuple[int, str], dict[bytes, bytes]] = field(default_factory=dict)
    single: set = field(default_factory=set)
    join_ops: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)  # more sparkstate settings, short keys ("ttl": "30d")

    @property
    def settings_conf(self) -> dict[str, str]:
        return {PREFIX + "backend": self.backend, **{PREFIX + k: v for k, v in self.settings.items()}}

    def store_dir(self, op: int, part: int, name: str) -> str:
        base = os.path.join(self.path, "state", str(op), str(part))
        return base if name == "default" else os.path.join(base, name)

    def spec(self, op: int, part: int, name: str, instance: str) -> StoreSpec:
        return StoreSpec.from_json({
            "checkpointLocation": self.store_dir(op, part, name), "operatorId": op, "partitionId": part,
            "storeName": name, "instanceId": instance, "queryRunId": "test", "keySchema": "{}",
            "valueSchema": "{}", "numColsPrefixKey": 0, "numPartitions": self.partitions,
            "minVersionsToRetain": 100, "settings": self.settings_conf})

    def read_store(self, op: int, part: int, name: str, version: int, local_root: str,
                   as_stored: bool = False) -> dict[bytes, bytes]:
        """The entries of a store version (`as_stored`: values with their idle-state stamps)."""
        store = Store(self.spec(op, part, name, f"read-{op}-{part}-{name}-{version}"), local_root=local_root)
        try:
            store.load(version)
            return {k: v for chunk in store.scan(b"", 10_000, 1 << 24, as_stored=as_stored) for k, v in chunk}
        finally:
            store.close()


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def build(path: str, partitions: int, backend: str, local_root: str, seed: int = 1,
          provider: str = PROVIDER_CLASS, operators: tuple[str, ...] = ("agg", "join", "global"),
          settings: dict | None = None) -> FakeCheckpoint:
    """Batch 0 committed; every store at version 1. Operators: an aggregation (op 0), a join (op 1), a
    global aggregation (op 2), in that order of ids as listed."""
    rng = random.Random(seed)
    ck = FakeCheckpoint(path, partitions, backend, settings=dict(settings or {}))
    conf = {"spark.sql.streaming.stateStore.providerClass": provider, "spark.sql.shuffle.partitions": str(partitions),
            "spark.sql.streaming.join.stateFormatVersion": "2"}
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1700000000000, "conf": conf}
    _write(os.path.join(path, "offsets", "0"), ("v1\n" + json.dumps(meta, separators=(",", ":")) + '\n{"logOffset":0}').encode())
    _write(os.path.join(path, "commits", "0"), b'v1\n{"nextBatchWatermarkMs":0}')
    _write(os.path.join(path, "metadata"), b'{"id":"test-query"}')
    for op, kind in enumerate(operators):
        if kind == "agg":
            names, name = ["default"], "stateStoreSave"
            entries = {kg_bytes(kg) + row_of_longs(kg): row_of_longs(rng.randrange(1000))
                       for kg in (rng.randrange(-2**31, 2**31) for _ in range(400))}
            ck.state[(op, "default")] = entries
            _write(os.path.join(ck.store_dir(op, 0, "default"), "_metadata", "schema"), schema_file(AGG_KEY, VALUE))
        elif kind == "global":
            names, name = ["default"], "stateStoreSave"
            ck.state[(op, "default")] = {kg_bytes(0) + row_of_longs(): row_of_longs(42)}
            ck.single.add(op)
            _write(os.path.join(ck.store_dir(op, 0, "default"), "_metadata", "schema"), schema_file(EMPTY_KEY, VALUE))
        elif kind == "join":
            names, name = list(JOIN_STORES), "symmetricHashJoin"
            ck.join_ops.append(op)
            for side in ("left", "right"):
                counts, indexed = {}, {}
                for join_key in range(150):
                    kg = rng.randrange(-2**31, 2**31)
                    n = rng.randint(1, 4)
                    counts[kg_bytes(kg) + row_of_longs(join_key)] = row_of_longs(n)
                    for i in range(n):
                        indexed[kg_bytes(kg) + row_of_longs(join_key, i)] = row_of_longs(rng.randrange(10**6))
                ck.state[(op, f"{side}-keyToNumValues")] = counts
                ck.state[(op, f"{side}-keyWithIndexToValue")] = indexed
            for store_name in JOIN_STORES:
                key = JOIN_INDEX_KEY if store_name.endswith("keyWithIndexToValue") else JOIN_KEY
                _write(os.path.join(ck.store_dir(op, 0, store_name), "_metadata", "schema"), schema_file(key, VALUE))
        else:
            names, name = ["default"], kind  # an operator sparkstate does not know
            ck.state[(op, "default")] = {}
            _write(os.path.join(ck.store_dir(op, 0, "default"), "_metadata", "schema"), schema_file(AGG_KEY, VALUE))
        stores = [{"storeName": n, "numColsPrefixKey": 0, "numPartitions": partitions} for n in names]
        _write(os.path.join(path, "state", str(op), "_metadata", "metadata"),
               ("v1\n" + json.dumps({"operatorInfo": {"operatorId": op, "operatorName": name},
                                     "stateStoreInfo": stores}, separators=(",", ":"))).encode())
    for (op, store_name), entries in ck.state.items():
        parts = [0] if op in ck.single else range(partitions)
        for part in parts:
            rows = [(k, v) for k, v in entries.items()
                    if op in ck.single or int.from_bytes(k[:4], "big", signed=True) % partitions == part]
            store = Store(ck.spec(op, part, store_name, f"w-{op}-{part}-{store_name}"), local_root=local_root)
            store.load(0)
            store.apply_batch(rows)
            assert store.commit().version == 1
            store.close()
    return ck
