"""Heap restore: a chain read back (full snapshot, deltas with overwrites, removals and re-inserts) gives
exactly the committed contents, in both table layouts, whether or not the chain starts at a full snapshot."""
import random

import pytest

from sparkstate.config import HEAP_LAYOUTS

from ..conftest import contents, kv, settle

pytestmark = pytest.mark.parametrize("backend", ["heap"])


@pytest.mark.parametrize("layout", HEAP_LAYOUTS)
@pytest.mark.parametrize("snapshot_every", [3, 100])  # 100: a chain of deltas only
@pytest.mark.parametrize("sizes", ["fixed", "mixed"])  # the packed table's uniform and general layouts
def test_a_restored_chain_holds_every_committed_write(new_store, layout, snapshot_every, sizes):
    rnd = random.Random(f"{layout}{snapshot_every}{sizes}")
    s = new_store(heap_snapshot_every=snapshot_every, heap_layout=layout)
    s.load(0)
    model: dict[bytes, bytes] = {}
    for v in range(1, 8):
        writes = []
        for i in rnd.sample(range(400), 150):
            key = kv(i)[0]
            if key in model and rnd.random() < 0.3:
                writes.append((key, None))
                model.pop(key)
            else:
                value = b"%d-%d" % (v, i) * (1 if sizes == "fixed" else rnd.randrange(1, 4))
                value = value.ljust(12, b".")[:12] if sizes == "fixed" else value
                writes.append((key, value))
                model[key] = value
        s.apply_batch(writes)
        s.commit()
        s.load(v)
        settle(s)
        fresh = new_store(f"check-{v}", heap_snapshot_every=snapshot_every, heap_layout=layout)
        assert fresh.load(v).source == "checkpoint"
        assert contents(fresh) == model
        assert all(fresh.get(k) == val for k, val in model.items())
        assert fresh.get(kv(999)[0]) is None
