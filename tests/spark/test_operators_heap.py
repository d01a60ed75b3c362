"""The whole operator matrix again with backend=heap (the RocksDB run is test_operators.py itself).

minDeltasForSnapshot=3 in BASE_CONF drives maintenance often; heap.snapshotEveryVersions=2 makes the
background full snapshots (and chains that start from one) happen within these short queries.
"""
import pytest

from conftest import selected_provider
from test_operators import *  # noqa: F401,F403 - re-collect every operator test under this module's session

pytestmark = [pytest.mark.sparkstate_settings(backend="heap", **{"heap.snapshotEveryVersions": "2"}),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]
