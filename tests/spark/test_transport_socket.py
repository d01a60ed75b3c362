"""Transport parity: the same queries give the batch results over the Unix domain socket (the transport before shm)."""
import pytest

from conftest import selected_provider
from test_operators import (test_aggregation_update_mode, test_session_window_append_mode,  # noqa: F401
                            test_stream_stream_inner_join, test_apply_in_pandas_with_state_event_time_timeout)

pytestmark = [pytest.mark.sparkstate_settings(transport="socket"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]
