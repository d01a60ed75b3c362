from __future__ import annotations

import pytest

from sparkstate.engine import Store

from ..conftest import make_spec


@pytest.fixture
def open_store(tmp_path):
    """open_store(name="store", **settings) -> (store, its local directory): a RocksDB store (unless
    `settings` name another backend) of its own instance and directory, on the checkpoint of `name`;
    every store is closed after the test."""
    stores: list[Store] = []

    def _open(name: str = "store", **settings) -> tuple[Store, str]:
        n = len(stores)
        local = str(tmp_path / name / "local" / str(n))
        spec = make_spec("file:" + str(tmp_path / name / "ckpt"), f"inst-{n}", **{"backend": "rocksdb", **settings})
        store = Store(spec, local)
        stores.append(store)
        return store, local

    yield _open
    for store in stores:
        store.close()
