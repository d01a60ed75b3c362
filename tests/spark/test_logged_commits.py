"""Commits between flushes in a running query (`rocksdb.flushEveryVersions` > 1): Spark's maintenance
thread (every 2 s in the test session) writes an idle store's SST set, and so does a store reopened by
replaying change logs; later commits build on it, and the query's result stays what the batch computation
gives, across a restart."""
from __future__ import annotations

import os
import time

import pytest

from conftest import selected_provider
from spark_harness import PREFIX, AggregationCase, session_conf

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")

TRIGGER = "3 seconds"  # longer than the session's maintenance interval: stores sit idle between batches


def _run_files(case: AggregationCase, files: list, timeout_s: float = 120) -> None:
    """Start the query on a processing-time trigger, add `files` (one per batch), stop once all ran."""
    query = (case.writer().option("checkpointLocation", case.checkpoint).trigger(processingTime=TRIGGER)
             .start())
    try:
        case.source.add_all(files)
        deadline = time.time() + timeout_s
        while sum(1 for p in query.recentProgress if p["numInputRows"] > 0) < len(files):
            assert query.exception() is None, query.exception()
            assert time.time() < deadline, "the query did not take every file in time"
            time.sleep(0.5)
    finally:
        query.stop()


def _built_on_sst_sets(case: AggregationCase) -> int:
    """Versions committed as change logs on a newer SST set than the version before them, which held
    change logs too: what only an SST set written in the background makes."""
    from sparkstate.checkpoint import Manifest
    from sparkstate.engine.rocksdb.snapshot import CommittedFiles

    built = 0
    for store_dir in case.store_dirs():
        manifests = os.path.join(store_dir, "manifests")
        logs: dict[int, list[int]] = {}
        for name in os.listdir(manifests):
            if name.endswith(".manifest") and name.split(".")[0].isdigit():
                with open(os.path.join(manifests, name), "rb") as f:
                    manifest = Manifest.from_bytes(f.read(), name)
                logs[manifest.version] = [v for v, _ in CommittedFiles.of(manifest).logs]
        built += sum(1 for v, own in logs.items() if own and logs.get(v - 1) and own[0] > logs[v - 1][0])
    return built


@pytest.mark.slow  # 16 batches three seconds apart
def test_commits_build_on_the_sst_sets_maintenance_writes(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=83, n_files=16, per_file=30)
    with session_conf(spark, {PREFIX + "backend": "rocksdb", PREFIX + "rocksdb.flushEveryVersions": "4"}):
        _run_files(case, case.files[:8])
        _run_files(case, case.files[8:])  # a restart from the checkpoint
    case.assert_matches_batch()
    assert _built_on_sst_sets(case) > 0


def test_a_restart_that_replays_change_logs_writes_the_sst_sets_its_next_commits_build_on(spark, tmp_path):
    """Four change logs per store at the restart, fewer than maintenance waits for (half of the default
    20): the reopened stores replay them and write their SST sets before their first write."""
    case = AggregationCase(spark, tmp_path, seed=89, n_files=8, per_file=40)
    with session_conf(spark, {PREFIX + "backend": "rocksdb"}):
        case.source.add_all(case.files[:5])
        case.run()
        assert _built_on_sst_sets(case) == 0
        case.source.add_all(case.files[5:])
        case.run()  # a new run of the query: its stores open from the checkpoint
    case.assert_matches_batch()
    assert _built_on_sst_sets(case) > 0
