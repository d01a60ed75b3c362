"""transport=embedded: the stores run in the executor JVM's own CPython (through Jep).

Parity: the same queries give the batch results. This module is the only one that embeds Python, and
its first test runs before any embedded worker exists (one JVM embeds one interpreter, for good).
"""
import pytest

from conftest import selected_provider
from test_bad_input import PREFIX, AggregationCase

pytestmark = [pytest.mark.sparkstate_settings(transport="embedded"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]


def test_interpreter_without_jep_gets_an_error_saying_how_to_install_it(spark, tmp_path):
    # An interpreter that answers the shim's probe like a Python without Jep would.
    fake = tmp_path / "python-without-jep"
    fake.write_text('#!/bin/sh\necho \'{"jep": null, "path": [], "version": "3.11", "executable": "x"}\'\n')
    fake.chmod(0o755)
    case = AggregationCase(spark, tmp_path, seed=36)
    case.source.add_all(case.files)
    spark.conf.set(PREFIX + "pythonExec", str(fake))
    try:
        message = case.failure_of_run()
    finally:
        spark.conf.unset(PREFIX + "pythonExec")
    assert "pip install jep" in message and PREFIX + "transport=socket" in message


from test_operators import (test_aggregation_update_mode, test_session_window_append_mode,  # noqa: E402,F401
                            test_stream_stream_inner_join)
