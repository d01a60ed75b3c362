"""Store registries: a worker's own table, or one table shared by the embedded workers of a JVM."""
import pytest

from sparkstate.errors import UnknownHandleError
from sparkstate.worker import registry as registry_module
from sparkstate.worker.registry import StoreRegistry, StoreTable


class _Store:
    def __init__(self, spec, local_root=None, partners=None):
        self.spec = spec
        self.partners = partners
        self.closed = False

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_stores(monkeypatch):
    monkeypatch.setattr(registry_module, "Store", _Store)


def _spec(name, partition=0, store_name="default"):
    from types import SimpleNamespace
    return SimpleNamespace(name=name, store_name=store_name, settings=SimpleNamespace(local_dir=None),
                           same_partition=lambda other: other.partition == partition, partition=partition)


def test_a_store_finds_its_partners_in_every_registry_of_the_table():
    """A join's values store asks its side's count store (engine/join_expiry.py): same partition, by name."""
    table = StoreTable()
    first, second = StoreRegistry(table=table), StoreRegistry(table=table)
    values = first.get(first.open(_spec("values", 3, "left-keyWithIndexToValue")))
    counts = second.get(second.open(_spec("counts", 3, "left-keyToNumValues")))
    first.open(_spec("other partition", 4, "left-keyToNumValues"))
    assert values.partners(values.spec, "left-keyToNumValues") == [counts]
    assert values.partners(values.spec, "right-keyToNumValues") == []


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
