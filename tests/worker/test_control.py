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
    def get(self, handle):
        return _Store()


def test_commit_carries_the_full_metrics_so_the_shim_needs_no_second_call():
    control = WorkerControl(_Registry(), on_shutdown=lambda: None)
    result = json.loads(control.commit(1))
    assert result["version"] == 8
    # the shim reuses these only when they have the shape of metrics(): numKeys present
    assert result["metrics"] == json.loads(control.metrics(1))
    assert result["metrics"]["numKeys"] == 42
