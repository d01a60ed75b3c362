"""A full disk under the checkpoint location or under `localDir` fails the batch with an error that names
the path and the lack of space, loses nothing, and a restart after space is freed gives exact results.

Each test mounts a small tmpfs (root only; skipped with the reason elsewhere) and fills it until the
state of the next batch no longer fits.
"""
from __future__ import annotations

import os
import random
import subprocess

import pytest
from conftest import selected_provider
from spark_harness import PREFIX, AggregationCase

pytestmark = [
    pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate's own error messages"),
    pytest.mark.spark_conf({"spark.master": "local[2]"}),
]

TMPFS_BYTES = 8 << 20


@pytest.fixture()
def small_disk(tmp_path):
    """A TMPFS_BYTES tmpfs at tmp_path/disk, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(mount, leave_bytes: int) -> str:
    """Fill `mount` with one file until about `leave_bytes` stay free; returns the filler's path."""
    filler = os.path.join(mount, "filler")
    st = os.statvfs(mount)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))
    return filler


def _wide_case(spark, tmp_path, seed):
    """An aggregation whose state is large per key (a long string per key), so a batch's state is
    hundreds of KiB while Spark's own per-batch metadata stays a few KiB."""
    case = AggregationCase(spark, tmp_path, seed=seed, n_files=3, per_file=400, n_keys=400)
    rng = random.Random(seed)
    for rows in case.files:
        for row in rows:
            row["id"] = "%0400x" % rng.getrandbits(1600)  # 400 incompressible bytes per id
    return case


def _wide_writer(case):
    from pyspark.sql import functions as F

    agg = case.source.stream().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"),
                                                F.max("id").alias("longest"))
    return case.sink.attach(agg.writeStream.outputMode("update"))


@pytest.mark.parametrize("backend", ["rocksdb", "heap"])
def test_full_checkpoint_disk_fails_clearly_and_a_restart_after_freeing_space_is_exact(
        spark, tmp_path, small_disk, backend):
    case = _wide_case(spark, tmp_path, seed=51)
    case.checkpoint = str(small_disk / "ckpt")
    case.writer = lambda: _wide_writer(case)
    conf = {PREFIX + "backend": backend}
    _fail_on_a_full_disk_then_recover(case, conf, small_disk, leave_bytes=64 << 10)


def test_full_local_dir_fails_clearly_and_a_restart_after_freeing_space_is_exact(spark, tmp_path, small_disk):
    case = _wide_case(spark, tmp_path, seed=52)
    case.writer = lambda: _wide_writer(case)
    conf = {PREFIX + "backend": "rocksdb", PREFIX + "localDir": str(small_disk / "local")}
    _fail_on_a_full_disk_then_recover(case, conf, small_disk, leave_bytes=32 << 10)


def _fail_on_a_full_disk_then_recover(case, conf, small_disk, leave_bytes: int) -> None:
    """One batch commits, the disk fills, the next batch must fail naming the full path; once space is
    freed, a restart finishes the input and matches the batch computation."""
    case.source.add_all(case.files[:1])
    case.run(conf)
    filler = _fill(small_disk, leave_bytes=leave_bytes)
    case.source.add_all(case.files[1:2])
    message = case.failure_of_run(conf)
    assert "No space left on device" in message or "no space left" in message.lower(), message[:3000]
    assert str(small_disk) in message, f"the error does not name the full path: {message[:3000]}"
    os.remove(filler)
    case.source.add_all(case.files[2:])
    case.run(conf)
    _assert_matches(case)


def _assert_matches(case):
    from pyspark.sql import functions as F
    from spark_harness import assert_same_rows

    expected = case.source.batch().groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"),
                                                    F.max("id").alias("longest"))
    assert_same_rows(case.sink.updated(["k"]), expected.collect(), min_rows=100)


@pytest.mark.parametrize("where", ["full", "not a directory"])
def test_shm_segment_that_cannot_be_created_falls_back_to_the_socket(spark, tmp_path, small_disk, where):
    """transport=shm with a segment directory that is full (a 1 MiB tmpfs for a 2 MiB segment) or not a
    directory: the workers serve their channel over the socket (no segment mapped), results are exact.
    (The JVM also logs a warning saying so and what to fix.)"""
    from fault_plugin import fault_python, fired

    if where == "full":
        shm_dir = small_disk
        _fill(small_disk, leave_bytes=1 << 20)
    else:
        shm_dir = tmp_path / "not-a-directory"
        shm_dir.write_text("")
    case = AggregationCase(spark, tmp_path, seed=53)
    case.source.add_all(case.files)
    marker = str(tmp_path / "workers")
    note = {"target": "sparkstate.engine.store:Store.commit", "action": "note", "marker": marker}
    # A pythonExec of this test's own: new workers, whose first channel is opened with this shmDir.
    case.run({PREFIX + "shmDir": str(shm_dir), PREFIX + "pythonExec": fault_python(str(tmp_path), [note])})
    workers = {f["pid"] for f in fired(marker)}
    assert workers
    for pid in workers:
        with open(f"/proc/{pid}/maps") as maps:
            assert "sparkstate-shm-" not in maps.read(), f"worker {pid} mapped a segment despite {where}"
    case.assert_matches_batch()
