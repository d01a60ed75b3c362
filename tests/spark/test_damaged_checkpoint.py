"""A misplaced or damaged checkpoint is refused with an error that says the way back; `sparkstate verify`
finds the damage, and its roll-back lets the query finish with the batch computation's result, into
foreachBatch and into Spark's file sink."""
from __future__ import annotations

import glob
import os

import pytest
from conftest import selected_provider
from datagen import EVENT_SCHEMA, random_events
from spark_harness import AggregationCase, InputDir, assert_same_rows, read_parquet_sink, run_available_now

from sparkstate.cli import main as cli_main

pytestmark = pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's own checkpoint")


def _swap(a: str, b: str) -> None:
    os.rename(a, a + ".swap")
    os.rename(b, a)
    os.rename(a + ".swap", b)


def test_swapped_partition_directories_are_refused_never_loaded(spark, tmp_path, capsys):
    case = AggregationCase(spark, tmp_path, seed=41)
    case.source.add_all(case.files[:2])
    case.run()
    first, second = case.store_dirs()[:2]
    _swap(first, second)
    case.source.add_all(case.files[2:])
    message = case.failure_of_run()
    assert "not to this store" in message and "sparkstate verify" in message, message
    assert cli_main(["verify", "--checkpoint", case.checkpoint]) == 1
    assert "moved or copied from another store" in capsys.readouterr().out
    _swap(first, second)  # put back: nothing was loaded or written from the wrong place
    case.run()
    case.assert_matches_batch()


def _newest_own_file(checkpoint: str) -> tuple[str, int]:
    """A data file only the newest version of some store lists, and that version."""
    for store in sorted(glob.glob(os.path.join(checkpoint, "state", "0", "*", "sparkstate"))):
        newest = max(int(n.split(".")[0]) for n in os.listdir(os.path.join(store, "manifests")))
        own = sorted(glob.glob(os.path.join(store, "files", f"{newest}-*")))
        if own:
            return own[0], newest
    raise AssertionError("no store wrote a file in the last batch")


@pytest.mark.parametrize("sink", ["file", "foreachBatch"])
def test_a_damaged_version_is_rolled_back_with_verify_and_the_query_finishes(spark, tmp_path, capsys, sink):
    source = InputDir(spark, str(tmp_path / "in"), EVENT_SCHEMA)
    checkpoint, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
    files = random_events(seed=43, n_files=6, per_file=40, n_keys=6, v_range=15)
    seen: list = []

    def run() -> None:
        deduplicated = source.stream().dropDuplicates(["k", "v"]).select("k", "v").writeStream
        if sink == "file":
            writer = deduplicated.format("parquet").option("path", out).outputMode("append")
        else:
            writer = deduplicated.foreachBatch(lambda df, _: seen.extend(df.collect())).outputMode("append")
        run_available_now(writer, checkpoint)

    source.add_all(files[:3])
    run()
    damaged, version = _newest_own_file(checkpoint)
    data = bytearray(open(damaged, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(damaged, "wb").write(bytes(data))

    source.add_all(files[3:])
    with pytest.raises(Exception) as failure:
        run()
    message = str(failure.value)
    assert os.path.basename(damaged) in message and "checksum" in message, message
    assert f"loadable: {version - 1}" in message and "sparkstate verify" in message

    assert cli_main(["verify", "--checkpoint", checkpoint]) == 1
    report = capsys.readouterr().out
    assert f"roll-back: every store loads version {version - 1}" in report, report
    sinks = ["--file-sink", out] if sink == "file" else []
    assert cli_main(["verify", "--checkpoint", checkpoint, "--rollback-to", str(version - 1), "--yes", *sinks]) == 0
    capsys.readouterr()
    assert cli_main(["verify", "--checkpoint", checkpoint]) == 0

    run()
    expected = source.batch().select("k", "v").distinct().collect()
    if sink == "file":
        assert_same_rows(read_parquet_sink(spark, out), expected, min_rows=40)
    else:  # foreachBatch sees the re-run batch again: at least once, every row
        assert_same_rows(set(map(tuple, seen)), {tuple(r) for r in expected}, min_rows=40)
