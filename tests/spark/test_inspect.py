"""`sparkstate inspect` on checkpoints real queries wrote: its key counts per partition equal what Spark's
`statestore` source reads, on both backends, and a checkpoint of Spark's HDFS provider shows its versions."""
from __future__ import annotations

import json
import os

import pytest
from conftest import BUILTIN_PROVIDERS, selected_provider
from spark_harness import AggregationCase

from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF
from sparkstate.cli import main as cli_main

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's checkpoints")


def _inspect(capsys, checkpoint: str, *extra: str) -> dict:
    assert cli_main(["inspect", "--checkpoint", checkpoint, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_key_counts_equal_sparks_statestore_reader(spark, tmp_path, capsys, variant):
    case = AggregationCase(spark, tmp_path, seed=71, n_files=3, n_keys=25)
    case.source.add_all(case.files)
    case.run()
    doc = _inspect(capsys, case.checkpoint, "--partitions", "7")
    rows = spark.read.format("statestore").load(case.checkpoint)
    per_partition = {r["partition_id"]: r["count"] for r in rows.groupBy("partition_id").count().collect()}
    ours = {s["partitionId"]: s["keys"] for s in doc["stores"] if s["keys"]}
    assert ours == per_partition and sum(ours.values()) == 25
    assert doc["backends"] == [variant] and doc["balance"][0]["keys"] == [ours.get(p, 0) for p in range(3)]
    assert sum(doc["predicted"][0]["keys"]) == 25 and len(doc["predicted"][0]["keys"]) == 7
    assert [o["operatorName"] for o in doc["operators"]] == ["stateStoreSave"]
    assert "k" in json.dumps(doc["operators"][0]["keySchema"])


def test_a_checkpoint_of_sparks_hdfs_provider(spark, tmp_path, capsys):
    case = AggregationCase(spark, tmp_path, seed=72, n_files=3)
    case.source.add_all(case.files)
    case.run({PROVIDER_CLASS_CONF: BUILTIN_PROVIDERS["hdfs"]})
    doc = _inspect(capsys, case.checkpoint)
    assert doc["provider"] == BUILTIN_PROVIDERS["hdfs"] and doc["stores"]
    for store in doc["stores"]:
        files = os.listdir(os.path.join(case.checkpoint, "state", "0", str(store["partitionId"])))
        versions = sorted({int(n.split(".")[0]) for n in files if n.endswith((".delta", ".snapshot"))})
        assert [v["version"] for v in store["versions"]] == versions
