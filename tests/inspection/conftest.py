"""A checkpoint as a two-partition query leaves it, for the offline tools' tests (on both backends)."""
from __future__ import annotations

import dataclasses
import os

import pytest

from sparkstate.engine import Store

from ..engine.conftest import BACKENDS, kv, make_spec

PARTITIONS = 2
BATCHES = 4  # batches 0..3 ran: every store holds versions 1..4, and version 4 is the one a restart loads


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Every test of the offline tools runs on both backends."""
    return request.param


def open_store(ckpt: str, partition: int, instance: str, backend: str) -> Store:
    spec = dataclasses.replace(make_spec(f"file:{ckpt}/state/0/{partition}", instance, backend=backend),
                               partition_id=partition, num_partitions=PARTITIONS)
    return Store(spec, f"{ckpt}/../local")


def write_log(ckpt: str, kind: str, batch: int) -> None:
    os.makedirs(f"{ckpt}/{kind}", exist_ok=True)
    body = ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{"spark.sql.shuffle.partitions":"%d"}}\n'
            % PARTITIONS) if kind == "offsets" else 'v1\n{"nextBatchWatermarkMs":0}'
    with open(f"{ckpt}/{kind}/{batch}", "w") as f:
        f.write(body)


@pytest.fixture
def query(tmp_path, backend):
    """A checkpoint as a two-partition query leaves it after four batches."""
    ckpt = str(tmp_path / "ckpt")
    write_sample_checkpoint(ckpt, backend)
    return ckpt


def write_sample_checkpoint(ckpt: str, backend: str) -> None:
    """The `query` fixture's checkpoint at `ckpt` (scripts/render_inspect_page.sh --sample draws it too)."""
    for p in range(PARTITIONS):
        store = open_store(ckpt, p, f"w{p}", backend)
        for batch in range(BATCHES):
            store.load(batch)
            store.apply_batch([kv(100 * batch + 10 * p + i) for i in range(10)])
            store.commit()
        store.close()
    for batch in range(BATCHES):
        write_log(ckpt, "offsets", batch)
        write_log(ckpt, "commits", batch)
