"""`sparkstate migrate`: a query that ran on one state store provider is stopped, migrated, restarted
unchanged and finishes on the other, with the result of the batch computation; refusals say why."""
from __future__ import annotations

import os

import pytest
from conftest import BUILTIN_PROVIDERS, selected_provider
from spark_harness import AggregationCase, session_conf

import sparkstate
from sparkstate.checkpoint.spark_logs import PROVIDER_CLASS_CONF, SparkLogs
from sparkstate.errors import MigrationError
from sparkstate.storage import fileio_for

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="needs the sparkstate jar")

PROVIDER_CLASSES = {**BUILTIN_PROVIDERS, "sparkstate": sparkstate.PROVIDER_CLASS}


def _pinned_provider(checkpoint: str) -> str:
    logs = SparkLogs(fileio_for(checkpoint), checkpoint)
    return logs.read_offset(logs.offset_batches()[-1]).conf[PROVIDER_CLASS_CONF]


def _run_on(case: AggregationCase, provider: str, backend: str = "rocksdb") -> None:
    """A run whose session names `provider`: a new checkpoint takes it, an existing one keeps its own."""
    case.run({PROVIDER_CLASS_CONF: PROVIDER_CLASSES[provider],
              "spark.sql.streaming.stateStore.sparkstate.backend": backend})


@pytest.mark.parametrize("source,target,backend", [
    ("hdfs", "sparkstate", "rocksdb"),
    ("rocksdb", "sparkstate", "heap"),
    ("sparkstate", "hdfs", None),
    ("sparkstate", "rocksdb", None),
])
def test_an_aggregation_moves_between_providers(spark, tmp_path, source, target, backend):
    case = AggregationCase(spark, tmp_path, seed=61, n_files=4)
    case.source.add_all(case.files[:2])
    _run_on(case, source)
    summary = sparkstate.migrate(spark, case.checkpoint, target, backend=backend)
    assert summary.rows == case.n_keys and _pinned_provider(case.checkpoint) == PROVIDER_CLASSES[target]
    case.source.add_all(case.files[2:])
    _run_on(case, source, backend or "rocksdb")  # the session still names the source: the checkpoint wins
    case.assert_matches_batch()
    assert _pinned_provider(case.checkpoint) == PROVIDER_CLASSES[target]


def test_a_round_trip_through_every_provider_is_exact(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=62, n_files=5)
    case.source.add_all(case.files[:1])
    _run_on(case, "hdfs")
    for i, (target, backend) in enumerate([("sparkstate", "rocksdb"), ("rocksdb", None), ("sparkstate", "heap")]):
        sparkstate.migrate(spark, case.checkpoint, target, backend=backend)
        case.source.add_all(case.files[i + 1:i + 2])
        _run_on(case, target, backend or "rocksdb")
    case.source.add_all(case.files[4:])
    _run_on(case, "sparkstate", "heap")
    case.assert_matches_batch()


def test_refusals_change_nothing(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=63, n_files=2)
    with pytest.raises(MigrationError, match="no offset log"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    case.source.add_all(case.files[:1])
    _run_on(case, "hdfs")
    with pytest.raises(MigrationError, match="already runs on hdfs"):
        sparkstate.migrate(spark, case.checkpoint, "hdfs")
    before = sorted(os.listdir(os.path.join(case.checkpoint, "offsets")))
    with open(os.path.join(case.checkpoint, "commits", "0")) as f:
        committed = f.read()
    with open(os.path.join(case.checkpoint, "commits", "0"), "w") as f:
        f.write(committed.replace("v1", "v2", 1))  # what checkpoint format version 2 writes
    with pytest.raises(MigrationError, match="format version 2"):
        sparkstate.migrate(spark, case.checkpoint, "sparkstate")
    with open(os.path.join(case.checkpoint, "commits", "0"), "w") as f:
        f.write(committed)
    assert sorted(os.listdir(os.path.join(case.checkpoint, "offsets"))) == before
    with session_conf(spark, {}):
        case.source.add_all(case.files[1:])
        _run_on(case, "hdfs")
    case.assert_matches_batch()
