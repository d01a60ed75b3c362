"""Key groups: the Spark hash stored in the first four bytes of every storage key.

A key group is Spark's Murmur3 hash (seed 42) of the operator's partition-key columns, computed in the JVM
shim with Spark's own expression. Spark routes a key to partition `pmod(hash, n)`; storing the whole
32-bit hash keeps that rule computable for every `n`, which is what rescaling needs.

Layout: `storage_key = int32 big-endian (two's complement) key group + key body`.
"""
from __future__ import annotations

KEY_GROUP_BYTES = 4


def key_group(storage_key: bytes) -> int:
    """The signed 32-bit key group of a storage key."""
    return int.from_bytes(storage_key[:KEY_GROUP_BYTES], "big", signed=True)


def partition_of(group: int, num_partitions: int) -> int:
    """Spark's `pmod(hash, n)`: Python's % is already non-negative for n > 0."""
    return group % num_partitions


def storage_key(group: int, body: bytes) -> bytes:
    return group.to_bytes(KEY_GROUP_BYTES, "big", signed=True) + body
