"""rocksdb_checkpoint_files.py tells a RocksDB checkpoint's bytes apart by kind: flush output (level 0 of the
version that uploaded it), compaction output, change logs, manifests; and Spark's provider's by suffix."""
from __future__ import annotations

import os
import sys

from sparkstate.engine import Store

from ..engine.conftest import kv, make_spec, settle

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "bench"))
import rocksdb_checkpoint_files as rcf  # noqa: E402


def _write(tmp_path, versions: int, **settings) -> str:
    """A query checkpoint with one RocksDB store of `versions` versions; its directory."""
    checkpoint = tmp_path / "query"
    store = Store(make_spec("file:" + str(checkpoint / "state" / "0" / "1"), backend="rocksdb",
                            rocksdb_write_buffer_mb=1, **settings), str(tmp_path / "local"))
    try:
        store.load(0)
        for v in range(1, versions + 1):
            store.apply_batch([kv(i, b"v%d-" % v + b"x" * 40) for i in range(v * 7, 20_000, 3)])
            store.commit()
            store.load(v)
    finally:
        store.close()
    return str(checkpoint)


def test_every_flushed_commit_uploads_one_level_0_file_and_compactions_show_apart(tmp_path):
    flavour, t = rcf.tally_checkpoint(_write(tmp_path, 8, rocksdb_level0_trigger=4, rocksdb_flush_every=1), retain=100)
    assert flavour == "sparkstate" and t.versions == 8 and t.stores == 1
    assert t.files["sst flush"] == 8 and t.files["manifest"] == 8
    assert "private files" not in t.bytes  # a store that flushes at every commit embeds them
    assert t.files["sst compaction"] >= 1  # four level-0 files trigger a compaction, uploaded at a later commit
    assert "sst ?" not in t.bytes and "change log" not in t.bytes
    assert t.retained == sum(t.bytes.values())
    assert sum(sum(row.values()) for row in t.per_version.values()) == sum(t.bytes.values())


def test_commits_between_flushes_count_as_change_logs(tmp_path):
    flavour, t = rcf.tally_checkpoint(_write(tmp_path, 6, rocksdb_flush_every=3, rocksdb_compression="lz4"), retain=2)
    assert t.files["change log"] == 6  # journaling keeps one for every version, flushed ones too
    assert sorted(v for v, row in t.per_version.items() if "sst flush" in row) == [1, 4]
    assert 0 < t.retained < sum(t.bytes.values())  # the last 2 versions need versions 4..6's files only


def test_spark_provider_files_are_told_by_suffix(tmp_path):
    part = tmp_path / "spark" / "state" / "0" / "0"
    os.makedirs(part / "SSTs")
    for name, size in [("1.changelog", 10), (".1.changelog.crc", 1), ("2.zip", 20), ("SSTs/000008-x.sst", 30)]:
        (part / name).write_bytes(b"x" * size)
    flavour, t = rcf.tally_checkpoint(str(tmp_path / "spark"), retain=100)
    assert flavour == "spark" and t.versions == 2
    assert dict(t.bytes) == {"changelog": 10, "crc": 1, "zip": 20, "sst": 30}


def test_the_report_prints_a_ratio_of_two_checkpoints(tmp_path, capsys):
    one = _write(tmp_path / "a", 2, rocksdb_flush_every=1)
    assert rcf.main([one, one]) == 0
    out = capsys.readouterr().out
    assert "| sst flush | 2 |" in out and "1.00x bytes under state/" in out


def test_spark_files_count_for_the_version_that_wrote_them_and_through_cuts_later_ones(tmp_path):
    import json
    import zipfile

    part = tmp_path / "spark" / "state" / "0" / "0"
    os.makedirs(part / "SSTs")
    for v in range(1, 5):
        (part / f"{v}.changelog").write_bytes(b"c" * 10)
    for v, ssts in [(2, ["000008-a.sst"]), (4, ["000008-a.sst", "000009-b.sst"])]:
        with zipfile.ZipFile(part / f"{v}.zip", "w") as z:
            z.writestr("metadata", "v1\n" + json.dumps({"sstFiles": [{"dfsSstFileName": n} for n in ssts]}))
    (part / "SSTs" / "000008-a.sst").write_bytes(b"s" * 100)
    (part / "SSTs" / "000009-b.sst").write_bytes(b"s" * 1000)
    _, t = rcf.tally_checkpoint(str(tmp_path / "spark"), retain=100)
    assert t.per_version[2]["sst"] == 100 and t.per_version[4]["sst"] == 1000
    cut = t.through(3)
    assert cut.versions == 3 and cut.bytes["changelog"] == 30 and cut.bytes["sst"] == 100
    assert cut.files["zip"] == 1


def test_an_sst_set_written_in_maintenance_counts_for_the_commit_that_names_it(tmp_path):
    checkpoint = tmp_path / "query"
    store = Store(make_spec("file:" + str(checkpoint / "state" / "0" / "1"), backend="rocksdb",
                            rocksdb_flush_every=4), str(tmp_path / "local"))
    try:
        store.load(0)
        for v in range(1, 5):
            store.apply_batch([kv(i, b"v%d" % v) for i in range(v * 100, v * 100 + 500)])
            store.commit()
            store.load(v)
            if v == 3:
                store.maintenance_snapshot()  # the SST set of 3, named first by 4
                settle(store)
    finally:
        store.close()
    _, t = rcf.tally_checkpoint(str(checkpoint), retain=100)
    assert "sst flush" in t.per_version[4] and "private files" in t.per_version[4]
    assert t.files["private files"] == 2 and "unreferenced" not in t.bytes
