"""progress.BatchStats: one micro-batch's progress flattened, per-operator figures summed over operators."""
from sparkstate_jobs.progress import BatchStats

PROGRESS = {
    "batchId": 3,
    "numInputRows": 20000,
    "durationMs": {"triggerExecution": 480, "addBatch": 320},
    "eventTime": {"watermark": "2026-01-01T00:00:00.000Z"},
    "stateOperators": [
        {"operatorName": "dedupe", "numRowsTotal": 24000, "numRowsUpdated": 12000, "numRowsRemoved": 12000,
         "memoryUsedBytes": 1000, "commitTimeMs": 20, "allUpdatesTimeMs": 171, "allRemovalsTimeMs": 99,
         "customMetrics": {"sparkstateFilteredGets": 11960}},
        {"operatorName": "stateStoreSave", "numRowsTotal": 5, "commitTimeMs": 4, "allUpdatesTimeMs": 9},
    ],
}


def test_update_and_removal_times_are_summed_over_the_operators() -> None:
    b = BatchStats.from_progress(PROGRESS)
    assert (b.updates_ms, b.removals_ms, b.commit_ms) == (180, 99, 24)
    assert [op.removals_ms for op in b.operators] == [99, 0]
    assert (b.state_rows, b.input_rows, b.duration_ms, b.add_batch_ms) == (24005, 20000, 480, 320)
    assert b.operators[0].ours == {"sparkstateFilteredGets": 11960}
