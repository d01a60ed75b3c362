"""`sparkstate demo` resumes a checkpoint on the provider the checkpoint pins (a migrated one included)
and with the view it was made with, and refuses a workdir made for another view than the one given."""
from __future__ import annotations

import argparse
import json
import os

import pytest

from sparkstate_jobs import demo

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def _workdir(tmp_path, pinned: str | None) -> str:
    workdir = str(tmp_path / "demo")
    os.makedirs(os.path.join(workdir, "checkpoint", "offsets"))
    with open(os.path.join(workdir, demo.RUN_FILE), "w") as f:
        json.dump({"provider": "sparkstate", "view": "sessions"}, f)
    if pinned:
        conf = {"spark.sql.streaming.stateStore.providerClass": pinned, "spark.sql.shuffle.partitions": "4"}
        with open(os.path.join(workdir, "checkpoint", "offsets", "3"), "w") as f:
            f.write("v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": conf})
                    + '\n{"logOffset":3}')
    return workdir


def test_the_provider_is_the_one_the_checkpoint_pins(tmp_path):
    workdir = _workdir(tmp_path, HDFS)  # made on sparkstate, then migrated to HDFS
    assert demo.pinned_provider(os.path.join(workdir, "checkpoint")) == HDFS
    demo.check_run_file(workdir, argparse.Namespace(provider="hdfs", view="sessions"))  # no refusal
    with pytest.raises(SystemExit, match="--view sessions"):
        demo.check_run_file(workdir, argparse.Namespace(provider="hdfs", view="pages"))


def test_the_view_is_the_checkpoints_unless_given(tmp_path):
    workdir = _workdir(tmp_path, None)  # made with --view sessions
    args = argparse.Namespace(provider="sparkstate", view=None)
    demo.check_run_file(workdir, args)
    assert args.view == "sessions"
    with open(os.path.join(workdir, demo.RUN_FILE), "w") as f:
        json.dump({"provider": "sparkstate", "view": "pages"}, f)
    args = argparse.Namespace(provider="sparkstate", view=None)
    demo.check_run_file(workdir, args)
    assert args.view == "pages"
    fresh = argparse.Namespace(provider="sparkstate", view=None)
    demo.check_run_file(str(tmp_path / "new"), fresh)
    assert fresh.view == "sessions"


def test_a_checkpoint_without_batches_keeps_the_run_files_provider(tmp_path):
    workdir = _workdir(tmp_path, None)
    assert demo.pinned_provider(os.path.join(workdir, "checkpoint")) is None
    with pytest.raises(SystemExit, match="--provider sparkstate"):
        demo.check_run_file(workdir, argparse.Namespace(provider="hdfs", view="sessions"))


def _state_written_by(workdir: str, backend: str, version: int = 3) -> None:
    from sparkstate.checkpoint.manifest import Manifest  # noqa: PLC0415
    manifests = os.path.join(workdir, "checkpoint", "state", "1", "0", "sparkstate", "manifests")
    os.makedirs(manifests, exist_ok=True)
    m = Manifest(version=version, backend=backend, num_keys=1, writer_instance_id="w", query_run_id="q",
                 created_ms=0, shared_files=())
    with open(os.path.join(manifests, f"{version}.manifest"), "wb") as f:
        f.write(m.to_bytes())


def test_a_resumed_checkpoint_keeps_the_backend_its_state_was_written_with(tmp_path):
    workdir = _workdir(tmp_path, None)
    checkpoint = os.path.join(workdir, "checkpoint")
    new = argparse.Namespace(provider="sparkstate", backend=None)
    demo.resolve_backend(checkpoint, new, {})
    assert new.backend is None                      # nothing written yet: the setting's default applies
    _state_written_by(workdir, "heap")
    assert demo.checkpoint_backend(checkpoint) == "heap"
    resumed = argparse.Namespace(provider="sparkstate", backend=None)
    demo.resolve_backend(checkpoint, resumed, {})
    assert resumed.backend == "heap"
    same = argparse.Namespace(provider="sparkstate", backend="heap")
    demo.resolve_backend(checkpoint, same, {})
    with pytest.raises(SystemExit, match="--backend heap or a new --workdir"):
        demo.resolve_backend(checkpoint, argparse.Namespace(provider="sparkstate", backend="rocksdb"), {})
    with pytest.raises(SystemExit, match="written by the heap backend"):
        demo.resolve_backend(checkpoint, argparse.Namespace(provider="sparkstate", backend=None),
                             {"spark.sql.streaming.stateStore.sparkstate.backend": "rocksdb"})


def test_the_backend_is_the_newest_versions(tmp_path):
    """Migrated from the rocksdb backend to Spark's RocksDB provider and back, onto the heap backend: the
    old versions' manifests say rocksdb, the newest says heap."""
    workdir = _workdir(tmp_path, None)
    for version in (10, 11):
        _state_written_by(workdir, "rocksdb", version)
    _state_written_by(workdir, "heap", 13)
    assert demo.checkpoint_backend(os.path.join(workdir, "checkpoint")) == "heap"


def test_a_checkpoint_migrated_to_another_provider_ignores_its_old_backend(tmp_path):
    workdir = _workdir(tmp_path, HDFS)
    _state_written_by(workdir, "heap")              # left over from before the migration
    args = argparse.Namespace(provider="sparkstate", backend="rocksdb")
    demo.resolve_backend(os.path.join(workdir, "checkpoint"), args, {})   # no refusal: HDFS runs it
    assert args.backend == "rocksdb"


def test_state_kept_elsewhere_resumes_on_the_backend_the_run_file_records(tmp_path):
    """With `stateLocation` the checkpoint directory holds no manifest to read the backend from: the run
    file's backend, written by the first run, decides once the checkpoint has committed a batch."""
    workdir = _workdir(tmp_path, None)
    checkpoint = os.path.join(workdir, "checkpoint")
    with open(os.path.join(workdir, demo.RUN_FILE), "w") as f:
        json.dump({"provider": "sparkstate", "view": "sessions", "backend": "heap"}, f)
    args = argparse.Namespace(provider="sparkstate", view=None, backend=None)
    demo.check_run_file(workdir, args)
    demo.resolve_backend(checkpoint, args, {})
    assert args.backend is None                     # no batch committed yet: nothing to keep
    os.makedirs(os.path.join(checkpoint, "commits"))
    with open(os.path.join(checkpoint, "commits", "0"), "w") as f:
        f.write('v1\n{"nextBatchWatermarkMs":0}')
    demo.resolve_backend(checkpoint, args, {})
    assert args.backend == "heap"
    other = argparse.Namespace(provider="sparkstate", view=None, backend="rocksdb")
    demo.check_run_file(workdir, other)
    with pytest.raises(SystemExit, match="--backend heap or a new --workdir"):
        demo.resolve_backend(checkpoint, other, {})


def test_the_run_file_records_the_backend_of_a_new_sparkstate_checkpoint(tmp_path):
    heap_by_conf = {"spark.sql.streaming.stateStore.sparkstate.backend": "heap"}
    for provider, backend, conf, recorded in (("sparkstate", "heap", {}, "heap"),
                                             ("sparkstate", None, {}, "rocksdb"),
                                             ("sparkstate", None, heap_by_conf, "heap"),
                                             ("hdfs", None, {}, None)):
        workdir = str(tmp_path / f"{provider}-{backend}-{len(conf)}")
        os.makedirs(workdir)
        demo.record_run_file(workdir, argparse.Namespace(provider=provider, view="sessions", backend=backend), conf)
        with open(os.path.join(workdir, demo.RUN_FILE)) as f:
            assert json.load(f).get("backend") == recorded
