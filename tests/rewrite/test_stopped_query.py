"""The refusal to rewrite the checkpoint of a query running in the same session, worded for each tool."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from sparkstate.errors import MigrationError, RescaleError
from sparkstate.rewrite.stopped_query import normalize_checkpoint, refuse_if_running
from sparkstate.rewrite.tool import MIGRATION, RESCALE


def _spark(*roots: str) -> SimpleNamespace:
    """A session whose active queries run on `roots`, as the refusal reads them through Py4J."""
    def query(i: int, root: str) -> SimpleNamespace:
        jsq = SimpleNamespace(streamingQuery=lambda: SimpleNamespace(resolvedCheckpointRoot=lambda: root))
        return SimpleNamespace(_jsq=jsq, name=f"q{i}", id=i)
    return SimpleNamespace(streams=SimpleNamespace(active=[query(i, r) for i, r in enumerate(roots)]))


def test_each_tool_refuses_in_its_own_words(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    spark = _spark(str(tmp_path / "other"), f"file:{ckpt}/")
    with pytest.raises(RescaleError, match=r"query q1 is running on .*; stop it \(query.stop\(\)\) before rescaling"):
        refuse_if_running(spark, normalize_checkpoint(ckpt), RESCALE)
    with pytest.raises(MigrationError, match="before migrating its state"):
        refuse_if_running(spark, normalize_checkpoint(ckpt), MIGRATION)
    refuse_if_running(_spark(str(tmp_path / "other")), normalize_checkpoint(ckpt), RESCALE)


def test_checkpoints_compare_as_absolute_local_paths_or_uris_without_a_trailing_slash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize_checkpoint("ckpt") == normalize_checkpoint(f"file:{tmp_path}/ckpt") == str(tmp_path / "ckpt")
    assert normalize_checkpoint("s3://bucket/ckpt/") == "s3://bucket/ckpt"
