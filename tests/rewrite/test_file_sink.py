"""The file sink's own batch log and the batches rescale and migrate add (no Spark: logs written by hand)."""
import json
import os

import pytest

from sparkstate.errors import MigrationError, RescaleError, SparkCheckpointError
from sparkstate.rewrite.file_sink import (
    DEFAULT_COMPACT_INTERVAL,
    check_file_sink,
    compact_interval,
    compact_interval_setting,
    file_sink_rollback_entries,
    record_empty_batch,
    repair_file_sink,
    sink_log_batches,
)
from sparkstate.rewrite.tool import MIGRATION, RESCALE, ROLLBACK
from sparkstate.storage import fileio_for


def _checkpoint(root, partitions_per_batch: list[int], committed: int, providers: list[str] | None = None) -> str:
    """Offset and commit logs by hand: batch i pins partitions_per_batch[i] (and providers[i])."""
    ckpt = root / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    for batch, n in enumerate(partitions_per_batch):
        conf = {"spark.sql.shuffle.partitions": str(n)}
        if providers:
            conf["spark.sql.streaming.stateStore.providerClass"] = providers[batch]
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": conf}
        (ckpt / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{{\"logOffset\":{batch}}}")
        if batch <= committed:
            (ckpt / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return str(ckpt)


def _sink(root, batches: list[str]) -> str:
    log = root / "out" / "_spark_metadata"
    log.mkdir(parents=True)
    for name in batches:
        (log / name).write_text('v1\n{"path":"file:/x/part-0.parquet","size":1}')
    return str(root / "out")


def _repair(ckpt: str, sink: str, default_interval: int = DEFAULT_COMPACT_INTERVAL) -> list[int]:
    return repair_file_sink(ckpt, sink, default_interval, RESCALE)


def test_repair_adds_the_empty_entries_of_committed_rescale_batches_only(tmp_path):
    # batches 0-5 at 4 partitions, 6 = a rescale to 8, 7-8 ran after it; 9 rescales again but is uncommitted
    ckpt = _checkpoint(tmp_path, [4] * 6 + [8, 8, 8, 2], committed=8)
    sink = _sink(tmp_path, ["0", "1", "2", "3", "4.compact", "5", "7", "8"])  # compacts every 5 batches
    assert _repair(ckpt, sink) == [6]
    assert (tmp_path / "out" / "_spark_metadata" / "6").read_bytes() == b"v1"
    assert _repair(ckpt, sink) == []  # idempotent


def test_repair_adds_the_entry_of_a_migration_batch_on_a_compaction_id(tmp_path):
    """Batch 4 switched the provider (`sparkstate migrate`) and batches 5-6 ran after it; with compactInterval
    5 the migration batch is a compaction id, so its entry is `4.compact`: without it Spark's reader of the
    output fails, and so does the sink's next compaction."""
    providers = ["io.sparkstate.PythonStateStoreProvider"] * 4 + ["org.example.RocksDBStateStoreProvider"] * 3
    ckpt = _checkpoint(tmp_path, [4] * 7, committed=6, providers=providers)
    sink = _sink(tmp_path, ["0", "1", "2", "3", "5", "6"])
    assert _repair(ckpt, sink, default_interval=5) == [4]
    log = tmp_path / "out" / "_spark_metadata"
    assert (log / "4.compact").read_text().count('"path"') == 4 and not (log / "4").exists()
    assert _repair(ckpt, sink, default_interval=5) == []
    # the same logs without a provider switch: nothing to add
    other = tmp_path / "other"
    other.mkdir()
    assert _repair(_checkpoint(other, [4] * 7, committed=6, providers=[providers[0]] * 7),
                            _sink(other, ["0", "1", "2", "3", "5", "6"]), default_interval=5) == []


def test_a_rescale_batch_on_a_compaction_id_gets_the_compaction(tmp_path):
    """With compactInterval 2, batch 3 is a compaction: `3.compact` lists the files of 1.compact and 2."""
    sink = _sink(tmp_path, ["0", "1.compact", "2"])
    log = tmp_path / "out" / "_spark_metadata"
    (log / "1.compact").write_text('v1\n{"path":"a"}\n{"path":"b"}')
    (log / "2").write_text('v1\n{"path":"c"}')
    record_empty_batch(fileio_for(sink), sink, 3, 99, RESCALE)  # the interval comes from the log
    assert (log / "3.compact").read_text() == 'v1\n{"path":"a"}\n{"path":"b"}\n{"path":"c"}'
    assert not (log / "3").exists()
    record_empty_batch(fileio_for(sink), sink, 3, 99, RESCALE)  # again, after an interrupted run: the same entry


@pytest.mark.parametrize("compactions,default,expected", [
    ([], 10, 10), ([1], 10, 2), ([9], 10, 10), ([3, 7], 10, 4), ([29], 10, 10), ([29], 3, 3), ([23], 5, 6)])
def test_the_compaction_interval_is_decided_like_spark(tmp_path, compactions, default, expected):
    sink = _sink(tmp_path, [f"{c}.compact" for c in compactions] + ["0"])
    assert compact_interval(fileio_for(sink), sink, default, RESCALE) == expected


def test_a_rescale_batch_folded_into_a_compaction_is_left_alone(tmp_path):
    ckpt = _checkpoint(tmp_path, [4, 8, 8, 8], committed=3)
    sink = _sink(tmp_path, ["0", "2", "3.compact"])
    assert _repair(ckpt, sink) == []


def test_an_entry_of_the_same_batch_that_lists_files_is_refused(tmp_path):
    sink = _sink(tmp_path, ["0", "1"])
    record_empty_batch(fileio_for(sink), sink, 2, DEFAULT_COMPACT_INTERVAL, RESCALE)
    record_empty_batch(fileio_for(sink), sink, 2, DEFAULT_COMPACT_INTERVAL, RESCALE)  # an interrupted run's: fine
    with pytest.raises(RescaleError, match="already exists with other files"):
        record_empty_batch(fileio_for(sink), sink, 1, DEFAULT_COMPACT_INTERVAL, RESCALE)


def test_the_sink_must_be_this_querys_output(tmp_path):
    sink = _sink(tmp_path, ["0", "1", "2"])
    check_file_sink(fileio_for(sink), sink, 2, RESCALE)
    with pytest.raises(RescaleError, match="ends with batch 2, but the query's last committed batch is 5"):
        check_file_sink(fileio_for(sink), sink, 5, RESCALE)
    with pytest.raises(RescaleError, match="not the output of a file sink"):
        check_file_sink(fileio_for(str(tmp_path)), str(tmp_path), 2, RESCALE)
    assert sink_log_batches(fileio_for(sink), sink, RESCALE) == ([0, 1, 2], [])
    os.rename(os.path.join(sink, "_spark_metadata", "1"), os.path.join(sink, "_spark_metadata", "1.compact"))
    assert sink_log_batches(fileio_for(sink), sink, RESCALE) == ([0, 1, 2], [1])


def test_each_tool_refuses_with_its_own_error(tmp_path):
    """The shared code raises the error of the tool it works for: a migration's refusal is a MigrationError,
    a roll-back's names one of Spark's files, neither is a rescale's."""
    with pytest.raises(MigrationError, match="invalid spark.sql.streaming.fileSink.log.compactInterval='0'"):
        compact_interval_setting("0", MIGRATION)
    sink = _sink(tmp_path, ["0", "1", "2"])
    with pytest.raises(MigrationError, match="ends with batch 2"):
        check_file_sink(fileio_for(sink), sink, 5, MIGRATION)
    with pytest.raises(SparkCheckpointError, match="ends with batch 2"):
        file_sink_rollback_entries(fileio_for(sink), sink, 1, 5, ROLLBACK)
