import json
import os

from sparkstate.checkpoint.spark_logs import (
    read_operator_metadata,
    rewrite_operator_partitions,
    unfinished_repartition,
)
from sparkstate.storage import fileio_for

METADATA = ('v1\n{"operatorInfo":{"operatorId":0,"operatorName":"symmetricHashJoin"},"stateStoreInfo":['
            '{"storeName":"left-keyToNumValues","numColsPrefixKey":0,"numPartitions":4},'
            '{"storeName":"left-keyWithIndexToValue","numColsPrefixKey":0,"numPartitions":4}]}')


def test_the_partition_count_of_every_store_is_rewritten_and_hadoops_stale_checksum_dropped(tmp_path):
    meta_dir = tmp_path / "state" / "0" / "_metadata"
    meta_dir.mkdir(parents=True)
    (meta_dir / "metadata").write_text(METADATA)
    (meta_dir / ".metadata.crc").write_bytes(b"crc of the old content")
    path = str(meta_dir / "metadata")
    rewrite_operator_partitions(fileio_for(path), path, 7)
    meta = read_operator_metadata(fileio_for(path), path)
    assert [(s.store_name, s.num_partitions) for s in meta.stores] == [
        ("left-keyToNumValues", 7), ("left-keyWithIndexToValue", 7)]
    assert meta.operator_name == "symmetricHashJoin" and not (meta_dir / ".metadata.crc").exists()
    assert (meta_dir / "metadata").read_text() == METADATA.replace('"numPartitions":4', '"numPartitions":7')


def _offsets(checkpoint: str, batch: int, partitions: int) -> None:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {"spark.sql.shuffle.partitions": str(partitions)}}
    os.makedirs(os.path.join(checkpoint, "offsets"), exist_ok=True)
    with open(os.path.join(checkpoint, "offsets", str(batch)), "w") as f:
        f.write("v1\n" + json.dumps(meta) + '\n{"logOffset":0}')


def _commit(checkpoint: str, batch: int) -> None:
    os.makedirs(os.path.join(checkpoint, "commits"), exist_ok=True)
    with open(os.path.join(checkpoint, "commits", str(batch)), "w") as f:
        f.write('v1\n{"nextBatchWatermarkMs":0}')


def test_an_uncommitted_repartition_batch_is_an_unfinished_rescale(tmp_path):
    ck = str(tmp_path)
    io = fileio_for(ck)
    for b in (0, 1):
        _offsets(ck, b, 4)
        _commit(ck, b)
    _offsets(ck, 2, 3)  # a rescale to 3 partitions logged its batch, then stopped
    assert unfinished_repartition(io, ck, 2) == 3
    assert unfinished_repartition(io, ck, 1) is None  # committed, same count as before
    assert unfinished_repartition(io, ck, 3) is None  # not logged
    _commit(ck, 2)
    assert unfinished_repartition(io, ck, 2) is None  # the rescale finished
    _offsets(ck, 3, 3)
    assert unfinished_repartition(io, ck, 3) is None  # an ordinary batch after it
    assert unfinished_repartition(io, str(tmp_path / "absent"), 1) is None
