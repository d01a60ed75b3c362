"""recovery.py's command line and report, without Spark: sizes, names and phases are checked up front."""
import importlib.util
import os
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "python", "bench", "recovery.py")


def _load():
    """The checkout's file (an installed sparkstate_jobs may predate it)."""
    spec = importlib.util.spec_from_file_location("bench_recovery", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


recovery = _load()


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        recovery.parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_defaults_run_both_sizes_every_provider_both_storages_all_phases():
    args = recovery.parse_args([])
    assert args.key_counts == [1_000_000, 10_000_000]
    assert args.provider_list == list(recovery.PROVIDERS)
    assert args.storage_list == ["local", "s3"]
    assert args.phase_list == ["build", "restart", "executor-loss"]


def test_quick_is_smaller_and_build_always_runs_first():
    args = recovery.parse_args(["--quick", "--phases", "executor-loss"])
    assert args.key_counts == [100_000] and args.batches == recovery.QUICK["batches"]
    assert args.phase_list == ["build", "executor-loss"]


@pytest.mark.parametrize("keys", ["10,5", "1000,1000", "0", "1e6", ""])
def test_key_counts_must_be_distinct_positive_integers_smallest_first(capsys, keys):
    assert "--keys expects" in _error(capsys, ["--keys", keys])


def test_unknown_names_are_rejected_with_the_known_ones(capsys):
    assert "expected some of: sparkstate-rocksdb" in _error(capsys, ["--providers", "rocksdb,memory"])
    assert "unknown storage(s): hdfs" in _error(capsys, ["--storage", "hdfs"])
    assert "unknown phase(s): warmup" in _error(capsys, ["--phases", "warmup"])


@pytest.mark.parametrize("size,mib", [("4g", 4096), ("768m", 768), ("1G", 1024), ("2048mb", 2048)])
def test_memory_strings_become_mib_for_local_cluster(size, mib):
    assert recovery._mib(size) == mib


def test_feed_orders_files_oldest_first(tmp_path):
    data, source = tmp_path / "data", tmp_path / "source"
    data.mkdir()
    for name in ("b.parquet", "a.parquet"):
        (data / name).write_bytes(name.encode())
    recovery.feed(str(data), str(source), ["b.parquet", "a.parquet"])
    assert os.path.getmtime(source / "b.parquet") < os.path.getmtime(source / "a.parquet")
    assert not [n for n in os.listdir(source) if n.endswith(".tmp")]


def test_feed_writes_each_copy_under_a_name_spark_skips(tmp_path, monkeypatch):
    """Spark's file source lists the directory while a query runs and skips names starting with "." or "_":
    a copy in progress under the final name, or any other visible one, could become a batch of its own."""
    data, source = tmp_path / "data", tmp_path / "source"
    data.mkdir()
    (data / "a.parquet").write_bytes(b"a")
    written = []
    copy = recovery.shutil.copyfile
    monkeypatch.setattr(recovery.shutil, "copyfile", lambda src, dst: (written.append(dst), copy(src, dst))[1])
    recovery.feed(str(data), str(source), ["a.parquet"])
    assert [os.path.basename(w)[0] for w in written] == ["."]
    assert os.listdir(source) == ["a.parquet"]


def _run(provider, storage, keys, us, restart, loss):
    ok = {"status": "ok"}
    return {"keys": keys, "provider": provider, "storage": storage, "phases": {
        "build": {**ok, "us_per_row": us},
        "restart": {**ok, "first_batch_s": restart, "first": {"trigger_ms": 100}},
        "executor-loss": {**ok, "loss_to_batch_end_s": loss} if loss else {"status": "failed (exit 1)"}}}


def test_tables_give_ratios_to_spark_rocksdb_and_the_growth_of_per_row_cost():
    runs = [_run("rocksdb", "local", 10, 2.0, 4.0, 8.0), _run("sparkstate-heap", "s3", 10, 3.0, 1.0, None),
            _run("rocksdb", "local", 100, 2.2, 5.0, 9.0), _run("sparkstate-heap", "s3", 100, 4.5, 2.0, 3.0)]
    text = recovery.tables(runs, [10, 100])
    assert "| sparkstate-heap | s3 | 3.00 | 1.00 (100) | 0.25x | - | - | executor-loss: failed (exit 1) |" in text
    assert "| sparkstate-heap | s3 | 4.50 | 2.00 (100) | 0.40x | 3.00 | 0.33x | ok |" in text
    assert "| rocksdb | local | 1.10x |" in text and "| sparkstate-heap | s3 | 1.50x |" in text
    assert "CPU seconds" not in text   # runs without --cpu-profile


def test_cpu_profile_tables_list_the_parts_any_run_has(monkeypatch):
    monkeypatch.setattr(recovery.os, "cpu_count", lambda: 2)
    a, b = _run("rocksdb", "local", 10, 2.0, 4.0, 8.0), _run("sparkstate-rocksdb", "local", 10, 2.0, 5.0, 8.0)
    a["phases"]["restart"]["cpu"] = {"JIT compilers": 3.0, "tasks": 1.0}
    b["phases"]["restart"]["cpu"] = {"JIT compilers": 2.5, "state workers (Python)": 1.5}
    b["phases"]["executor-loss"]["cpu"] = {"GC": 0.4}
    text = recovery.tables([a, b], [10])
    assert ("| provider | state on | window s | CPU s (of the cores) | JIT compilers | tasks | "
            "state workers (Python) |") in text
    assert "| rocksdb | local | 4.00 | 4.00 (50%) | 3.00 | 1.00 | 0.00 |" in text
    assert "| sparkstate-rocksdb | local | 5.00 | 4.00 (40%) | 2.50 | 0.00 | 1.50 |" in text
    assert "from the executor's loss to the batch end, 10 keys" in text
    assert "| sparkstate-rocksdb | local | 8.00 | 0.40 (2%) | 0.40 |" in text


def test_spark_providers_run_on_local_disk_whatever_the_storage():
    assert recovery.runs_to_make(["sparkstate-heap", "rocksdb"], ["s3"]) == [("sparkstate-heap", "s3"), ("rocksdb", "local")]
    assert recovery.runs_to_make(["rocksdb", "sparkstate-rocksdb"], ["local", "s3"]) == [
        ("rocksdb", "local"), ("sparkstate-rocksdb", "local"), ("sparkstate-rocksdb", "s3")]
