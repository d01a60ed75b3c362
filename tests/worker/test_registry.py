"""Store registries: a worker's own table, or one table shared by the embedded workers of a JVM."""
import pytest

from sparkstate.errors import UnknownHandleError
from sparkstate.worker import registry as registry_module
from sparkstate.worker.registry import StoreRegistry, StoreTable


class _Store:
    def __init__(self, spec, local_root=None):
        self.spec = spec
        self.closed = False

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_stores(monkeypatch):
    monkeypatch.setattr(registry_module, "Store", _Store)


def _spec(name):
    from types import SimpleNamespace
    return SimpleNamespace(name=name, settings=SimpleNamespace(local_dir=None))


def test_workers_sharing_a_table_reach_each_others_stores():
    table = StoreTable()
    first, second = StoreRegistry(table=table), StoreRegistry(table=table)
    a = first.open(_spec("a"))
    b = second.open(_spec("b"))
    assert a != b
    assert second.get(a).spec.name == "a" and second.get(a) is first.get(a)
    assert first.get(b).spec.name == "b"


def test_a_stopping_worker_closes_only_the_stores_it_opened():
    table = StoreTable()
    first, second = StoreRegistry(table=table), StoreRegistry(table=table)
    a, b = first.open(_spec("a")), second.open(_spec("b"))
    store_a, store_b = first.get(a), second.get(b)
    first.close_all()
    assert store_a.closed and not store_b.closed
    with pytest.raises(UnknownHandleError):
        second.get(a)
    assert second.get(b) is store_b


def test_separate_registries_do_not_share():
    first, second = StoreRegistry(), StoreRegistry()
    a = first.open(_spec("a"))
    with pytest.raises(UnknownHandleError):
        second.get(a)
