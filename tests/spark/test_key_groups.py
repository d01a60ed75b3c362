"""Key groups on disk are Spark's own partitioning hash: `pmod(kg, n)` is the partition Spark routed
the key to, and `kg` equals SQL `hash(key)` (Murmur3, seed 42) for every stored key."""
from __future__ import annotations

import glob
import os
import struct
import uuid

import pytest
from pyspark.sql import functions as F

from conftest import selected_provider
from spark_harness import InputDir, run_available_now

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="reads sparkstate's files")


def _stored_entries(store_dir: str, tmp_path) -> list[bytes]:
    from sparkstate.engine import Store, StoreSpec

    spec = StoreSpec.from_json({
        "checkpointLocation": store_dir, "operatorId": 0, "partitionId": int(os.path.basename(store_dir)),
        "storeName": "default", "instanceId": str(uuid.uuid4()), "queryRunId": str(uuid.uuid4()),
        "keySchema": "{}", "valueSchema": "{}", "numColsPrefixKey": 0, "numPartitions": 3,
        "minVersionsToRetain": 10, "settings": {}})
    store = Store(spec, local_root=str(tmp_path / "local"))
    try:
        store.load(store.file_manager.latest_version())
        cursor = store.open_cursor(b"")
        keys, done = [], False
        while not done:
            rows, done = cursor.next_chunk(10_000, 1 << 24)
            keys += [k for k, _ in rows]
        cursor.close()
        return keys
    finally:
        store.close()


def test_stored_key_groups_are_sparks_hash_and_route_to_their_partition(spark, tmp_path):
    source = InputDir(spark, str(tmp_path / "in"), "k long, v long")
    source.add_all([[{"k": (i * 7919 + f) % 500, "v": i} for i in range(200)] for f in range(2)])
    checkpoint = str(tmp_path / "ckpt")
    run_available_now(source.stream().groupBy("k").agg(F.sum("v").alias("s"))
                      .writeStream.outputMode("update").format("noop"), checkpoint)

    spark_hash = {r["k"]: r["h"] for r in source.batch().select("k", F.hash("k").alias("h")).distinct().collect()}
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    seen = 0
    for store_dir in sorted(glob.glob(os.path.join(checkpoint, "state", "0", "[0-9]*"))):
        partition = int(os.path.basename(store_dir))
        for key in _stored_entries(store_dir, tmp_path / f"p{partition}"):
            kg = struct.unpack(">i", key[:4])[0]
            # key body: an UnsafeRow of one long field = 8-byte null bitset + the value
            (k,) = struct.unpack("<q", key[12:20])
            assert kg == spark_hash[k], f"key {k}: stored key group {kg}, Spark hash {spark_hash[k]}"
            assert kg % partitions == partition
            seen += 1
    assert seen == len(spark_hash)
