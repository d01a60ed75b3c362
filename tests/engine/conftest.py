from __future__ import annotations

import dataclasses

import pytest

from sparkstate.config import Settings
from sparkstate.engine import Store, StoreSpec


def make_spec(checkpoint: str, instance_id: str = "inst-1", retain: int = 100, **settings) -> StoreSpec:
    return StoreSpec(checkpoint_location=checkpoint, operator_id=0, partition_id=1, store_name="default",
                     instance_id=instance_id, query_run_id="run-1", key_schema_json="{}", value_schema_json="{}",
                     num_cols_prefix_key=0, num_partitions=4, min_versions_to_retain=retain,
                     settings=dataclasses.replace(Settings(), rocksdb_write_buffer_mb=1, rocksdb_block_cache_mb=1,
                                                  **settings))


@pytest.fixture
def new_store(tmp_path):
    """new_store(instance_id=..., fileio=..., retain=...) -> an unloaded Store on a shared checkpoint."""
    stores: list[Store] = []
    checkpoint = "file:" + str(tmp_path / "ckpt" / "state" / "0" / "1")

    def make(instance_id: str = "inst-1", fileio=None, retain: int = 100, local_root=None) -> Store:
        s = Store(make_spec(checkpoint, instance_id, retain), str(local_root or tmp_path / "local"), fileio=fileio)
        stores.append(s)
        return s
    make.checkpoint_dir = tmp_path / "ckpt" / "state" / "0" / "1" / "sparkstate"
    yield make
    for s in stores:
        s.close()


def contents(store: Store, prefix: bytes = b"") -> dict[bytes, bytes]:
    cursor = store.open_cursor(prefix)
    out: dict[bytes, bytes] = {}
    done = False
    while not done:
        rows, done = cursor.next_chunk(7, 1 << 20)
        out.update(rows)
    assert cursor.closed
    return out
