"""The fast paths of a rescale task: vectorized routing, SST-built RocksDB stores, chunked RocksDB scans.

Each is checked against the plain rule it replaces, on data that crosses chunk boundaries.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkstate.engine.store import Store
from sparkstate.rescaling import RescaleError, task
from sparkstate.rescaling.targets import pick, route_chunk

from . import fake_checkpoint as fake
from .test_rescale_offline import new_state, offline_rescale


def pmod_of(key: bytes, n: int) -> int:
    return int.from_bytes(key[:4], "big", signed=True) % n


def test_route_chunk_is_pmod_of_the_key_group():
    rng = random.Random(7)
    kgs = [rng.randrange(-2**31, 2**31) for _ in range(3000)] + [-2**31, 2**31 - 1, -1, 0, 1]
    old, n_old, n_new = 1, 3, 7
    rows = [(fake.kg_bytes(kg) + bytes(rng.randrange(0, 30)), b"v") for kg in kgs if kg % n_old == old]
    parts, sizes = route_chunk(rows, n_new, n_old, old, "store")
    assert parts.tolist() == [pmod_of(k, n_new) for k, _ in rows]
    assert sizes.tolist() == [len(k) + len(v) for k, v in rows]
    no_parts, no_sizes = route_chunk([], n_new, n_old, old, "store")
    assert no_parts.tolist() == [] and no_sizes.tolist() == []
    for p in range(n_new):
        for indexes in ([i for i, q in enumerate(parts) if q == p], [], [0], list(range(len(rows)))):
            assert list(pick(rows, np.array(indexes, dtype=np.int64))) == [rows[i] for i in indexes]


def test_route_chunk_refuses_an_entry_of_another_old_partition_or_without_key_group():
    rows = [(fake.kg_bytes(3) + b"a", b"v"), (fake.kg_bytes(-4) + b"b", b"v")]  # -4 % 3 = 2, not 0
    with pytest.raises(RescaleError, match="key group -4 belongs to partition 2 of 3"):
        route_chunk(rows, 8, 3, 0, "store")
    with pytest.raises(RescaleError, match="has no key group"):
        route_chunk([(b"abc", b"v")], 8, 3, 0, "store")


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
@pytest.mark.parametrize("old,new", [(4, 7), (3, 12), (4, 2)])
def test_rescale_with_many_small_chunks_moves_every_entry(tmp_path, monkeypatch, backend, old, new):
    """Chunks of 7 rows: most chunks feed several targets, and with gcd(old, new) < old a new RocksDB
    store is built from several overlapping SST files (one per old partition)."""
    monkeypatch.setattr(task, "CHUNK_ROWS", 7)
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), old, backend, local)
    results = offline_rescale(ck, new)
    assert sum(r["rows"] for r in results) == sum(len(e) for e in ck.state.values())
    assert sum(r["dataBytes"] for r in results) == sum(len(k) + len(v) for e in ck.state.values() for k, v in e.items())
    assert new_state(ck, new, 2, local) == ck.state


def test_rescaled_rocksdb_store_takes_new_writes(tmp_path):
    """A store built from ingested SST files is an ordinary RocksDB version: it reloads, takes writes and
    removes on top of the ingested data, and commits the next version."""
    local = str(tmp_path / "local")
    ck = fake.build(str(tmp_path / "ck"), 4, "rocksdb", local, operators=("agg",))
    offline_rescale(ck, 7)
    expected = {k: v for k, v in ck.state[(0, "default")].items() if pmod_of(k, 7) == 3}
    store = Store(fake.FakeCheckpoint(ck.path, 7, "rocksdb").spec(0, 3, "default", "after"), local_root=local)
    try:
        store.load(2)
        assert store.metrics().num_keys == len(expected)
        first, second = sorted(expected)[:2]
        fresh = fake.kg_bytes(3) + b"fresh"
        store.apply_batch([(first, None), (fresh, b"new"), (second, b"changed")])
        store.commit()
        store.load(3)
        del expected[first]
        expected.update({fresh: b"new", second: b"changed"})
        got, cursor, done = {}, store.open_cursor(b""), False
        while not done:
            rows, done = cursor.next_chunk(5, 1 << 20)
            got.update(rows)
        assert got == expected and store.metrics().num_keys == len(expected)
    finally:
        store.close()


def _reference_chunks(rows, max_rows, max_bytes):
    """The cursor contract: up to max_rows rows, at least one, stopping once max_bytes is reached."""
    out, i = [], 0
    while i < len(rows):
        chunk, size = [], 0
        while i < len(rows) and len(chunk) < max_rows and (not chunk or size < max_bytes):
            chunk.append(rows[i])
            size += len(rows[i][0]) + len(rows[i][1])
            i += 1
        out.append(chunk)
    return out


@pytest.fixture(scope="module")
def scan_store(tmp_path_factory):
    base = tmp_path_factory.mktemp("scan")
    ck = fake.FakeCheckpoint(str(base / "ck"), 1, "rocksdb")
    store = Store(ck.spec(0, 0, "default", "scan"), local_root=str(base / "local"))
    store.load(0)
    rng = random.Random(3)
    data = {}
    for i in range(3000):
        key = bytes([rng.choice(b"ab\xff")]) + bytes([rng.choice(b"xy")]) + i.to_bytes(3, "big")
        data[key] = b"v" * rng.choice([0, 1, 10, 300, 5000])
    store.apply_batch(list(data.items()))
    yield store, sorted(data.items())
    store.close()


@settings(max_examples=60, deadline=None)
@given(prefix=st.sampled_from([b"", b"a", b"ax", b"\xff", b"\xffy", b"b\x00", b"c", b"\xff\xff"]),
       max_rows=st.sampled_from([1, 2, 7, 63, 64, 65, 1000, 4096, 100000]),
       max_bytes=st.sampled_from([1, 50, 301, 5000, 20000, 1 << 20, 1 << 30]))
def test_rocksdb_cursor_chunks_follow_the_contract(scan_store, prefix, max_rows, max_bytes):
    store, rows = scan_store
    expected = _reference_chunks([r for r in rows if r[0].startswith(prefix)], max_rows, max_bytes)
    cursor = store.open_cursor(prefix)
    got, done = [], False
    while not done:
        chunk, done = cursor.next_chunk(max_rows, max_bytes)
        got.append(chunk)
        assert done == (len(got) >= len(expected))  # `done` is exact: no empty chunk after the last one
    assert got == (expected or [[]])
    assert cursor.closed
