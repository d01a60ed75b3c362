"""The driver side of a rescale: lock, plan, one Spark job over the new partitions, then the metadata.

Order of writes (each step is safe to interrupt; re-running the command with the same N finishes it):

1. `<ckpt>/sparkstate-rescale/lock` (put-if-absent): one rescale at a time.
2. The Spark job: task p stages every store of new partition p (data files under fresh names in the
   store's `sparkstate/files/`, manifest in `<ckpt>/sparkstate-rescale/<plan>/manifests/`, then a done
   marker). Nothing the query reads has changed yet: an interruption here leaves the original checkpoint
   usable as it was (the unreferenced files are orphans, like those of a failed commit).
3. `offsets/<N+1>`: a copy of `offsets/<N>` pinning the new partition count. This is exactly Spark 4.3's
   repartition batch: from here on Spark itself refuses to restart the query until the batch is
   committed (`checkUnfinishedRepartitionOnRestart`), so a half-published state can never be run.
4. Publish each staged manifest as `manifests/<N+2>.manifest` of its store (put-if-absent); set the new
   partition count in each operator's metadata (`state/<op>/_metadata/metadata`, read by Spark's
   `state-metadata` source; Spark 3.5 writes none); give each file sink named by the caller an entry for batch N+1
   (`rewrite/file_sink.py`).
5. `commits/<N+1>`: a copy of `commits/<N>`. The rescale is complete; staging and lock are removed.

Old partitions keep all their versions; version N+2 is new. Retention deletes old files later.
"""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..checkpoint import CheckpointFileManager, Manifest
from ..checkpoint.location import open_file_manager
from ..checkpoint.operator_stores import metadata_path
from ..checkpoint.spark_logs import rewrite_operator_partitions
from ..config import PREFIX
from ..engine import StoreSpec
from ..errors import CheckpointError, RescaleError
from ..rewrite import file_sink
from ..rewrite.batch import BatchPublisher
from ..rewrite.file_sink import (
    COMPACT_INTERVAL_KEY,
    DEFAULT_COMPACT_INTERVAL,
    check_file_sink,
    compact_interval_setting,
)
from ..rewrite.job_failure import job_failure_message
from ..rewrite.lock import WORK_DIR, RewriteLock
from ..rewrite.session import s3a_entries, session_conf, session_s3a, session_sparkstate_conf
from ..rewrite.stopped_query import normalize_checkpoint, refuse_if_running
from ..rewrite.tool import RESCALE
from ..storage import FileIO, fileio_for, join_path
from ..storage.local import local_path_or_none
from .plan import Plan, build_plan, store_spec_doc
from .task import done_marker_path, staged_manifest_path

ProgressFn = Callable[["Progress"], None]


@dataclass
class Progress:
    partitions_done: int
    partitions_total: int
    bytes_moved: int
    rows_moved: int
    phase: str  # "staging", "publishing", "done"


@dataclass
class RescaleSummary:
    checkpoint: str
    backend: str             # of the stores, read from their manifests (and written the same)
    old_partitions: int
    new_partitions: int
    batch_id: int            # the synthetic repartition batch
    state_version: int       # the version every new store was written as
    operators: int
    stores: int              # stores written (all operators, all new partitions)
    rows: int
    data_bytes: int          # key + value bytes copied
    bytes_uploaded: int      # bytes of checkpoint files written
    partitions_skipped: int  # finished by an earlier, interrupted run
    seconds: float
    phases: dict             # seconds per phase: plan, job, publish; taskSecondsMax: slowest task's own time

    def describe(self) -> str:
        return (f"rescaled {self.checkpoint}: {self.old_partitions} -> {self.new_partitions} partitions as batch "
                f"{self.batch_id} (state version {self.state_version}, {self.backend} backend); "
                f"{self.operators} operator(s), "
                f"{self.stores} store(s) written, {self.rows} entries, {_mb(self.data_bytes)} of state moved, "
                f"{_mb(self.bytes_uploaded)} written, {self.partitions_skipped} partition(s) reused from an "
                f"interrupted run, in {self.seconds:.1f} s")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def rescale(spark: Any, checkpoint: str, num_partitions: int, *, conf: dict[str, str] | None = None,
            progress: ProgressFn | None = None, file_sinks: Sequence[str] = ()) -> RescaleSummary:
    """Rescale the state of a stopped sparkstate query to `num_partitions` partitions (see module doc).
    `file_sinks`: the output paths of the query's file sinks, whose own logs get the rescale's batch."""
    t0 = time.perf_counter()
    checkpoint = normalize_checkpoint(checkpoint)
    refuse_if_running(spark, checkpoint, RESCALE)
    settings_conf = session_sparkstate_conf(spark)
    settings_conf.update({k: v for k, v in (conf or {}).items() if k.startswith(PREFIX)})
    s3a = {**session_s3a(spark), **s3a_entries(conf or {})}
    fio = fileio_for(checkpoint)
    lock = RewriteLock(fio, checkpoint, RESCALE)
    lock.acquire(f"rescale to {num_partitions} partitions")
    try:
        plan = build_plan(checkpoint, num_partitions, settings_conf, fio, s3a)
        for sink in file_sinks:
            if not plan.resume_metadata:
                check_file_sink(fileio_for(sink), sink, plan.last_committed_batch, RESCALE)
        sink_compact_interval = compact_interval_setting(
            (conf or {}).get(COMPACT_INTERVAL_KEY) or spark.conf.get(COMPACT_INTERVAL_KEY, None), RESCALE)
        t_plan = time.perf_counter()
        _remove_other_staging(fio, plan)
        fio.write_bytes_atomic(join_path(plan.staging_dir, "plan.json"), plan.to_json(secrets=False).encode())
        results = _run_job(spark, plan, fio, progress)
        t_job = time.perf_counter()
        refuse_if_running(spark, checkpoint, RESCALE)
        _publish(plan, fio, progress, results, file_sinks, sink_compact_interval)
        _remove_staging(fio, plan)
        t_publish = time.perf_counter()
    finally:
        lock.release()
    rows = sum(r["rows"] for r in results)
    moved = sum(r["dataBytes"] for r in results)
    if progress:
        progress(Progress(len(results), plan.new_partitions, moved, rows, "done"))
    return RescaleSummary(
        checkpoint=checkpoint, backend=plan.backend, old_partitions=plan.old_partitions,
        new_partitions=plan.new_partitions,
        batch_id=plan.rewrite_batch, state_version=plan.target_version,
        operators=len({s.operator_id for s in plan.stores}), stores=sum(r["stores"] for r in results),
        rows=rows, data_bytes=moved, bytes_uploaded=sum(r["bytesUploaded"] for r in results),
        partitions_skipped=sum(1 for r in results if r.get("skipped")), seconds=time.perf_counter() - t0,
        phases={"plan": round(t_plan - t0, 3), "job": round(t_job - t_plan, 3), "publish": round(t_publish - t_job, 3),
                "taskSecondsMax": round(max((r.get("ms", 0) for r in results), default=0) / 1000, 3)})


def repair_file_sink(checkpoint: str, sink_path: str, default_interval: int = DEFAULT_COMPACT_INTERVAL) -> list[int]:
    """Add the empty entries of the committed rescale and migration batches the file sink's log at `sink_path`
    lacks (a checkpoint rescaled or migrated without `file_sinks`); returns the batch ids added
    (rewrite/file_sink.py)."""
    return file_sink.repair_file_sink(checkpoint, sink_path, default_interval, RESCALE)


# ---- the job --------------------------------------------------------------------------------------

def _run_job(spark: Any, plan: Plan, fio: FileIO, progress: ProgressFn | None) -> list[dict]:
    """One Spark job: JVM tasks that pipe task groups to `python -m sparkstate.rescaling.task_process`
    (see that module for why not PySpark workers). Groups are dealt to at most one task per core, so each
    core starts one Python process."""
    # Not at module level: the package imports this module, and task_process must not be imported before
    # `python -m` runs it in the task processes.
    from .task_process import parse_answers, request_line

    sc = spark.sparkContext
    plan_json = plan.to_json()
    groups = plan.task_groups(sc.defaultParallelism)
    command = [_task_python(spark), "-m", "sparkstate.rescaling.task_process"]
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            sc.setJobGroup(f"sparkstate-rescale-{plan.plan_id}", f"sparkstate rescale {plan.checkpoint}",
                           interruptOnCancel=False)
            jvm = sc._jvm
            requests, argv = jvm.java.util.ArrayList(), jvm.java.util.ArrayList()
            for parts in groups:
                requests.add(request_line(plan_json, parts))
            for arg in command:
                argv.add(arg)
            slices = max(1, min(len(groups), sc.defaultParallelism))
            box["lines"] = [str(line) for line in sc._jsc.parallelize(requests, slices).pipe(argv).collect()]
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e

    thread = threading.Thread(target=work, name="sparkstate-rescale-job", daemon=True)
    thread.start()
    last = None
    while thread.is_alive():
        thread.join(0.5)
        if progress:
            state = _progress_from_markers(plan, fio)
            if state != last:
                progress(state)
                last = state
    if "error" in box:
        error = box["error"]
        raise RescaleError(f"the rescale job failed; the checkpoint is unchanged and re-running the command "
                           f"continues where it stopped: {job_failure_message(error, RESCALE)}") from error
    results, errors = parse_answers(box["lines"])
    if errors:
        raise RescaleError(f"the rescale job failed; the checkpoint is unchanged and re-running the command "
                           f"continues where it stopped: {errors[0]}")
    missing = sorted(set(p for g in groups for p in g) - {r["partition"] for r in results})
    if missing:
        raise RescaleError(f"the rescale job returned no result for new partition(s) {missing}; the checkpoint "
                           "is unchanged and re-running the command continues where it stopped")
    results.sort(key=lambda r: r["partition"])
    if progress:
        progress(_progress_from_markers(plan, fio))
    return results


def _task_python(spark: Any) -> str:
    """The store workers' interpreter, by the shim's rule: the pythonExec setting, else
    spark.pyspark.python, else PYSPARK_PYTHON, else python3."""
    conf = dict(spark.sparkContext.getConf().getAll())
    conf.update(session_conf(spark))
    for value in (conf.get(PREFIX + "pythonExec"), conf.get("spark.pyspark.python"), os.environ.get("PYSPARK_PYTHON")):
        if value and value.strip():
            return value.strip()
    return "python3"


def _progress_from_markers(plan: Plan, fio: FileIO) -> Progress:
    done = moved = rows = 0
    for p in range(plan.new_partitions):
        try:
            stats = json.loads(fio.read_bytes(done_marker_path(plan, p)))
        except (FileNotFoundError, ValueError):
            continue
        done += 1
        moved += int(stats.get("dataBytes", 0))
        rows += int(stats.get("rows", 0))
    return Progress(done, plan.new_partitions, moved, rows, "staging")


# ---- publishing ------------------------------------------------------------------------------------

def _publish(plan: Plan, fio: FileIO, progress: ProgressFn | None, results: list[dict],
             file_sinks: Sequence[str] = (), compact_interval: int = DEFAULT_COMPACT_INTERVAL) -> None:
    staged: list[tuple[CheckpointFileManager, bytes, str | None]] = []
    new_ids: dict[tuple[int, str, int], str | None] = {}  # (op, store, partition) -> attempt id (format v2)
    for store in plan.stores:
        for part in ([0] if store.single_partition else range(plan.new_partitions)):
            path = staged_manifest_path(plan, store, part)
            try:
                data = fio.read_bytes(path)
            except FileNotFoundError:
                raise RescaleError(f"staged manifest {path} is missing after the job; re-run the rescale") from None
            checkpoint_id = Manifest.from_bytes(data, path).checkpoint_id
            new_ids[(store.operator_id, store.store_name, part)] = checkpoint_id
            spec = StoreSpec.from_json(store_spec_doc(plan, store, part, "publish"))
            staged.append((open_file_manager(spec.state_location(), spec.settings, spec.hadoop_s3a), data,
                           checkpoint_id))
    if progress:
        progress(Progress(len(results), plan.new_partitions, sum(r["dataBytes"] for r in results),
                          sum(r["rows"] for r in results), "publishing"))
    publisher = BatchPublisher(fio, plan, RESCALE)
    # 3. the repartition batch (Spark's marker of an unfinished repartition until it is committed)
    publisher.claim(publisher.last_offset_entry().with_partitions(plan.new_partitions),
                    lambda existing: plan.resume_metadata and existing.shuffle_partitions == plan.new_partitions)
    # 4. the stores' new version
    for fm, data, checkpoint_id in staged:
        try:
            fm.publish_staged_manifest(plan.target_version, data, checkpoint_id)
        except CheckpointError as e:
            raise RescaleError(f"{e} (changed by someone else during the rescale)") from e
    for op in sorted({store.operator_id for store in plan.stores}):  # what Spark's state-metadata source reads
        if fio.exists(metadata_path(plan.checkpoint, op)):  # Spark 3.5 writes none
            rewrite_operator_partitions(fio, metadata_path(plan.checkpoint, op), plan.new_partitions)
    publisher.record_in_file_sinks(file_sinks, compact_interval)
    # 5. commit the batch
    publisher.commit(plan.stores, plan.new_partitions, new_ids, "a staged manifest has no checkpoint id; re-run "
                     "the rescale")


def _remove_staging(fio: FileIO, plan: Plan) -> None:
    _delete_tree(fio, plan.staging_dir)


def _remove_other_staging(fio: FileIO, plan: Plan) -> None:
    """Staging of abandoned plans (another target, or a checkpoint that moved on since) is our garbage."""
    root = join_path(plan.checkpoint, WORK_DIR)
    local = local_path_or_none(root)
    if local is None or not os.path.isdir(local):
        return
    for name in os.listdir(local):
        if name.startswith("batch") and name != plan.plan_id:
            shutil.rmtree(os.path.join(local, name), ignore_errors=True)


def _delete_tree(fio: FileIO, path: str) -> None:
    local = local_path_or_none(path)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)
        return
    infos = fio.list_info(path, recursive=True)
    fio.delete_many([join_path(path, i.name) for i in infos])


