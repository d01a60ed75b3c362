"""The migration's refusals that need no Spark: logs written by hand."""
import pytest

from sparkstate.errors import MigrationError
from sparkstate.migration.plan import build_plan
from sparkstate.storage import fileio_for

from ..rewrite.test_file_sink import _checkpoint

SPARKSTATE = "io.sparkstate.PythonStateStoreProvider"


def test_an_uncommitted_last_batch_is_refused_with_how_to_finish_it(tmp_path):
    ckpt = _checkpoint(tmp_path, [4, 4, 4], committed=1, providers=[SPARKSTATE] * 3)
    with pytest.raises(MigrationError, match=r"batch 2 was started but never committed .*trigger\(availableNow=True\)"):
        build_plan(ckpt, "hdfs", None, fileio_for(ckpt))
