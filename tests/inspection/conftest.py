"""A checkpoint as a two-partition query leaves it, for the offline tools' tests (on both backends)."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from sparkstate.config import PROVIDER_CLASS
from sparkstate.engine import Store

from ..engine.conftest import BACKENDS, kv, make_spec

PARTITIONS = 2
BATCHES = 4  # batches 0..3 ran: every store holds versions 1..4, and version 4 is the one a restart loads


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Every test of the offline tools runs on both backends."""
    return request.param


def open_store(ckpt: str, partition: int, instance: str, backend: str, **settings) -> Store:
    spec = dataclasses.replace(make_spec(f"file:{ckpt}/state/0/{partition}", instance, backend=backend, **settings),
                               partition_id=partition, num_partitions=PARTITIONS)
    return Store(spec, f"{ckpt}/../local")


def write_log(ckpt: str, kind: str, batch: int) -> None:
    os.makedirs(f"{ckpt}/{kind}", exist_ok=True)
    body = ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{"spark.sql.shuffle.partitions":"%d"}}\n'
            % PARTITIONS) if kind == "offsets" else 'v1\n{"nextBatchWatermarkMs":0}'
    with open(f"{ckpt}/{kind}/{batch}", "w") as f:
        f.write(body)


SPARK_HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def migrate_out_by_hand(ckpt: str) -> int:
    """What `sparkstate migrate --to hdfs` and two more batches leave in the sample checkpoint: batch BATCHES
    (the migration) and the two after it pin Spark's HDFS provider, whose files hold versions BATCHES+2..;
    sparkstate's stores stay at version BATCHES. Returns the newest committed batch."""
    last = BATCHES + 2
    for batch in range(last + 1):
        for kind in ("offsets", "commits"):
            write_log(ckpt, kind, batch)
        path = f"{ckpt}/offsets/{batch}"
        with open(path) as f:
            version_line, meta, *rest = f.read().split("\n")
        entry = json.loads(meta)
        entry["conf"]["spark.sql.streaming.stateStore.providerClass"] = SPARK_HDFS if batch >= BATCHES else PROVIDER_CLASS
        with open(path, "w") as f:
            f.write("\n".join([version_line, json.dumps(entry), *rest]))
    for p in range(PARTITIONS):
        os.makedirs(f"{ckpt}/state/0/{p}", exist_ok=True)
        for v in range(BATCHES + 1, last + 2):
            with open(f"{ckpt}/state/0/{p}/{v}.{'snapshot' if v == BATCHES + 1 else 'delta'}", "wb") as f:
                f.write(b"x" * (100 + v))
    return last


def pin_batch(ckpt: str, batch: int, partitions: int | None = None, provider: str | None = None) -> None:
    """Offset log entry `batch` as batch 3's with another partition count or provider."""
    with open(f"{ckpt}/offsets/{BATCHES - 1}") as f:
        version_line, meta, *rest = f.read().split("\n")
    entry = json.loads(meta)
    if partitions is not None:
        entry["conf"]["spark.sql.shuffle.partitions"] = str(partitions)
    if provider is not None:
        entry["conf"]["spark.sql.streaming.stateStore.providerClass"] = provider
    with open(f"{ckpt}/offsets/{batch}", "w") as f:
        f.write("\n".join([version_line, json.dumps(entry), *rest]))


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


@dataclasses.dataclass
class V2Checkpoint:
    """A checkpoint under Spark's format v2 where version 3 of partition 1 has two commit attempts: the one
    the commit log recorded (`recorded`, 30 keys) and a zombie's published after it (`zombie`, 35 keys),
    so that `3.manifest` is the zombie's."""
    path: str
    recorded: str
    zombie: str


def write_v2_checkpoint(ckpt: str, backend: str) -> V2Checkpoint:
    ids: list[list[str]] = [[] for _ in range(3)]  # per batch: the recorded attempt of each partition
    for p in range(PARTITIONS):
        store = _open_v2(ckpt, p, f"w{p}", backend)
        previous = None
        for batch in range(3):
            store.load(batch, previous)
            store.apply_batch([kv(100 * batch + 10 * p + i) for i in range(10)])
            previous = store.commit().checkpoint_id
            ids[batch].append(previous)
        store.close()
    zombie = _open_v2(ckpt, 1, "zombie", backend)
    zombie.load(2, ids[1][1])
    zombie.apply_batch([kv(900 + i, b"zombie") for i in range(15)])
    zombie_id = zombie.commit().checkpoint_id
    zombie.close()
    os.makedirs(f"{ckpt}/commits", exist_ok=True)
    for batch in range(3):
        write_log(ckpt, "offsets", batch)
        recorded = ",".join(f"[{json.dumps(i)}]" for i in ids[batch])
        with open(f"{ckpt}/commits/{batch}", "w") as f:
            f.write('v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[%s]}}' % recorded)
    return V2Checkpoint(ckpt, ids[2][1], zombie_id)


def _open_v2(ckpt: str, partition: int, instance: str, backend: str) -> Store:
    spec = dataclasses.replace(make_spec(f"file:{ckpt}/state/0/{partition}", instance, backend=backend),
                               partition_id=partition, num_partitions=PARTITIONS, checkpoint_ids=True)
    return Store(spec, f"{ckpt}/../local")
