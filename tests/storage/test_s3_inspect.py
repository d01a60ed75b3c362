"""`sparkstate inspect` on a query whose state lives in S3 (a real SeaweedFS server): Spark's logs local,
the stores under `--state-location s3://...`, read back with the engine's own `Store` as the truth."""
from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

from sparkstate.cli import main as cli_main
from sparkstate.engine import Store
from sparkstate.keygroups import key_group

from ..engine.conftest import BACKENDS, backend_name, contents, kv, make_spec
from ..inspection.conftest import write_log

PARTITIONS = 2
BATCHES = 3


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture()
def s3_query(seaweed, tmp_path, backend):
    """A two-partition query after three batches; partition 1 holds more keys than partition 0."""
    bucket = f"i-{uuid.uuid4().hex[:8]}"
    seaweed.create_bucket(bucket)
    ckpt, location = str(tmp_path / "ckpt"), f"s3://{bucket}/q"

    def open_store(partition: int, instance: str) -> Store:
        spec = make_spec(f"file:{ckpt}/state/0/{partition}", instance, backend=backend,
                         state_location=location)
        spec = dataclasses.replace(spec, partition_id=partition, num_partitions=PARTITIONS,
                                   hadoop_s3a=seaweed.s3a_conf())
        return Store(spec, str(tmp_path / "local"))

    for p in range(PARTITIONS):
        store = open_store(p, f"w{p}")
        try:
            for batch in range(BATCHES):
                store.load(batch)
                store.apply_batch([kv(1000 * p + 100 * batch + i) for i in range(5 + 5 * p)])
                store.commit()
        finally:
            store.close()
    for batch in range(BATCHES):
        write_log(ckpt, "offsets", batch)
        write_log(ckpt, "commits", batch)
    return ckpt, location, open_store


def test_inspect_reads_a_checkpoint_on_s3(s3_query, seaweed, backend, capsys, tmp_path):
    ckpt, location, open_store = s3_query
    conf = [f"--conf=spark.hadoop.{k}={v}" for k, v in seaweed.s3a_conf().items()]
    page = str(tmp_path / "state.html")
    code = cli_main(["inspect", "--checkpoint", ckpt, "--state-location", location, "--partitions", "3",
                     "--html", page, "--json", *conf])
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads(out)
    assert doc["backends"] == [backend_name(backend)] and doc["version"] == BATCHES
    assert doc["stateRoot"].startswith(location)
    assert seaweed.secret_key not in out

    truth: dict[int, dict[bytes, bytes]] = {}
    retained: dict[int, list[int]] = {}
    keys_by_version: dict[int, list[int]] = {}
    for p in range(PARTITIONS):
        store = open_store(p, f"truth{p}")
        try:
            retained[p] = store.file_manager.versions()
            keys_by_version[p] = []
            for v in retained[p]:
                store.load(v)
                keys_by_version[p].append(len(contents(store)))
            truth[p] = contents(store)  # the newest retained version, the one inspect shows
        finally:
            store.close()
    assert len(truth[1]) > len(truth[0]) > 0  # the partitions differ, so a swap would show

    stores = {s["partitionId"]: s for s in doc["stores"]}
    assert sorted(stores) == list(range(PARTITIONS))
    for p, entries in truth.items():
        s = stores[p]
        assert s["problem"] is None and s["backend"] == backend_name(backend)
        assert s["keys"] == len(entries)
        assert s["liveBytes"] == sum(len(k) + len(v) for k, v in entries.items())
        assert [v["version"] for v in s["versions"]] == retained[p]
        assert [v["keys"] for v in s["versions"]] == keys_by_version[p]
    assert doc["balance"][0]["keys"] == [len(truth[p]) for p in range(PARTITIONS)]
    groups = [key_group(k) for entries in truth.values() for k in entries]
    assert doc["predicted"][0]["keys"] == [sum(1 for g in groups if g % 3 == p) for p in range(3)]
    assert "<svg" in open(page, encoding="utf-8").read()
