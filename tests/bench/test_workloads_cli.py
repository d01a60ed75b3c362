"""workloads.py's command line: names and sizes are checked before any input is written (no Spark here)."""
import importlib.util
import os
import subprocess
import sys

import pytest

from sparkstate_jobs.session import PROVIDERS as SESSION_PROVIDERS

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "python", "bench", "workloads.py")


def _load():
    """The checkout's file (an installed sparkstate_jobs may predate it)."""
    spec = importlib.util.spec_from_file_location("bench_workloads", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


workloads = _load()
SIZES = list(workloads.DEFAULTS)


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        workloads.parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_defaults_select_every_workload_and_provider():
    args = workloads.parse_args([])
    assert args.workload_list == list(workloads.WORKLOADS)
    assert args.provider_list == ["sparkstate-rocksdb", "sparkstate-heap", "hdfs", "rocksdb", "rocksdb-changelog"]
    assert {k: getattr(args, k) for k in SIZES} == workloads.DEFAULTS
    assert not args.run_one


def test_quick_preset_is_smaller_and_flags_override_it():
    args = workloads.parse_args(["--quick"])
    assert {k: getattr(args, k) for k in SIZES} == workloads.QUICK
    assert all(workloads.QUICK[k] <= workloads.DEFAULTS[k] for k in SIZES)
    assert workloads.QUICK["batches"] >= 3, "watermark workloads need batches after the first eviction"
    args = workloads.parse_args(["--quick", "--batches", "7", "--small-rows-per-batch", "500"])
    assert (args.batches, args.small_rows_per_batch, args.rows_per_batch) == (7, 500, workloads.QUICK["rows_per_batch"])


def test_subsets_keep_the_given_order_without_repeats():
    args = workloads.parse_args(["--workloads", " dedup,agg-uniform,dedup ", "--providers", "hdfs,sparkstate-heap"])
    assert args.workload_list == ["dedup", "agg-uniform"]
    assert args.provider_list == ["hdfs", "sparkstate-heap"]


def test_unknown_workload_is_rejected_with_the_known_names(capsys):
    err = _error(capsys, ["--workloads", "agg-uniform,join-full-outer"])
    assert "unknown workload(s): join-full-outer" in err
    assert "expected some of: agg-uniform, agg-zipf," in err


def test_unknown_provider_is_rejected(capsys):
    # aggregation.py's name for ours; here each backend has its own name
    err = _error(capsys, ["--providers", "sparkstate"])
    assert "unknown provider(s): sparkstate" in err
    assert "sparkstate-rocksdb, sparkstate-heap, hdfs, rocksdb, rocksdb-changelog" in err


@pytest.mark.parametrize("argv,message", [
    (["--workloads", ","], "no workload selected"),
    (["--batches", "1"], "--batches must be >= 2"),
    (["--small-batches", "0"], "--small-batches must be >= 2"),
    (["--rows-per-batch", "1"], "--rows-per-batch must be >= 2"),
    (["--conf", "spark.sql.shuffle.partitions"], "--conf expects key=value"),
])
def test_bad_values_are_rejected(capsys, argv, message):
    assert message in _error(capsys, argv)


def test_every_provider_is_a_session_provider_and_every_workload_has_a_dataset():
    for base, backend in workloads.PROVIDERS.values():
        assert base in SESSION_PROVIDERS
        assert backend is None or base == "sparkstate"
    for w in workloads.WORKLOADS.values():
        assert w.dataset in workloads.GENERATORS or w.dataset in ("uniform", "small")
    for ours, theirs in workloads.RATIO_PAIRS:
        assert ours in workloads.PROVIDERS and theirs in workloads.PROVIDERS


def test_script_fails_fast_on_a_bad_name(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "--providers", "hdfs,nope", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "unknown provider(s): nope" in done.stderr
    assert not os.listdir(tmp_path), "nothing may be generated before the arguments are valid"


def _ratios(rows_per_s: float | None, p99: float) -> dict:
    pairs = {"sparkstate-heap/hdfs": {"rows_per_s": rows_per_s, "p99_batch_ms": p99, "state_memory_bytes": 0.25}}
    return {"dedup": pairs}


def test_median_of_takes_each_cells_median_and_leaves_out_missing_runs():
    runs = [_ratios(0.84, 1.5), _ratios(None, 1.2), _ratios(1.03, 1.1), _ratios(0.81, 1.3)]
    medians, values = workloads.median_ratios(runs)
    cell = medians["dedup"]["sparkstate-heap/hdfs"]
    assert cell["rows_per_s"] == pytest.approx(0.84)      # of 0.84, 1.03, 0.81: the failed run is left out
    assert cell["p99_batch_ms"] == pytest.approx(1.25)
    assert values["dedup"]["sparkstate-heap/hdfs"]["rows_per_s"] == [0.84, 1.03, 0.81]
    table = workloads.median_table(medians, values, "sparkstate-heap/hdfs")
    assert "| dedup | **0.84x** (0.84, 1.03, 0.81) | **1.25x** (1.50, 1.20, 1.10, 1.30) |" in table


def test_median_of_reads_earlier_results_and_names_an_unreadable_one(tmp_path, capsys):
    import json

    paths = []
    for i, r in enumerate([_ratios(0.9, 1.0), _ratios(0.8, 1.0), _ratios(1.0, 1.0)]):
        paths.append(str(tmp_path / f"wl{i}.json"))
        with open(paths[-1], "w") as fh:
            json.dump({"ratios": r}, fh)
    assert workloads.main(["--median-of", ",".join(paths), "--chart", ""]) == 0
    assert "**0.90x** (0.90, 0.80, 1.00)" in capsys.readouterr().out
    assert workloads.main(["--median-of", paths[0] + "," + str(tmp_path / "missing.json"), "--chart", ""]) == 2
    assert "missing.json" in capsys.readouterr().err


class _Conf:
    def __init__(self, value: str | None) -> None:
        self.value = value

    def get(self, key: str, default: str) -> str:
        assert key == "spark.sql.streaming.stateStore.maintenanceInterval"
        return default if self.value is None else self.value


@pytest.mark.parametrize("value,seconds", [(None, 60.0), ("5s", 5.0), ("1m", 60.0), ("1500ms", 1.5), ("2000", 2.0)])
def test_the_maintenance_interval_is_read_in_spark_s_units(value, seconds):
    spark = type("Session", (), {"conf": _Conf(value)})()
    assert workloads.maintenance_interval_s(spark) == seconds


def test_settled_size_waits_for_a_write_after_the_query_and_then_a_quiet_period(tmp_path):
    import threading
    import time

    (tmp_path / "a").write_bytes(b"x" * 10)
    threading.Timer(0.3, lambda: (tmp_path / "snapshot").write_bytes(b"y" * 100)).start()
    start = time.monotonic()
    assert workloads.settled_size(str(tmp_path), quiet_s=0.6, limit_s=5, poll_s=0.05) == 110
    assert 0.8 < time.monotonic() - start < 3


def test_settled_size_gives_up_after_its_limit(tmp_path):
    import threading
    import time

    stop = threading.Event()

    def keep_writing() -> None:
        n = 0
        while not stop.wait(0.05):
            n += 1
            (tmp_path / f"f{n}").write_bytes(b"z")

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        start = time.monotonic()
        assert workloads.settled_size(str(tmp_path), quiet_s=1, limit_s=0.5, poll_s=0.05) > 0
        assert time.monotonic() - start < 0.9
    finally:
        stop.set()
        writer.join()


def test_the_settled_column_appears_when_measured():
    row = {"provider": "hdfs", "rows_per_s": 1.0, "p50_batch_ms": 1, "p99_batch_ms": 1, "median_commit_ms": 1,
           "ckpt_bytes_per_batch": 1024, "state_memory_bytes": 1, "state_rows": 1, "status": "ok"}
    assert "settled" not in workloads.workload_table([row])
    table = workloads.workload_table([{**row, "ckpt_bytes_per_batch_settled": 2048}]).splitlines()
    assert "| settled |" in table[0] and table[1].count("|") == table[0].count("|") and "2.0 KiB" in table[2]
