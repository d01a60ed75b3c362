"""Model test: a Store behaves like a dict with versioned snapshots, across commits, aborts, retried
versions, fresh instances and retention."""
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sparkstate.engine import Store
from sparkstate.engine.arrow_files import KIND_FULL, read
from sparkstate.storage.local import local_path
from sparkstate.errors import VersionNotFoundError

from .conftest import make_spec

KEYS = st.binary(min_size=0, max_size=3).map(lambda b: b"\x00\x00\x00\x01" + b)
PREFIXES = st.sampled_from([b"", b"\x00", b"\x00\x00\x00\x01", b"\x00\x00\x00\x01\x00", b"\x00\x00\x00\x01\xff"])
RETAIN = 3


class StoreModel(RuleBasedStateMachine):
    SETTINGS: dict = {}  # backend settings of the stores under test

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="sparkstate-model-")
        self.instances = 0
        self.store = self._new_store()
        self.committed: dict[int, dict[bytes, bytes]] = {0: {}}
        self.attempts: dict[int, list[dict[bytes, bytes]]] = {0: [{}]}  # every content a version had
        self.version = 0
        self.current: dict[bytes, bytes] = {}
        self.store.load(0)

    def _new_store(self) -> Store:
        self.instances += 1
        spec = make_spec(f"file:{self.dir}/ckpt", f"inst-{self.instances}", retain=RETAIN, **self.SETTINGS)
        return Store(spec, f"{self.dir}/local")

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _load(self, v: int) -> None:
        self.store.load(v)
        self.version, self.current = v, dict(self.committed[v])

    @rule(records=st.lists(st.tuples(KEYS, st.none() | st.binary(max_size=20)), max_size=20))
    def batch(self, records):
        self.store.apply_batch(records)
        for k, v in records:
            if v is None:
                self.current.pop(k, None)
            else:
                self.current[k] = v

    @rule(key=KEYS)
    def get(self, key):
        assert self.store.get(key) == self.current.get(key)

    @rule(prefix=PREFIXES, chunk=st.integers(1, 5))
    def scan_while_writing(self, prefix, chunk):
        cursor = self.store.open_cursor(prefix)
        expected = sorted((k, v) for k, v in self.current.items() if k.startswith(prefix))
        rows, done = [], False
        while not done:
            part, done = cursor.next_chunk(chunk, 1 << 20)
            rows += part
            if part:  # writes during the scan must not show up in it
                self.store.apply_batch([(part[0][0], None)])
                self.current.pop(part[0][0], None)
        assert rows == expected

    @rule()
    def commit(self):
        assert self.store.commit().version == self.version + 1
        self.version += 1
        # Re-committing a version that exists (a retry after loading an older version) replaces it: the
        # last attempt to commit a version is the one that counts.
        self.committed[self.version] = dict(self.current)
        self.attempts.setdefault(self.version, []).append(dict(self.current))
        self._load(self.version)

    @rule()
    def abort_and_reload(self):
        self.store.abort()
        self._load(self.version)

    @precondition(lambda self: self.version >= 1)
    @rule(data=st.data())
    def retry_older_version(self, data):
        v = data.draw(st.sampled_from(sorted(self.committed)))
        self._load(v)

    @rule()
    def fresh_instance(self):
        self.store.release()
        self.store = self._new_store()
        self._load(self.version)

    @rule()
    def cleanup(self):
        self.store.maintenance_cleanup()
        retained = sorted(v for v in self.committed if v > 0)[-RETAIN:]
        for v in list(self.committed):
            if v > 0 and v not in retained:
                del self.committed[v]
        if self.version not in self.committed:
            # our loaded version left the window: Spark would never be here; move on to the newest
            self._load(max(self.committed))

    @precondition(lambda self: len(self.committed) > 1)
    @rule(data=st.data())
    def every_retained_version_loads(self, data):
        v = data.draw(st.sampled_from(sorted(self.committed)))
        probe = self._new_store()
        try:
            probe.load(v)
            cursor = probe.open_cursor(b"")
            rows, _ = cursor.next_chunk(10_000, 1 << 30)
            assert dict(rows) == self.committed[v]
            assert probe.metrics().num_keys == len(self.committed[v])
        finally:
            probe.close()

    @invariant()
    def num_keys_exact(self):
        assert self.store.metrics().num_keys == len(self.current)


TestStoreModel = StoreModel.TestCase
TestStoreModel.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])


class RocksDBLoggedStoreModel(StoreModel):
    """The same model on the RocksDB backend flushing every third commit: the versions between are change
    logs on an older SST set, which restores, aborts (rewind) and new instances replay."""

    SETTINGS = {"backend": "rocksdb", "rocksdb_flush_every": 3}


TestRocksDBLoggedStoreModel = RocksDBLoggedStoreModel.TestCase
TestRocksDBLoggedStoreModel.settings = TestStoreModel.settings


class HeapStoreModel(StoreModel):
    """The same model on the heap backend, with a background full snapshot due after every delta, so
    snapshots are written while later batches write, commit, abort and reload older versions."""

    SETTINGS = {"backend": "heap", "heap_snapshot_every": 1, "heap_max_versions_in_memory": 2}

    @rule()
    def maintenance_snapshot(self):
        self.store.maintenance_snapshot()

    @rule()
    def background_snapshot_holds_exactly_its_version(self):
        backend = self.store._backend
        if backend is None:
            return
        assert backend.wait_for_background(30)
        result = backend.runner.last_result
        if result is None or result.version not in self.committed:
            return
        fm = self.store.file_manager
        path = local_path(fm.file_path(result.outcome.ref.remote))
        data = {k: v for keys, values in read(path, KIND_FULL, result.version, "test") for k, v in zip(keys, values)}
        # Exactly one committed content of its version (never a later write, never a lost entry); a version
        # committed again since keeps the snapshot of the attempt it was taken of, unreferenced.
        assert data in self.attempts[result.version]


TestHeapStoreModel = HeapStoreModel.TestCase
TestHeapStoreModel.settings = settings(max_examples=30, stateful_step_count=30, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])


class HeapDictStoreModel(HeapStoreModel):
    """The heap model on the other live layout (`heap.layout=dict`; the default is packed)."""

    SETTINGS = {**HeapStoreModel.SETTINGS, "heap_layout": "dict"}


TestHeapDictStoreModel = HeapDictStoreModel.TestCase
TestHeapDictStoreModel.settings = settings(max_examples=15, stateful_step_count=30, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])


def test_deleted_versions_are_reported(tmp_path):
    s = Store(make_spec(f"file:{tmp_path}/ckpt", retain=1), str(tmp_path / "local"))
    s.load(0)
    s.commit()
    s.load(1)
    s.commit()
    s.maintenance_cleanup()
    with pytest.raises(VersionNotFoundError):
        Store(make_spec(f"file:{tmp_path}/ckpt", "other", retain=1), str(tmp_path / "l2")).load(1)
    s.close()
