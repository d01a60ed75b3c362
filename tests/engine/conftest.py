from __future__ import annotations

import dataclasses
import glob
import os

import pytest

from sparkstate.config import Settings
from sparkstate.engine import Store, StoreSpec
from sparkstate.keygroups import storage_key


# Variants of a backend under their own name: "rocksdb" commits as change logs between flushes (the default
# rocksdb.flushEveryVersions), "rocksdb-logged" flushes every third version, so that versions built on a flush
# come often, "rocksdb-mapped" flushes at every commit and reads its uncompressed SST files through memory maps.
VARIANT_SETTINGS = {"rocksdb-logged": {"backend": "rocksdb", "rocksdb_flush_every": 3},
                    "rocksdb-mapped": {"backend": "rocksdb", "rocksdb_mmap_reads": True,
                                       "rocksdb_compression": "none", "rocksdb_flush_every": 1}}


def backend_name(variant: str) -> str:
    """The backend a variant runs (what a manifest records): "rocksdb-logged" -> "rocksdb"."""
    return VARIANT_SETTINGS.get(variant, {}).get("backend", variant)


def make_spec(checkpoint: str, instance_id: str = "inst-1", retain: int = 100, **settings) -> StoreSpec:
    settings = {**settings, **VARIANT_SETTINGS.get(settings.get("backend"), {})}
    return StoreSpec(checkpoint_location=checkpoint, operator_id=0, partition_id=1, store_name="default",
                     instance_id=instance_id, query_run_id="run-1", key_schema_json="{}", value_schema_json="{}",
                     num_cols_prefix_key=0, num_partitions=4, min_versions_to_retain=retain,
                     settings=dataclasses.replace(Settings(), **{"rocksdb_write_buffer_mb": 1,
                                                                 "rocksdb_block_cache_mb": 1,
                                                                 # full snapshots at heap_snapshot_every
                                                                 "heap_snapshot_min_delta_percent": 0,
                                                                 **settings}))


BACKENDS = ("rocksdb", "heap", "rocksdb-logged", "rocksdb-mapped")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """The backend (or variant) under test; a backend-specific test overrides it with
    `@pytest.mark.parametrize("backend", ["rocksdb"])`."""
    return request.param


@pytest.fixture
def new_store(tmp_path, backend):
    """new_store(instance_id=..., fileio=..., retain=..., checkpoint_ids=...) -> an unloaded Store on a shared
    checkpoint (`checkpoint_ids`: Spark's checkpoint format v2)."""
    stores: list[Store] = []
    checkpoint = "file:" + str(tmp_path / "ckpt" / "state" / "0" / "1")

    def make(instance_id: str = "inst-1", fileio=None, retain: int = 100, local_root=None,
             checkpoint_ids: bool = False, **settings) -> Store:
        spec = make_spec(checkpoint, instance_id, retain, backend=backend, **settings)
        s = Store(dataclasses.replace(spec, checkpoint_ids=checkpoint_ids), str(local_root or tmp_path / "local"),
                  fileio=fileio)
        stores.append(s)
        return s
    make.checkpoint_dir = tmp_path / "ckpt" / "state" / "0" / "1" / "sparkstate"
    make.backend = backend_name(backend)
    yield make
    for s in stores:
        s.close()


def commit_keys(spec: StoreSpec, local: str, n: int) -> Store:
    """A store of `spec` under `local` that committed version 1 with keys kv(0..n-1), then closed."""
    store = Store(spec, local)
    try:
        store.load(0)
        store.apply_batch([kv(i) for i in range(n)])
        store.commit()
    finally:
        store.close()
    return store


def kv(i: int, tag: bytes = b"v") -> tuple[bytes, bytes]:
    """Entry i: a storage key (key group i % 7, then the key's bytes) and a value tagged `tag`."""
    return storage_key(i % 7, b"key-%06d" % i), tag + b"-%d" % i


def apply_writes(live: dict[bytes, bytes], writes) -> None:
    """What a store's apply_batch does to its contents, on a dict: a None value removes the key."""
    for key, value in writes:
        if value is None:
            live.pop(key, None)
        else:
            live[key] = value


def contents(store: Store, prefix: bytes = b"") -> dict[bytes, bytes]:
    cursor = store.open_cursor(prefix)
    out: dict[bytes, bytes] = {}
    done = False
    while not done:
        rows, done = cursor.next_chunk(7, 1 << 20)
        out.update(rows)
    assert cursor.closed
    return out


def settle(store: Store, timeout: float = 30.0) -> None:
    """Wait until the store's backend has no background snapshot in flight (a heap full snapshot, a
    RocksDB SST set written in maintenance)."""
    wait = getattr(store._backend, "wait_for_background", None)
    if wait is not None:
        assert wait(timeout), "background snapshot did not finish"


def maintain(store: Store, timeout: float = 30.0) -> None:
    """What Spark's maintenance thread does between batches: start the background snapshot that is due (a
    heap full snapshot, a RocksDB SST set between flushes), then wait for it (`settle`)."""
    store.maintenance_snapshot()
    settle(store, timeout)


def live_rocksdb_options(local: str) -> dict[str, str]:
    """The options RocksDB wrote to the OPTIONS file of the store's live database."""
    # The newest: a database writes a numbered OPTIONS file at each open and each change of its options.
    files = sorted(glob.glob(os.path.join(local, "**", "OPTIONS-*"), recursive=True),
                   key=lambda f: (os.path.getmtime(f), f))
    assert files, "no OPTIONS file: the test would prove nothing"
    with open(files[-1], encoding="utf-8") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)
