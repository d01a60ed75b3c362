"""aggregation_s3.py's request summary: per batch by verb, the commits' own requests, the check of one PUT
per file written, and the price of a million batches."""
from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "bench"))
import aggregation_s3  # noqa: E402


def test_requests_are_summed_per_batch_and_priced(tmp_path):
    log = tmp_path / "requests"
    log.mkdir()
    lines = ([{"phase": "commit", "op": "PutObject", "key": f"f{i}"} for i in range(6)]
             + [{"phase": "commit", "op": "UploadPart", "key": "big"}] * 2
             + [{"phase": "load", "op": "GetObject", "key": "m"},
                {"phase": "maintenance", "op": "ListObjectsV2", "key": "manifests/"}])
    (log / "requests-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    run = {"per_batch": [{"custom_metrics": {"sparkstateFilesUploaded": 3}},
                         {"custom_metrics": {"sparkstateFilesUploaded": 1}}]}
    q = aggregation_s3.request_summary(aggregation_s3.read_requests(str(log)), run, partitions=2)
    assert q["per_batch"] == {"PUT": 4.0, "GET": 0.5, "LIST": 0.5}
    assert q["commit_per_batch"] == {"PUT": 4.0}
    assert q["commit_lists"] == 0 and q["commit_puts"] == 8
    assert q["files_written"] == 4 + 2 * 2 and q["commit_put_keys"] == 7 and q["multipart_parts"] == 2
    # (9 PUT-class requests at $0.005 + 1 GET at $0.0004) per 1,000, over 2 batches, times a million
    assert q["usd_per_million_batches"] == pytest.approx((9 * 0.005 + 0.0004) / 1000 / 2 * 1e6)
