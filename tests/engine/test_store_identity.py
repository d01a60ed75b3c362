"""A store loads only its own state: manifests name their store, and restored keys must route here."""
from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from sparkstate.checkpoint import Manifest
from sparkstate.engine import Store
from sparkstate.errors import WrongStoreError
from sparkstate.keygroups import storage_key

from .conftest import make_spec

NUM_PARTITIONS = 4


def _spec(root: str, partition: int, instance: str, routed: bool = True, **settings):
    location = f"file:{root}/state/0/{partition}"
    return dataclasses.replace(make_spec(location, instance, **settings), partition_id=partition,
                               num_partitions=NUM_PARTITIONS, key_groups_route=routed)


def _routed_rows(partition: int, n: int = 40) -> list[tuple[bytes, bytes]]:
    """Keys whose key group routes them to `partition` of NUM_PARTITIONS."""
    return [(storage_key(NUM_PARTITIONS * i + partition, b"k%d" % i), b"v%d" % i) for i in range(n)]


def _commit(spec, local: str, rows) -> None:
    store = Store(spec, local)
    try:
        store.load(0)
        store.apply_batch(rows)
        store.commit()
    finally:
        store.close()


def _load(spec, local: str, version: int = 1) -> Store:
    store = Store(spec, local)
    try:
        store.load(version)
    except BaseException:
        store.close()
        raise
    return store


def _drop_identity(store_dir: str, version: int = 1) -> None:
    """Rewrite a manifest as one that names no store (as a checkpoint written without identities)."""
    path = os.path.join(store_dir, "sparkstate", "manifests", f"{version}.manifest")
    with open(path, "rb") as f:
        manifest = Manifest.from_bytes(f.read(), path)
    with open(path, "wb") as f:
        f.write(dataclasses.replace(manifest, store=None).to_bytes())


def test_every_manifest_names_its_store(tmp_path, backend):
    spec = _spec(str(tmp_path / "q"), 1, "w", backend=backend)
    _commit(spec, str(tmp_path / "local"), _routed_rows(1))
    store = _load(spec, str(tmp_path / "local"))
    try:
        manifest = store.file_manager.read_manifest(1)
    finally:
        store.close()
    assert manifest.store == spec.identity()
    assert (manifest.store.operator_id, manifest.store.partition_id, manifest.store.store_name) == (0, 1, "default")


def test_swapped_partition_directories_are_refused(tmp_path, backend):
    root, local = str(tmp_path / "q"), str(tmp_path / "local")
    for p in (1, 2):
        _commit(_spec(root, p, f"w{p}", backend=backend), local, _routed_rows(p))
    one, two = f"{root}/state/0/1", f"{root}/state/0/2"
    os.rename(one, one + ".tmp")
    os.rename(two, one)
    os.rename(one + ".tmp", two)
    for p, other in ((1, 2), (2, 1)):
        with pytest.raises(WrongStoreError, match=f"partition {other}, store default, not to this store") as e:
            _load(_spec(root, p, f"r{p}", backend=backend), local)
        assert "sparkstate verify" in str(e.value)


def test_misplaced_keys_are_refused_when_the_manifest_names_no_store(tmp_path, backend):
    """Checkpoints whose manifests carry no identity: the key groups of the restored keys still tell."""
    root, local = str(tmp_path / "q"), str(tmp_path / "local")
    _commit(_spec(root, 2, "w", backend=backend), local, _routed_rows(2))
    _drop_identity(f"{root}/state/0/2")
    shutil.move(f"{root}/state/0/2", f"{root}/state/0/1")
    with pytest.raises(WrongStoreError, match="holds keys of partition 2 of 4, not of partition 1"):
        _load(_spec(root, 1, "r", backend=backend), local)
    # A store whose keys carry no routing (a global aggregate's single partition) is not checked.
    store = _load(_spec(root, 1, "r2", routed=False, backend=backend), local)
    assert store.metrics().num_keys == 40
    store.close()


def test_own_state_without_identity_loads(tmp_path, backend):
    root, local = str(tmp_path / "q"), str(tmp_path / "local")
    _commit(_spec(root, 1, "w", backend=backend), local, _routed_rows(1))
    _drop_identity(f"{root}/state/0/1")
    store = _load(_spec(root, 1, "r", backend=backend), local)
    assert store.metrics().num_keys == 40
    store.close()


def test_a_moved_checkpoint_loads_but_another_querys_state_location_is_refused(tmp_path, backend):
    local = str(tmp_path / "local")
    _commit(_spec(str(tmp_path / "a"), 1, "w", backend=backend), local, _routed_rows(1))
    shutil.move(str(tmp_path / "a"), str(tmp_path / "b"))  # the whole checkpoint moved: same store
    store = _load(_spec(str(tmp_path / "b"), 1, "r", backend=backend), local)
    assert store.metrics().num_keys == 40
    store.close()

    # Under a shared stateLocation the query key addresses the files: another key means another query.
    shared = str(tmp_path / "shared")
    a = _spec(str(tmp_path / "qa"), 1, "wa", backend=backend, state_location=shared)
    b = _spec(str(tmp_path / "qb"), 1, "rb", backend=backend, state_location=shared)
    _commit(a, local, _routed_rows(1))
    os.makedirs(os.path.dirname(b.state_location()), exist_ok=True)
    shutil.copytree(a.state_location(), b.state_location())
    with pytest.raises(WrongStoreError, match="belongs to query qa-"):
        _load(b, local)


def _offset_log(root: str, batch: int, partitions: int) -> None:
    """A Spark offset log entry pinning `partitions` (the parts the key check reads)."""
    os.makedirs(f"{root}/offsets", exist_ok=True)
    with open(f"{root}/offsets/{batch}", "w") as f:
        f.write('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{"spark.sql.shuffle.partitions":"%d"}}\n'
                % partitions)


def test_keys_are_checked_with_the_partition_count_the_offset_log_records(tmp_path, backend):
    """A reader whose session sets another spark.sql.shuffle.partitions than the checkpoint's (Spark's state
    data source does not pin it) loads the store: the keys route here under the count Spark used."""
    root, local = str(tmp_path / "q"), str(tmp_path / "local")
    _commit(_spec(root, 2, "w", backend=backend), local, _routed_rows(2))
    _offset_log(root, 0, NUM_PARTITIONS)
    reader = dataclasses.replace(_spec(root, 2, "r", backend=backend), num_partitions=NUM_PARTITIONS + 3)
    store = _load(reader, local)
    assert store.metrics().num_keys == 40
    store.close()
    # Keys of another partition under the recorded count are still refused, naming the session's count.
    shutil.move(f"{root}/state/0/2", f"{root}/state/0/1")
    _drop_identity(f"{root}/state/0/1")
    with pytest.raises(WrongStoreError, match=f"of {NUM_PARTITIONS + 3}, not of partition 1"):
        _load(dataclasses.replace(_spec(root, 1, "r1", backend=backend), num_partitions=NUM_PARTITIONS + 3), local)
