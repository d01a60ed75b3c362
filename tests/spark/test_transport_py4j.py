"""Transport parity: the same queries give the batch results with the data calls sent through py4j."""
import pytest

from conftest import selected_provider
from test_operators import (test_aggregation_update_mode, test_session_window_append_mode,  # noqa: F401
                            test_stream_stream_inner_join)

pytestmark = [pytest.mark.sparkstate_settings(transport="py4j"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]
