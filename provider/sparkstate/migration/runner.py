"""`sparkstate.migrate()`: move a stopped query's state to another state store provider (driver side).

1. Plan from the checkpoint (`plan.build_plan`), under the lock rescale and migrate share.
2. The copy job (`io.sparkstate.tools.StateCopy`, in the jar): per partition, every store's version B+1
   read through the source provider, written through the target provider as version B+2 and read back.
3. Verify: every store reported, with the same key count and checksum on both sides.
4. Publish: the offset log entry B+1 (batch B's offsets, the target provider's class; put-if-absent, so a
   query started meanwhile makes the migration fail before anything else is written), the file sinks'
   empty entries for batch B+1, then the commit log entry B+1.

Before step 4 the checkpoint is unchanged for Spark: the target's files are versions no log names yet, and
the query restarts on the source provider. From the offset log entry on, the query would re-run batch
B+1 on the target, which has no version B+1 to load, so it fails instead of running (`sparkstate verify`
says the migration is unfinished). A file sink's entry never precedes that offset log entry: a batch B+1
planned by a restart on the source would find it and skip its output. Running the command again finishes
at any point (it recognises its own offset log entry B+1 and writes the same versions again).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..checkpoint.spark_logs import PROVIDER_CLASS_CONF
from ..config import PREFIX, Settings
from ..errors import MigrationError
from ..rewrite.batch import BatchPublisher
from ..rewrite.file_sink import COMPACT_INTERVAL_KEY, check_file_sink, compact_interval_setting
from ..rewrite.job_failure import job_failure_message
from ..rewrite.lock import RewriteLock
from ..rewrite.session import session_conf, session_s3a, session_sparkstate_conf
from ..rewrite.stopped_query import normalize_checkpoint, refuse_if_running
from ..rewrite.tool import MIGRATION
from ..storage import FileIO, fileio_for, join_path
from .plan import MigrationPlan, OurStores, build_plan, plan_for_job

ProgressFn = Callable[[int, int], None]


@dataclass
class MigrationSummary:
    checkpoint: str
    source: str
    target: str
    backend: str | None
    batch_id: int          # the migration's batch
    state_version: int     # the version every target store was written as
    stores: int
    rows: int
    bytes: int             # key + value bytes copied
    seconds: float

    def describe(self) -> str:
        return (f"migrated {self.checkpoint}: {self.source} -> {self.target}"
                + (f" ({self.backend} backend)" if self.backend else "")
                + f" as batch {self.batch_id} (state version {self.state_version}); {self.stores} store(s), "
                f"{self.rows} entries, {self.bytes / 1e6:.1f} MB, key counts and checksums verified, in "
                f"{self.seconds:.1f} s. Restart the query with spark.sql.streaming.stateStore.providerClass="
                f"{self.target}" + (" and the sparkstate jar" if self.backend else ""))


def migrate(spark: Any, checkpoint: str, to: str, *, backend: str | None = None, file_sinks: Sequence[str] = (),
            progress: ProgressFn | None = None) -> MigrationSummary:
    """Move the state of the stopped query at `checkpoint` to provider `to` ("sparkstate", "hdfs",
    "rocksdb"; `backend` for sparkstate's). See the module doc."""
    t0 = time.perf_counter()
    checkpoint = normalize_checkpoint(checkpoint)
    fio = fileio_for(checkpoint)
    refuse_if_running(spark, checkpoint, MIGRATION)
    ours = session_stores(spark, checkpoint)
    build_plan(checkpoint, to, backend, fio, ours)  # a checkpoint it refuses gets no lock file either
    lock = RewriteLock(fio, checkpoint, MIGRATION)
    lock.acquire(f"migration to {to}")
    try:
        plan = build_plan(checkpoint, to, backend, fio, ours)
        if not plan.resume:
            for sink in file_sinks:
                check_file_sink(fileio_for(sink), sink, plan.last_committed_batch, MIGRATION)
        interval = compact_interval_setting(spark.conf.get(COMPACT_INTERVAL_KEY, None), MIGRATION)
        results = _run_job(spark, plan, progress)
        _verify(plan, results)
        refuse_if_running(spark, checkpoint, MIGRATION)
        _publish(plan, fio, file_sinks, interval, results)
    finally:
        lock.release()
    return MigrationSummary(
        checkpoint=checkpoint, source=plan.describe().split(" -> ")[0], target=plan.target_class,
        backend=plan.backend, batch_id=plan.rewrite_batch, state_version=plan.target_version, stores=len(results),
        rows=sum(r["targetRows"] for r in results), bytes=sum(r["bytes"] for r in results),
        seconds=time.perf_counter() - t0)


def session_stores(spark: Any, checkpoint: str) -> OurStores:
    """sparkstate's stores of the query at `checkpoint` as `spark`'s session reaches them: its sparkstate
    settings (`stateLocation`, S3) and its Hadoop conf's `fs.s3a.*` entries."""
    return OurStores(checkpoint, Settings.parse(session_sparkstate_conf(spark)), session_s3a(spark))


def _job_conf(spark: Any, plan: MigrationPlan) -> tuple[dict[str, str], dict[str, str]]:
    """(the SQL conf both providers run with, the Hadoop conf) for the copy job."""
    conf = {k: v for k, v in session_conf(spark).items()
            if k.startswith(("spark.sql.streaming.", PREFIX)) and k != PROVIDER_CLASS_CONF}
    conf.update({k: v for k, v in spark.sparkContext.getConf().getAll()
                 if k.startswith(PREFIX) and k not in conf})
    conf.pop(PREFIX + "backend", None)  # the target's is set per side
    hadoop = {k[len("spark.hadoop."):]: v for k, v in spark.sparkContext.getConf().getAll()
              if k.startswith("spark.hadoop.")}
    hadoop.update(session_s3a(spark))
    return conf, hadoop


def _run_job(spark: Any, plan: MigrationPlan, progress: ProgressFn | None) -> list[dict[str, Any]]:
    conf, hadoop = _job_conf(spark, plan)
    doc = plan_for_job(plan, conf, hadoop, join_path(plan.checkpoint, "state"))
    group = f"sparkstate-migrate-{time.time_ns()}"
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            spark.sparkContext.setJobGroup(group, "sparkstate migrate", interruptOnCancel=True)
            box["answer"] = spark._jvm.io.sparkstate.tools.StateCopy.run(spark._jsparkSession, json.dumps(doc))
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    worker = threading.Thread(target=run, name="sparkstate-migrate", daemon=True)
    worker.start()
    tracker = spark.sparkContext.statusTracker()
    while worker.is_alive():
        worker.join(0.5)
        if progress:
            done = sum(info.numCompletedTasks for sid in _stages(tracker, group)
                       if (info := tracker.getStageInfo(sid)) is not None)
            progress(done, plan.partitions)
    if "error" in box:
        raise MigrationError(f"the copy job failed; the checkpoint is unchanged (the query restarts on "
                             f"{plan.source_class}) and re-running the command starts over: "
                             f"{job_failure_message(box['error'], MIGRATION)}") from box["error"]
    if progress:
        progress(plan.partitions, plan.partitions)
    return json.loads(box["answer"])


def _stages(tracker: Any, group: str) -> list[int]:
    stages = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is not None:
            stages.extend(info.stageIds)
    return stages


def _verify(plan: MigrationPlan, results: list[dict[str, Any]]) -> None:
    got = {(r["operatorId"], r["storeName"], r["partition"]) for r in results}
    missing = sorted(plan.expected_results() - got)
    if missing:
        raise MigrationError(f"the copy job reported no result for {missing[:5]}; nothing was switched, re-run")
    bad = [r for r in results if r["sourceRows"] != r["targetRows"] or r["sourceChecksum"] != r["targetChecksum"]
           or r["version"] != plan.target_version or (plan.checkpoint_ids and not r.get("checkpointId"))]
    if bad:
        r = bad[0]
        raise MigrationError(
            f"operator {r['operatorId']} store {r['storeName']} partition {r['partition']}: the target holds "
            f"{r['targetRows']} entries (checksum {r['targetChecksum']}, version {r['version']}) where the source "
            f"holds {r['sourceRows']} ({r['sourceChecksum']}, expected version {plan.target_version}); nothing "
            "was switched, the query still runs on its source provider")


def _publish(plan: MigrationPlan, fio: FileIO, file_sinks: Sequence[str], compact_interval: int,
             results: list[dict[str, Any]]) -> None:
    publisher = BatchPublisher(fio, plan, MIGRATION)
    publisher.claim(publisher.last_offset_entry().with_conf({PROVIDER_CLASS_CONF: plan.target_class}),
                    lambda existing: plan.resume and existing.conf.get(PROVIDER_CLASS_CONF) == plan.target_class)
    publisher.record_in_file_sinks(file_sinks, compact_interval)
    written = {(r["operatorId"], r["storeName"], r["partition"]): r.get("checkpointId") for r in results}
    publisher.commit(plan.stores, plan.partitions, written, "the copy job did not report it; nothing was switched, "
                     "re-run")
