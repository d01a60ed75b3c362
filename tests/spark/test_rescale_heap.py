"""The end-to-end rescale tests again with backend=heap (test_rescale.py runs them on RocksDB)."""
import pytest

from conftest import selected_provider
from test_rescale import *  # noqa: F401,F403 - re-collect every rescale test under this module's session

pytestmark = [pytest.mark.sparkstate_settings(backend="heap"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]
