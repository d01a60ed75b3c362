"""Planning a rescale: read the checkpoint, validate everything, and describe the work (read-only).

Everything that could make the rescale inexact is checked here, before anything is written: the query's
provider, the offset/commit log formats, an uncommitted or abandoned batch, every operator's kind and
stores, every old store's latest committed version and its backend.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from math import gcd
from typing import Any

from ..checkpoint import CheckpointFileManager
from ..checkpoint.location import open_file_manager, spark_store_location
from ..checkpoint.operator_stores import DEFAULT_STORE, JOIN_STORES, operator_stores
from ..checkpoint.recorded_attempts import RecordedStore, held_attempt
from ..checkpoint.spark_logs import PROVIDER_CLASS_CONF, SUPPORTED_OPERATORS, SparkLogs
from ..config import PREFIX, PROVIDER_CLASS, Settings
from ..errors import AlreadyRescaledError, CheckpointError, RescaleError
from ..rewrite.batch import RewriteBatch, with_recorded_attempts
from ..rewrite.lock import WORK_DIR
from ..rewrite.stopped_query import normalize_checkpoint, settled_last_batch
from ..rewrite.tool import RESCALE
from ..storage import FileIO, fileio_for, join_path



@dataclass(frozen=True)
class StorePlan:
    operator_id: int
    operator_name: str
    store_name: str
    num_cols_prefix_key: int
    single_partition: bool
    key_schema_json: str
    value_schema_json: str

    @property
    def label(self) -> str:
        return f"op {self.operator_id} ({self.operator_name}) store {self.store_name}"


@dataclass(frozen=True)
class Plan(RewriteBatch):
    """Everything an executor task needs; JSON-serializable (shipped in the task closure). The old stores'
    version N+1 is the source version, the new stores' N+2 the target version (RewriteBatch)."""

    checkpoint: str
    old_partitions: int
    new_partitions: int
    last_committed_batch: int      # batch N
    backend: str
    settings_conf: dict[str, str]  # sparkstate settings (full keys) for opening and writing stores
    stores: tuple[StorePlan, ...]
    resume_metadata: bool = False  # offsets/<N+1> already written by an earlier, interrupted run
    # Checkpoint format v2: the attempt of the old version that the commit log recorded, per store
    # ("<op>/<store name>") per old partition, and each operator's stores in the commit log's order
    source_checkpoint_ids: dict[str, list[str]] = field(default_factory=dict)
    store_order: dict[str, list[str]] = field(default_factory=dict)
    # The session's Hadoop `fs.s3a.*` entries (S3 endpoint, credentials) for state on S3. May hold secrets:
    # shipped to the tasks, never in repr nor in the staging copy of the plan (`to_json(secrets=False)`).
    hadoop_s3a: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def plan_id(self) -> str:
        return f"batch{self.rewrite_batch}-to{self.new_partitions}"

    @property
    def staging_dir(self) -> str:
        return join_path(self.checkpoint, WORK_DIR, self.plan_id)

    def settings(self) -> Settings:
        return Settings.parse({**self.settings_conf, PREFIX + "backend": self.backend})

    def source_partitions(self, store: StorePlan, new_partition: int) -> list[int]:
        """Old partitions that can hold keys of `new_partition`: kg = o (mod old) and kg = p (mod new)
        have a common solution only if o = p (mod gcd(old, new))."""
        if store.single_partition:
            return [0] if new_partition == 0 else []
        g = gcd(self.old_partitions, self.new_partitions)
        return [o for o in range(self.old_partitions) if o % g == new_partition % g]

    def task_groups(self, parallelism: int) -> list[list[int]]:
        """New partitions grouped so one task scans each of their common source stores once: partitions
        with the same residue mod gcd(old, new) read the same old partitions. Groups are split (largest
        first) until there are at least `parallelism` tasks, or one per new partition."""
        g = gcd(self.old_partitions, self.new_partitions)
        groups = [[p for p in range(self.new_partitions) if p % g == r] for r in range(g)]
        groups = [grp for grp in groups if grp]
        while len(groups) < max(1, parallelism) and any(len(grp) > 1 for grp in groups):
            groups.sort(key=len, reverse=True)
            big = groups.pop(0)
            half = (len(big) + 1) // 2
            groups += [big[:half], big[half:]]
        return sorted(groups)

    def to_json(self, secrets: bool = True) -> str:
        """The plan as the tasks read it; `secrets=False`: without the `fs.s3a.*` entries, for files."""
        doc = asdict(self)
        if not secrets:
            doc["hadoop_s3a"] = {}
        return json.dumps(doc, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        doc = json.loads(text)
        doc["stores"] = tuple(StorePlan(**s) for s in doc["stores"])
        return cls(**doc)


def store_spec_doc(plan: Plan, store: StorePlan, part: int, instance_id: str) -> dict[str, Any]:
    return {
        "checkpointLocation": spark_store_location(plan.checkpoint, store.operator_id, part, store.store_name),
        "operatorId": store.operator_id, "partitionId": part, "storeName": store.store_name,
        "instanceId": instance_id, "queryRunId": "sparkstate-rescale",
        "keySchema": store.key_schema_json, "valueSchema": store.value_schema_json,
        "numColsPrefixKey": store.num_cols_prefix_key, "numPartitions": plan.new_partitions,
        "minVersionsToRetain": 1 << 30,
        "settings": {**plan.settings_conf, PREFIX + "backend": plan.backend},
        "hadoopS3a": plan.hadoop_s3a,
    }


def build_plan(checkpoint: str, num_partitions: int, settings_conf: dict[str, str] | None = None,
               fileio: FileIO | None = None, hadoop_s3a: dict[str, str] | None = None) -> Plan:
    """Validate the checkpoint and return the plan, or raise RescaleError saying why not. `hadoop_s3a`: the
    Hadoop conf's `fs.s3a.*` entries that reach state on S3."""
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise RescaleError(f"--partitions must be a positive integer, got {num_partitions!r}")
    checkpoint = normalize_checkpoint(checkpoint)
    settings_conf = {k: v for k, v in (settings_conf or {}).items() if k.startswith(PREFIX)}
    settings = Settings.parse(settings_conf)  # validates
    fio = fileio or fileio_for(checkpoint)
    logs = SparkLogs(fio, checkpoint)
    try:
        offsets, commits = logs.committed()
    except CheckpointError as e:
        raise RescaleError(str(e)) from None
    last_commit, last_offset = commits[-1], offsets[-1]
    resume = False
    if last_offset > last_commit:
        if last_offset == last_commit + 1 and logs.is_repartition_batch(last_offset):
            pinned = logs.read_offset(last_offset).shuffle_partitions
            if pinned != num_partitions:
                raise RescaleError(
                    f"batch {last_offset} is an unfinished rescale to {pinned} partitions; finish it first "
                    f"(`sparkstate rescale --checkpoint {checkpoint} --partitions {pinned}`)")
            resume = True
        else:
            raise RescaleError(
                f"batch {last_offset} was started but never committed (last committed: {last_commit}); "
                "restart the query once with trigger(availableNow=True), which finishes that batch and the "
                "input there is, then stops with every batch committed; then rescale")
    elif last_offset < last_commit:
        raise RescaleError(f"commit log ({last_commit}) is ahead of the offset log ({last_offset}); "
                           "the checkpoint is inconsistent")
    entry = logs.read_offset(last_commit)
    commit = logs.read_commit(last_commit)
    provider = entry.conf.get(PROVIDER_CLASS_CONF)
    if provider != PROVIDER_CLASS:
        raise RescaleError(
            f"the query of {checkpoint} runs with state store provider {provider!r}, not sparkstate "
            f"({PROVIDER_CLASS}); move it to sparkstate and rescale in one run with `sparkstate migrate "
            f"--checkpoint {checkpoint} --to sparkstate --partitions N`, or, on Spark's RocksDB provider, use "
            "spark._streamingCheckpointManager.repartition")
    old = entry.shuffle_partitions
    if old is None:
        raise RescaleError(f"offset log entry {last_commit} does not pin the partition count")
    if old == num_partitions and not resume:
        raise _already_rescaled(checkpoint, num_partitions)
    if resume:
        # The interrupted run already wrote offsets/<N+1>; the source layout is that of batch N.
        entry = logs.read_offset(last_commit)
    stores = _discover_stores(fio, checkpoint)
    plan = Plan(checkpoint=checkpoint, old_partitions=old, new_partitions=num_partitions,
                last_committed_batch=last_commit, backend=settings.backend, settings_conf=settings_conf,
                stores=tuple(stores), resume_metadata=resume, hadoop_s3a=dict(hadoop_s3a or {}))
    if commit.state_unique_ids is not None:
        plan = with_recorded_attempts(
            plan, commit.state_unique_ids, _source_stores(plan),
            lambda fm, candidates: held_attempt(fm, plan.source_version, candidates), logs.commit_path(last_commit),
            RESCALE)
    return replace(plan, backend=_check_source_versions(plan))


def _already_rescaled(checkpoint: str, num_partitions: int) -> AlreadyRescaledError:
    return AlreadyRescaledError(f"the state of {checkpoint} already has {num_partitions} partitions")


def rescaled_already(checkpoint: str, num_partitions: int, fileio: FileIO) -> AlreadyRescaledError | None:
    """What `build_plan` raises for a sparkstate query whose last committed batch, with no batch started
    after it, already has `num_partitions` partitions: read from the logs alone, so that a rescale run again
    says so without starting Spark. None for anything else, which `build_plan` then plans or refuses."""
    checkpoint = normalize_checkpoint(checkpoint)
    entry = settled_last_batch(fileio, checkpoint)
    if entry is not None and entry.conf.get(PROVIDER_CLASS_CONF) == PROVIDER_CLASS \
            and entry.shuffle_partitions == num_partitions:
        return _already_rescaled(checkpoint, num_partitions)
    return None


def _discover_stores(fio: FileIO, checkpoint: str) -> list[StorePlan]:
    try:
        found = operator_stores(fio, checkpoint)
    except CheckpointError as e:
        raise RescaleError(str(e)) from None
    if not found:
        raise RescaleError(f"{checkpoint} has no state (no stateful operator): nothing to rescale; the "
                           "partition count of a stateless query can be changed directly")
    for op in sorted({s.operator_id for s in found}):
        of_op = [s for s in found if s.operator_id == op]
        name, names = of_op[0].operator_name, [s.store_name for s in of_op]
        if name is not None and name not in SUPPORTED_OPERATORS:
            raise RescaleError(f"operator {op} is {name!r}, whose state layout sparkstate does not "
                               f"know; supported: {', '.join(sorted(SUPPORTED_OPERATORS))}")
        if name == "symmetricHashJoin" or (name is None and len(names) > 1):
            if sorted(names) != sorted(JOIN_STORES):
                raise RescaleError(f"operator {op} (stream-stream join) has stores {names}; expected the four "
                                   f"stores of join state format 2: {list(JOIN_STORES)}")
        elif names != [DEFAULT_STORE]:
            raise RescaleError(f"operator {op} ({name}) has stores {names}; expected ['default']")
    return [StorePlan(operator_id=s.operator_id, operator_name=s.operator_name or "unnamed",
                      store_name=s.store_name, num_cols_prefix_key=s.num_cols_prefix_key,
                      single_partition=s.single_partition, key_schema_json=json.dumps(s.key_schema),
                      value_schema_json=json.dumps(s.value_schema))
            for s in found]


def _source_stores(plan: Plan) -> list[RecordedStore[CheckpointFileManager]]:
    """Every old store partition, as the match with the attempts the commit log (checkpoint format v2) recorded
    asks about it: by its file manager, whose attempt manifests say which attempt it holds."""
    from ..engine import StoreSpec

    stores: list[RecordedStore[CheckpointFileManager]] = []
    for store in plan.stores:
        for part in range(1 if store.single_partition else plan.old_partitions):
            spec = StoreSpec.from_json(store_spec_doc(plan, store, part, "plan"))
            fm = open_file_manager(spec.state_location(), spec.settings, spec.hadoop_s3a)
            stores.append(RecordedStore(store.operator_id, store.store_name, part, fm, fm.manifests_dir))
    return stores


def _check_source_versions(plan: Plan) -> str:
    """Every old store must have the latest committed version, all with one backend; returns it."""
    from ..engine import StoreSpec

    backends: dict[str, str] = {}
    for store in plan.stores:
        parts = [0] if store.single_partition else range(plan.old_partitions)
        for part in parts:
            spec = StoreSpec.from_json(store_spec_doc(plan, store, part, "plan"))
            fm = open_file_manager(spec.state_location(), spec.settings, spec.hadoop_s3a)
            try:
                manifest = fm.read_manifest(plan.source_version, plan.source_checkpoint_id(store, part))
            except CheckpointError as e:
                raise RescaleError(
                    f"{store.label} partition {part}: version {plan.source_version} (state after batch "
                    f"{plan.last_committed_batch}) cannot be read: {e}. If the query used the sparkstate "
                    f"stateLocation setting, pass it (--conf {PREFIX}stateLocation=...)") from None
            backends[f"{store.label} partition {part}"] = manifest.backend
    kinds = sorted(set(backends.values()))
    if len(kinds) != 1:
        raise RescaleError(f"the stores use different backends ({backends}); cannot rescale")
    return kinds[0]
