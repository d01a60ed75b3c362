"""The worker pool (transport=socket): stores stay on the worker process that holds them.

A worker process cannot share its stores, so a task that takes a worker holding other partitions'
stores makes their next tasks move them (a restore from the checkpoint). The pool grows past one
worker per running task, up to `maxWorkers`, so that with no more partitions than that nothing moves.
"""
import pytest

from conftest import selected_provider
from spark_harness import checkpoint_loads_per_batch
from spark_harness import PREFIX, AggregationCase

pytestmark = [pytest.mark.sparkstate_settings(transport="socket"),
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="a sparkstate setting")]


def test_partitions_keep_their_worker_when_the_pool_may_grow_to_one_each(spark, tmp_path):
    # 6 partitions on local[2]: without room to grow, a partition's next task often finds its worker
    # busy with another partition and takes another one (with maxWorkers=2 this test saw restores
    # [0, 2, 1, 1, 0, 0]; the 4-partition benchmark, in 10 of 19 batches).
    case = AggregationCase(spark, tmp_path, seed=43, n_files=6)
    case.source.add_all(case.files)
    loads = checkpoint_loads_per_batch(spark, case.writer(), case.checkpoint,
                                       {"spark.sql.shuffle.partitions": "6", PREFIX + "maxWorkers": "6"})
    assert len(loads) >= 6
    assert loads[1:] == [0] * (len(loads) - 1), f"stores restored from the checkpoint per batch: {loads}"
    case.assert_matches_batch()


def test_an_invalid_max_workers_is_an_error_naming_the_key(spark, tmp_path):
    case = AggregationCase(spark, tmp_path, seed=44)
    case.source.add_all(case.files)
    message = case.failure_of_run({PREFIX + "maxWorkers": "0"})
    assert PREFIX + "maxWorkers" in message and ">= 1" in message
