"""`sparkstate demo` resumes a checkpoint on the provider the checkpoint pins (a migrated one included),
and still refuses a workdir made for another view."""
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


def test_a_checkpoint_without_batches_keeps_the_run_files_provider(tmp_path):
    workdir = _workdir(tmp_path, None)
    assert demo.pinned_provider(os.path.join(workdir, "checkpoint")) is None
    with pytest.raises(SystemExit, match="--provider sparkstate"):
        demo.check_run_file(workdir, argparse.Namespace(provider="hdfs", view="sessions"))
