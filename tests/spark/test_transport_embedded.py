"""transport=embedded: the stores run in the executor JVM's own CPython (through Jep).

Parity: the same queries give the batch results. This module is the only one that embeds Python, and
its first test runs before any embedded worker exists (one JVM embeds one interpreter, for good).
"""
import pytest
from conftest import selected_provider
from spark_harness import PREFIX, AggregationCase, checkpoint_loads_per_batch

pytestmark = [pytest.mark.sparkstate_settings(transport="embedded"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]


def test_interpreter_without_jep_gets_an_error_saying_how_to_install_it(spark, tmp_path):
    # An interpreter that answers the shim's probe like a Python without Jep would.
    fake = tmp_path / "python-without-jep"
    fake.write_text('#!/bin/sh\necho \'{"jep": null, "path": [], "version": "3.11", "executable": "x"}\'\n')
    fake.chmod(0o755)
    case = AggregationCase(spark, tmp_path, seed=36)
    case.source.add_all(case.files)
    message = case.failure_of_run({PREFIX + "pythonExec": str(fake)})
    assert "pip install jep" in message and PREFIX + "transport=shm" in message


def test_a_store_stays_live_whichever_task_thread_runs_its_partition(spark, tmp_path):
    # 8 partitions on local[2]: a partition's next task often runs on the other task thread, and so
    # through the other embedded worker. Its store must be reused live there, not restored.
    case = AggregationCase(spark, tmp_path, seed=41, n_files=6)
    case.source.add_all(case.files)
    loads = checkpoint_loads_per_batch(spark, case.writer(), case.checkpoint,
                                       {"spark.sql.shuffle.partitions": "8"})
    assert len(loads) >= 6
    assert loads[1:] == [0] * (len(loads) - 1), f"stores restored from the checkpoint per batch: {loads}"
    case.assert_matches_batch()


VARIANTS = ("rocksdb",)  # the operator tests imported below run embedded, on RocksDB

from test_operators import test_aggregation_update_mode, test_session_window_append_mode, test_stream_stream_inner_join  # noqa: E402,F401
