"""The S3 operator tests again with the heap backend (its deltas and snapshots on a real SeaweedFS)."""
from __future__ import annotations

import os
import sys
import tempfile

import pytest

from conftest import selected_provider
from test_operators import (test_aggregation_update_mode, test_apply_in_pandas_with_state_event_time_timeout,  # noqa: F401
                            test_stream_stream_inner_join)

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tests.storage.s3_server import SeaweedServer, serving, spark_state_on_s3_marks  # noqa: E402

BUCKET = "sparkstate-heap-state"
SERVER = SeaweedServer(tempfile.mkdtemp(prefix="sparkstate-s3-heap-"))

pytestmark = spark_state_on_s3_marks(SERVER, BUCKET, selected_provider(), backend="heap")


@pytest.fixture(scope="module", autouse=True)
def s3_server():
    """Started before the module's SparkSession (autouse fixtures of a scope come first)."""
    yield from serving(SERVER, BUCKET)


def test_heap_state_files_are_on_s3(spark, tmp_path, s3_server):
    test_aggregation_update_mode(spark, tmp_path)
    keys = [o["Key"] for page in s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", ())]
    assert any(k.endswith(".manifest") for k in keys) and any(".arrow" in k or "delta" in k for k in keys), keys[:20]
    assert not any("sparkstate" in dirs for _, dirs, _ in os.walk(str(tmp_path / "checkpoint" / "state")))
