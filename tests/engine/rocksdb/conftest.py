from __future__ import annotations

import pytest

from sparkstate.engine import Store

from ..conftest import apply_writes, contents, kv, make_spec


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


def commit_versions_from(store: Store, loaded: int, last: int, live: dict[bytes, bytes] | None = None,
                          rows_per_version: int = 50) -> dict[int, dict[bytes, bytes]]:
    """Commit versions loaded+1..`last` on `store`, which holds version `loaded` (`live`: its contents, else
    read), each overwriting some keys, adding new ones and removing one; the expected contents of each."""
    expected: dict[int, dict[bytes, bytes]] = {}
    live = dict(contents(store)) if live is None else live
    for v in range(loaded + 1, last + 1):
        writes: list[tuple[bytes, bytes | None]] = [kv(i, b"v%d" % v) for i in range(v * 10, v * 10 + rows_per_version)]
        if v > 1:
            writes.append((kv(v * 10 - 1)[0], None))
        store.apply_batch(writes)
        apply_writes(live, writes)
        store.commit()
        expected[v] = dict(live)
        store.load(v)
    return expected
