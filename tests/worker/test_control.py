import json
from types import SimpleNamespace

from sparkstate.worker.control import WorkerControl


class _Store:
    def commit(self):
        return SimpleNamespace(version=8, metrics={"sparkstateCommitMs": 5}, checkpoint_id=None,
                               base_checkpoint_id=None)

    def metrics(self):
        return SimpleNamespace(num_keys=42, memory_used_bytes=1024, custom={"sparkstateCommitMs": 5})


class _Registry:
    def __init__(self, stores: int = 1):
        self.stores = stores

    def get(self, handle):
        return _Store()

    def store_count(self):
        return self.stores


def test_commit_carries_the_full_metrics_so_the_shim_needs_no_second_call():
    control = WorkerControl(_Registry(), on_shutdown=lambda: None)
    result = json.loads(control.commit(1))
    assert result["version"] == 8
    # the shim reuses these only when they have the shape of metrics(): numKeys present
    later = json.loads(control.metrics(1))
    for doc in (result["metrics"], later):  # the process's resident memory may move between the two calls
        assert doc["custom"].pop("sparkstateWorkerRssBytes") > 0
    assert result["metrics"] == later
    assert result["metrics"]["numKeys"] == 42


def test_each_store_reports_its_share_of_the_worker_processes_resident_memory():
    one = json.loads(WorkerControl(_Registry(1), on_shutdown=lambda: None).metrics(1))["custom"]
    four = json.loads(WorkerControl(_Registry(4), on_shutdown=lambda: None).metrics(1))["custom"]
    assert one["sparkstateWorkerRssBytes"] > 1 << 20  # this test process's resident memory
    assert abs(four["sparkstateWorkerRssBytes"] * 4 - one["sparkstateWorkerRssBytes"]) < 1 << 20
    assert one["sparkstateCommitMs"] == 5  # the store's own metrics are kept


def test_an_embedded_worker_reports_no_process_memory_of_its_own():
    control = WorkerControl(_Registry(1), on_shutdown=lambda: None, own_process=False)
    assert json.loads(control.metrics(1))["custom"]["sparkstateWorkerRssBytes"] == 0
