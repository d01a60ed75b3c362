"""Rescaling without Spark: planning, the per-partition task and publishing on a synthetic checkpoint,
on both backends. The end-to-end runs (real queries, restart, compare with batch) are in
tests/spark/test_rescale.py."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from math import gcd

import pytest

from sparkstate.checkpoint import Manifest
from sparkstate.checkpoint.spark_logs import SparkLogs, is_single_partition_key, parse_state_schema
from sparkstate.errors import SparkCheckpointError, SparkstateError
from sparkstate.inspection import verify_checkpoint
from sparkstate.rescaling import RescaleError, build_plan
from sparkstate.rescaling.plan import Plan, store_spec_doc
from sparkstate.rescaling.runner import _publish, _remove_staging
from sparkstate.rescaling.task import rescale_partition, rescale_partitions
from sparkstate.rescaling.verify import verify_join_state, verify_routing
from sparkstate.rewrite.lock import RewriteLock
from sparkstate.rewrite.tool import RESCALE
from sparkstate.storage import fileio_for

from ..storage.instrumented import InjectedFault, instrument_local_storage
from . import fake_checkpoint as fake

BACKENDS = ["rocksdb", "heap"]


def offline_rescale(ck: fake.FakeCheckpoint, n: int) -> list[dict]:
    """What `sparkstate.rescale` does, with the Spark job replaced by a loop."""
    fio = fileio_for(ck.path)
    lock = RewriteLock(fio, ck.path, RESCALE)
    lock.acquire(f"rescale to {n} partitions")
    try:
        plan = build_plan(ck.path, n, ck.settings_conf)
        results, errors = [], []
        for group in plan.task_groups(2):  # as the Spark job does with 2 cores
            try:
                results.extend(rescale_partitions(plan.to_json(), group))
            except (RescaleError, OSError) as e:
                errors.append(e)
        if errors:
            raise errors[0]
        _publish(plan, fio, None, results)
        _remove_staging(fio, plan)
        return results
    finally:
        lock.release()


def new_state(ck: fake.FakeCheckpoint, n: int, version: int, local_root: str, as_stored: bool = False) -> dict:
    """(op, store) -> union of all new partitions' entries, checking each entry's partition."""
    out: dict = {}
    for (op, name) in ck.state:
        merged: dict[bytes, bytes] = {}
        parts = [0] if op in ck.single else range(n)
        for part in parts:
            entries = ck.read_store(op, part, name, version, local_root, as_stored)
            for key in entries:
                assert op in ck.single or int.from_bytes(key[:4], "big", signed=True) % n == part
            assert not (merged.keys() & entries.keys())
            merged.update(entries)
        out[(op, name)] = merged
    return out


def _manifest(ck: fake.FakeCheckpoint, partition: int, version: int) -> Manifest:
    path = os.path.join(ck.store_dir(0, partition, "default"), "sparkstate", "manifests", f"{version}.manifest")
    with open(path, "rb") as f:
        return Manifest.from_bytes(f.read(), path)


def snapshot_files(path: str) -> dict[str, bytes]:
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out


def visible_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """What a query reads: everything but unreferenced data files and our staging area."""
    return {k: v for k, v in files.items() if "/sparkstate/files/" not in "/" + k and not k.startswith("sparkstate-rescale")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("old,new", [(4, 7), (4, 2), (3, 12)])
def test_rescale_moves_every_entry_to_its_new_partition(tmp_path, backend, old, new):
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), old, backend, local)
    results = offline_rescale(ck, new)
    assert sorted(r["partition"] for r in results) == list(range(new))
    assert sum(r["rows"] for r in results) == sum(len(e) for e in ck.state.values())
    assert new_state(ck, new, 2, local) == ck.state
    # Spark's metadata: offsets/1 = offsets/0 with the new count, commits/1 = commits/0
    logs = SparkLogs(fileio_for(ck.path), ck.path)
    assert logs.read_offset(1).shuffle_partitions == new and logs.is_repartition_batch(1)
    first, second = logs.read_offset(0).raw.split("\n"), logs.read_offset(1).raw.split("\n")
    assert first[0] == second[0] and first[2:] == second[2:]
    assert json.loads(first[1])["batchTimestampMs"] == json.loads(second[1])["batchTimestampMs"]
    assert logs.read_commit(1).raw == logs.read_commit(0).raw
    assert not os.path.exists(os.path.join(ck.path, "sparkstate-rescale", "lock"))
    # old versions untouched, the join invariant holds in every new partition, every key routes home
    assert new_state(ck, old, 1, local) == ck.state
    plan = replace(build_plan(ck.path, old, ck.settings_conf), old_partitions=new)  # describes the new layout
    checked = verify_join_state(plan, new, 2)
    assert checked["left-keyWithIndexToValue"] == len(ck.state[(1, "left-keyWithIndexToValue")])
    assert verify_routing(plan, new, 2) > 0
    assert _manifest(ck, new - 1, 2).backend == backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_idle_state_stamps_move_with_their_entries(tmp_path, backend):
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), 4, backend, local, operators=("agg", "global"), settings={"ttl": "3650d"})
    stamped = new_state(ck, 4, 1, local, as_stored=True)
    assert all(len(v) == len(ck.state[op][k]) + 8 for op, entries in stamped.items() for k, v in entries.items())
    offline_rescale(ck, 7)
    assert new_state(ck, 7, 2, local, as_stored=True) == stamped  # every key keeps its last-write time
    assert new_state(ck, 7, 2, local) == ck.state
    for part in range(7):
        assert _manifest(ck, part, 2).ttl_stamps


def test_source_partitions_cover_exactly_the_possible_key_groups():
    for old, new in [(4, 7), (4, 2), (3, 12), (4, 8), (6, 4)]:
        plan = Plan(checkpoint="/x", old_partitions=old, new_partitions=new, last_committed_batch=0,
                    backend="rocksdb", settings_conf={}, stores=())
        store = fake_store(single=False)
        for kg in range(-500, 500):
            assert kg % old in plan.source_partitions(store, kg % new)
        for p in range(new):
            assert len(plan.source_partitions(store, p)) == old // gcd(old, new)


def fake_store(single: bool):
    from sparkstate.rescaling.plan import StorePlan
    return StorePlan(0, "stateStoreSave", "default", 0, single, "{}", "{}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_failure_midway_leaves_the_checkpoint_usable_and_a_rerun_finishes(tmp_path, backend, monkeypatch):
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), 4, backend, local)
    before = visible_files(snapshot_files(ck.path))
    io = instrument_local_storage(monkeypatch)
    io.fail("write_bytes_atomic", "*/done/3.json")  # new partition 3 is written, its done marker fails
    with pytest.raises(InjectedFault, match="done/3.json"):
        offline_rescale(ck, 7)
    io.heal()
    # nothing the query reads changed; the old state loads as before
    assert visible_files(snapshot_files(ck.path)) == before
    assert new_state(ck, 4, 1, local) == ck.state
    results = offline_rescale(ck, 7)
    assert sum(1 for r in results if r["skipped"]) == 6  # only partition 3 was redone
    assert [r["partition"] for r in results if not r["skipped"]] == [3]
    assert new_state(ck, 7, 2, local) == ck.state


@pytest.mark.parametrize("backend", ["rocksdb"])
def test_interrupted_publish_blocks_a_restart_and_a_rerun_finishes(tmp_path, backend, monkeypatch):
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), 4, backend, local)
    io = instrument_local_storage(monkeypatch)
    io.fail("create_exclusive", "*/manifests/*.manifest")  # the first store's new version: after offsets/1
    with pytest.raises(InjectedFault):
        offline_rescale(ck, 2)
    io.heal()
    logs = SparkLogs(fileio_for(ck.path), ck.path)
    # Spark's marker of an unfinished repartition: uncommitted batch 1 pinning another count
    assert logs.offset_batches() == [0, 1] and logs.commit_batches() == [0] and logs.is_repartition_batch(1)
    with pytest.raises(RescaleError, match="unfinished rescale to 2 partitions"):
        build_plan(ck.path, 5, ck.settings_conf)
    # `sparkstate verify` says how to finish it, where judging the stores would call the new ones damaged
    with pytest.raises(SparkstateError, match=r"unfinished rescale to 2 partitions.*sparkstate rescale --checkpoint "
                                              r".* --partitions 2"):
        verify_checkpoint(ck.path, fileio_for(ck.path), fileio_for(ck.path))
    assert build_plan(ck.path, 2, ck.settings_conf).resume_metadata
    results = offline_rescale(ck, 2)
    assert all(r["skipped"] for r in results)
    assert logs.commit_batches() == [0, 1]
    assert new_state(ck, 2, 2, local) == ck.state


def test_refusals_change_nothing(tmp_path):
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), 4, "rocksdb", local)
    before = snapshot_files(ck.path)
    with pytest.raises(RescaleError, match="already has 4 partitions"):
        build_plan(ck.path, 4, ck.settings_conf)
    with pytest.raises(RescaleError, match="positive integer"):
        build_plan(ck.path, 0, ck.settings_conf)
    # an uncommitted batch
    with open(os.path.join(ck.path, "offsets", "1"), "w") as f:
        f.write(open(os.path.join(ck.path, "offsets", "0")).read())
    with pytest.raises(RescaleError, match="started but never committed.*trigger\\(availableNow=True\\)"):
        build_plan(ck.path, 7, ck.settings_conf)
    os.remove(os.path.join(ck.path, "offsets", "1"))
    # checkpoint format v2 whose commit log does not match the state files
    commit = os.path.join(ck.path, "commits", "0")
    with open(commit, "w") as f:
        f.write('v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{}}')
    with pytest.raises(RescaleError, match="records no state ids of operator 0"):
        build_plan(ck.path, 7, ck.settings_conf)
    with open(commit, "w") as f:
        f.write('v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["0a-1"],["0a-2"],["0a-3"],["0a-4"]]}}')
    with pytest.raises(RescaleError,
                       match=r"partition 0: none of the attempts .* has files of version 1 in .*/manifests"):
        build_plan(ck.path, 7, ck.settings_conf)
    with open(commit, "w") as f:
        f.write('v3\n{}')
    with pytest.raises(SparkCheckpointError, match="format 'v3'"):
        build_plan(ck.path, 7, ck.settings_conf)
    with open(commit, "wb") as f:
        f.write(before["commits/0"])
    # a missing version in one old partition
    manifest = os.path.join(ck.store_dir(1, 2, "right-keyWithIndexToValue"), "sparkstate", "manifests", "1.manifest")
    os.rename(manifest, manifest + ".away")
    with pytest.raises(RescaleError, match="right-keyWithIndexToValue partition 2: version 1"):
        build_plan(ck.path, 7, ck.settings_conf)
    os.rename(manifest + ".away", manifest)
    assert snapshot_files(ck.path) == before


def test_refuses_other_providers_and_unknown_operators(tmp_path):
    local = str(tmp_path / "local")
    rocks = fake.build(str(tmp_path / "a"), 4, "rocksdb", local,
                       provider="org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    with pytest.raises(RescaleError, match="--to sparkstate --partitions N`.*_streamingCheckpointManager.repartition"):
        build_plan(rocks.path, 7, rocks.settings_conf)
    odd = fake.build(str(tmp_path / "b"), 4, "rocksdb", local, operators=("agg", "transformWithStateExec"))
    with pytest.raises(RescaleError, match="'transformWithStateExec'.*does not know"):
        build_plan(odd.path, 7, odd.settings_conf)


def test_state_schema_and_single_partition_keys():
    key, value = parse_state_schema(fake.schema_file(fake.AGG_KEY, fake.VALUE), "x")
    assert key == fake.AGG_KEY and value == fake.VALUE
    assert is_single_partition_key(fake.EMPTY_KEY, 0)
    assert is_single_partition_key({"fields": [{"name": "key", "type": "void"}]}, 0)
    assert not is_single_partition_key(fake.AGG_KEY, 0)


def test_single_partition_task_matches_the_grouped_one(tmp_path):
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), 4, "rocksdb", local, operators=("agg",))
    plan = build_plan(ck.path, 8, ck.settings_conf)
    one = rescale_partition(plan.to_json(), 5)
    assert one["rows"] == sum(1 for k in ck.state[(0, "default")] if int.from_bytes(k[:4], "big", signed=True) % 8 == 5)


def test_the_s3a_entries_reach_the_tasks_but_no_file_or_repr(tmp_path):
    """The Hadoop `fs.s3a.*` entries (which may hold credentials) go to the tasks' store specs, and stay out of
    the plan file written into the checkpoint's staging directory and out of logs."""
    ck = fake.build(str(tmp_path / "ck"), 3, "rocksdb", str(tmp_path / "local"))
    s3a = {"fs.s3a.endpoint": "http://127.0.0.1:9", "fs.s3a.secret.key": "do-not-write-me"}
    plan = build_plan(ck.path, 5, ck.settings_conf, hadoop_s3a=s3a)
    shipped = Plan.from_json(plan.to_json())
    assert shipped.hadoop_s3a == s3a
    assert store_spec_doc(shipped, shipped.stores[0], 0, "t")["hadoopS3a"] == s3a
    assert "do-not-write-me" not in plan.to_json(secrets=False) and "do-not-write-me" not in repr(plan)
