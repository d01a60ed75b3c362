"""The driver killed with SIGKILL at random points of the commit path, ten times in a row, restarting
from the checkpoint each time: the results are exact at the end and no worker process is left over.

Each run is a separate driver process (crash_driver.py, in a session of its own) running the same
aggregation on both backends at once. A fault rule in the store workers SIGKILLs the whole process
group (python driver, its JVM, every worker) at a randomly chosen batch and partition of either query,
at one of three points: before a store commits, after its files are uploaded but before its manifest is
written, and after the manifest is written but before Spark records the batch; the other query is caught
wherever it is. The input and the expected result are plain Python.
"""
from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import sys
import time

import pytest

from conftest import selected_provider
from fault_plugin import fault_python, fired
from processes import live_pids

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="kills sparkstate's workers")]

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_driver.py")
POINTS = [
    ("sparkstate.engine.store:Store.commit", "before"),
    ("sparkstate.checkpoint.file_manager:CheckpointFileManager.publish_manifest", "before"),
    ("sparkstate.checkpoint.file_manager:CheckpointFileManager.publish_manifest", "after"),
]
KILLS = 10
N_FILES = 24


def _input(workdir: str, seed: int) -> dict[str, tuple[int, int]]:
    rng = random.Random(seed)
    os.makedirs(os.path.join(workdir, "in"))
    expected: dict[str, list[int]] = {}
    for i in range(N_FILES):
        rows = [{"k": f"k{rng.randrange(12)}", "v": rng.randrange(1000)} for _ in range(30)]
        path = os.path.join(workdir, "in", f"part-{i:03d}.json")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(r) for r in rows))
        os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))
        for r in rows:
            n_total = expected.setdefault(r["k"], [0, 0])
            n_total[0] += 1
            n_total[1] += r["v"]
    return {k: (n, t) for k, (n, t) in expected.items()}


BACKENDS = ["rocksdb", "heap"]


def _committed(workdir: str, backend: str) -> int:
    commits = os.path.join(workdir, backend, "ckpt", "commits")
    return len([n for n in os.listdir(commits) if n.isdigit()]) if os.path.isdir(commits) else 0


def _files_done(workdir: str, backend: str) -> int:
    """Input files the committed batches read. Usually one per batch, but a driver killed after the file
    source logged its next file and before the offset log recorded the batch leaves that file logged: the
    restarted run's first batch reads it together with the next one (Spark's file source)."""
    batches = _committed(workdir, backend)
    if not batches:
        return 0
    with open(os.path.join(workdir, backend, "ckpt", "offsets", str(batches - 1))) as f:
        return json.loads(f.read().strip().splitlines()[-1])["logOffset"] + 1


def _run(workdir: str, python: str, timeout_s: float = 240) -> int:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, DRIVER, workdir, python, *BACKENDS], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "driver.log"), "a"),
                            env=env)
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        raise AssertionError(f"the driver did not finish within {timeout_s} s")


def test_driver_killed_ten_times_mid_commit_then_exact(tmp_path):
    workdir = str(tmp_path)
    expected = _input(workdir, seed=71)
    rng = random.Random(72)
    kills = 0
    for attempt in range(KILLS + 5):
        if kills == KILLS:
            break
        done = min(_committed(workdir, b) for b in BACKENDS)
        target, stage = rng.choice(POINTS)
        version = done + 1 + rng.randrange(2)  # batch `done` commits version done+1
        marker = str(tmp_path / f"kill-{attempt}")
        rule = {"target": target, "stage": stage, "action": "kill_group", "times": 1, "marker": marker,
                "when": f"version == {version} and partition in (None, {rng.randrange(3)})"}
        run_dir = tmp_path / f"run-{attempt}"
        run_dir.mkdir()
        code = _run(workdir, fault_python(str(run_dir), [rule]))
        if fired(marker):
            assert code == -9, f"the run was killed but exited with {code}"
            kills += 1
            deadline = time.time() + 10
            while live_pids(marker) and time.time() < deadline:
                time.sleep(0.2)
            assert not live_pids(marker), "worker processes outlived the killed driver"
        else:
            assert code == 0, f"driver failed with {code}: {open(os.path.join(workdir, 'driver.log')).read()[-3000:]}"
            if min(_files_done(workdir, b) for b in BACKENDS) >= N_FILES:
                break
    assert kills == KILLS, f"only {kills} kills happened (the input ran out first)"
    os.makedirs(tmp_path / "final")
    assert _run(workdir, fault_python(str(tmp_path / "final"), [])) == 0
    for backend in BACKENDS:
        assert _files_done(workdir, backend) == N_FILES
        latest: dict[str, tuple[int, int]] = {}
        for path in sorted(glob.glob(os.path.join(workdir, backend, "out", "batch-*.json")),
                           key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0])):
            for row in json.load(open(path)):
                latest[row["k"]] = (row["n"], row["total"])
        assert latest == expected, f"{backend}: the results after ten crashes differ"
