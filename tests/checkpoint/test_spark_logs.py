from sparkstate.checkpoint.spark_logs import read_operator_metadata, rewrite_operator_partitions
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
