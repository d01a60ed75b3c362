"""Offline checks of a (rescaled) checkpoint's state, through the engine's Store API.

- `verify_routing`: every entry of every multi-partition store sits in partition `pmod(kg, N)`.
- `verify_join_state`: for each side of a stream-stream join (state format 2), per key group, the
  `keyToNumValues` counts and the `keyWithIndexToValue` indexes agree: a join key with count n owns
  indexes 0..n-1 exactly. Entries of one join key share a key group (the hash is over the join key
  columns in both stores), so moving whole key groups keeps this invariant; this checks it held.

Counts and indexes are read off Spark's rows as idle-state expiry reads them (engine/join_expiry.py).
"""
from __future__ import annotations

import tempfile
import uuid
from collections import defaultdict
from typing import Iterator

from ..engine import Store, StoreSpec
from ..engine.join_expiry import IndexedKeys, count_of
from ..errors import RescaleError
from ..keygroups import key_group, partition_of
from .plan import Plan, StorePlan, store_spec_doc


def _entries(plan: Plan, store: StorePlan, part: int, version: int, root: str) -> Iterator[tuple[bytes, bytes]]:
    spec = StoreSpec.from_json(store_spec_doc(plan, store, part, f"verify-{uuid.uuid4().hex[:12]}"))
    reader = Store(spec, local_root=root)
    try:
        reader.load(version)
        for chunk in reader.scan(b"", 65536, 16 << 20):
            yield from chunk
    finally:
        reader.close()


def verify_routing(plan: Plan, num_partitions: int, version: int) -> int:
    """Raise unless every entry routes to its partition; returns the number of entries checked."""
    checked = 0
    with tempfile.TemporaryDirectory(prefix="sparkstate-verify-") as root:
        for store in plan.stores:
            if store.single_partition:
                continue
            for part in range(num_partitions):
                for key, _ in _entries(plan, store, part, version, root):
                    group = key_group(key)
                    if partition_of(group, num_partitions) != part:
                        raise RescaleError(f"{store.label} partition {part} holds key group {group}, which "
                                           f"routes to partition {partition_of(group, num_partitions)}")
                    checked += 1
    return checked


def verify_join_state(plan: Plan, num_partitions: int, version: int) -> dict[str, int]:
    """Check count/index consistency of every join operator; returns entries checked per store name."""
    by_op: dict[int, dict[str, StorePlan]] = defaultdict(dict)
    for store in plan.stores:
        if store.operator_name == "symmetricHashJoin":
            by_op[store.operator_id][store.store_name] = store
    checked: dict[str, int] = defaultdict(int)
    with tempfile.TemporaryDirectory(prefix="sparkstate-verify-") as root:
        for op, stores in by_op.items():
            for side in ("left", "right"):
                counts_store, index_store = stores[f"{side}-keyToNumValues"], stores[f"{side}-keyWithIndexToValue"]
                indexed = IndexedKeys(index_store.key_schema_json)
                for part in range(num_partitions):
                    expected: dict[int, list[int]] = defaultdict(list)
                    for key, value in _entries(plan, counts_store, part, version, root):
                        expected[key_group(key)].extend(range(count_of(value)))
                        checked[counts_store.store_name] += 1
                    found: dict[int, list[int]] = defaultdict(list)
                    for key, _ in _entries(plan, index_store, part, version, root):
                        split = indexed.split(key)
                        if split is None:
                            raise RescaleError(f"op {op} {side} side, partition {part}: {index_store.store_name} "
                                               f"holds a key that is no (join key, index) row: {key.hex()[:80]}")
                        found[key_group(key)].append(split[1])
                        checked[index_store.store_name] += 1
                    for kg in set(expected) | set(found):
                        if sorted(expected.get(kg, [])) != sorted(found.get(kg, [])):
                            raise RescaleError(
                                f"op {op} {side} side, partition {part}, key group {kg}: keyToNumValues "
                                f"implies indexes {sorted(expected.get(kg, []))}, keyWithIndexToValue holds "
                                f"{sorted(found.get(kg, []))}")
    return dict(checked)
