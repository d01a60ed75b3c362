"""What a migration between state store providers will do, decided from the checkpoint alone.

A migration adds one batch to the query, the way Spark's offline repartition and `sparkstate rescale` do:
with B the last committed batch, every store's version B+1 (the state after batch B) is read through the
source provider and written through the target provider as version B+2, the state after the new batch
B+1. That batch's offset log entry repeats batch B's offsets (it reads no new input) with the target
provider's class in its conf, which is where a restarting query takes its provider from; its commit log
entry is written last. The source provider's files stay where they are, and every version the target
writes is newer than anything either provider wrote before, so migrating back and forth never overwrites
a file.

Under checkpoint format v2 (`spark.sql.streaming.stateStore.checkpointFormatVersion=2`, served by Spark's
RocksDB provider and sparkstate, not by its HDFS provider) every commit of a store is an attempt with its
own id, and a commit log entry lists, per operator and partition, the id of each store's recorded attempt.
The copy reads the attempts batch B's entry recorded and writes the target as format v2, and the new
batch's commit log entry lists the target's ids in the same positions.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from ..checkpoint import CheckpointFileManager
from ..checkpoint.location import StoreLocation, open_file_manager, spark_store_location
from ..checkpoint.recorded_attempts import RecordedStore, held_attempt
from ..checkpoint.operator_stores import operator_ids, operator_stores
from ..checkpoint.spark_logs import PROVIDER_CLASS_CONF, SUPPORTED_OPERATORS, OffsetEntry, SparkLogs
from ..config import PREFIX, PROVIDER_CLASS, Settings
from ..errors import AlreadyMigratedError, CheckpointError, MigrationError
from ..rewrite.batch import RewriteBatch, with_recorded_attempts
from ..rewrite.stopped_query import normalize_checkpoint, settled_last_batch
from ..rewrite.tool import MIGRATION
from ..storage import FileIO, join_path

CHECKPOINT_FORMAT_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDERS = {"sparkstate": PROVIDER_CLASS, "hdfs": HDFS_PROVIDER, "rocksdb": ROCKSDB_PROVIDER}
ROCKSDB_VERSION_FILES = (".zip", ".changelog")  # Spark's RocksDB provider: <v>[_<id>].zip, or a change log


def provider_name(cls: str | None) -> str:
    return next((name for name, c in PROVIDERS.items() if c == cls), cls or "unknown")


@dataclass(frozen=True)
class StoreToCopy:
    operator_id: int
    operator_name: str
    store_name: str
    num_cols_prefix_key: int
    single_partition: bool
    key_schema: str    # StructType JSON
    value_schema: str


@dataclass(frozen=True)
class MigrationPlan(RewriteBatch):
    """The migration of every store's source version B+1 through the source provider to the target version B+2
    through the target provider (RewriteBatch)."""

    checkpoint: str
    source_class: str
    target_class: str
    backend: str | None          # the target's sparkstate backend (None: not sparkstate)
    last_committed_batch: int    # B
    partitions: int
    stores: tuple[StoreToCopy, ...]
    resume: bool = False         # batch B+1 is this migration's, written by an interrupted run
    source_conf: dict[str, str] = field(default_factory=dict)
    # Checkpoint format v2: the attempt of version B+1 that batch B's commit log entry recorded, per store
    # ("<op>/<store name>") per partition, and each operator's stores in the commit log's order
    source_checkpoint_ids: dict[str, list[str]] = field(default_factory=dict)
    store_order: dict[str, list[str]] = field(default_factory=dict)

    def expected_results(self) -> set[tuple[int, str, int]]:
        """(operator, store, partition) of every store the copy must report."""
        return {(s.operator_id, s.store_name, p) for s in self.stores
                for p in ([0] if s.single_partition else range(self.partitions))}

    def describe(self) -> str:
        return (f"{provider_name(self.source_class)} -> {provider_name(self.target_class)}"
                + (f" ({self.backend} backend)" if self.backend else ""))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def build_plan(checkpoint: str, to: str, backend: str | None, fio: FileIO,
               ours: OurStores | None = None) -> MigrationPlan:
    """Check the checkpoint and decide the migration, or raise MigrationError saying why not; reads only.
    `ours` (from the settings of the session that migrates) says where sparkstate's stores live: under the
    checkpoint, or under their `stateLocation`, and how to reach them."""
    ours = ours or OurStores(checkpoint, Settings())
    if to not in PROVIDERS:
        raise MigrationError(f"--to must be one of {', '.join(PROVIDERS)}, got {to!r}")
    if backend is not None and to != "sparkstate":
        raise MigrationError(f"--backend applies to --to sparkstate only (got --to {to})")
    target = PROVIDERS[to]
    logs, offsets, commits = committed_logs(fio, checkpoint)
    last, resume = commits[-1], False
    if offsets[-1] == last + 1 and logs.read_offset(last + 1).conf.get(PROVIDER_CLASS_CONF) == target \
            and logs.read_offset(last).conf.get(PROVIDER_CLASS_CONF) != target:
        resume = True  # an interrupted migration to the same provider wrote batch B+1's offsets
    elif offsets[-1] > last:
        raise MigrationError(f"batch {offsets[-1]} was started but never committed (last committed: {last}): "
                             "restart the query once with trigger(availableNow=True), which finishes that batch "
                             "and the input there is, then stops with every batch committed; then migrate")
    try:
        commit = logs.read_commit(last)
    except CheckpointError as e:
        raise MigrationError(str(e)) from None
    if commit.format_version != 1 and target == HDFS_PROVIDER:
        raise MigrationError(
            f"{logs.commit_path(last)} is of checkpoint format v2 (spark.sql.streaming.stateStore."
            "checkpointFormatVersion=2), which Spark's HDFS provider does not serve: migrate to rocksdb or "
            "sparkstate instead")
    entry = logs.read_offset(last)
    source = pinned_provider(entry)
    if source == target:
        if target == PROVIDER_CLASS:
            refuse_backend_switch(fio, checkpoint, last, backend, ours)
        raise already_migrated(checkpoint, source)
    if source not in PROVIDERS.values():
        raise MigrationError(f"the query runs on provider {source}; sparkstate migrates between "
                             f"{', '.join(PROVIDERS)} only")
    partitions = entry.shuffle_partitions
    if partitions is None:
        raise MigrationError(f"offset log entry {last} does not pin the partition count")
    stores = tuple(_stores(fio, checkpoint))
    source_conf = {k: v for k, v in entry.conf.items() if k != PROVIDER_CLASS_CONF}
    if source == ROCKSDB_PROVIDER and _has_changelog(fio, checkpoint):
        source_conf["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] = "true"
    if source == PROVIDER_CLASS:  # read with the backend that wrote the version, whatever the session says
        source_conf[PREFIX + "backend"] = _our_backend(ours, stores[0], last + 1)
    plan = MigrationPlan(checkpoint=checkpoint, source_class=source, target_class=target,
                         backend=(backend or "rocksdb") if to == "sparkstate" else None,
                         last_committed_batch=last, partitions=partitions, stores=stores, resume=resume,
                         source_conf=source_conf)
    if commit.state_unique_ids is not None:
        plan = with_recorded_attempts(plan, commit.state_unique_ids, _source_stores(plan, ours),
                                      _held_attempt(plan, fio), logs.commit_path(last), MIGRATION)
    return plan


def _source_stores(plan: MigrationPlan, ours: OurStores) -> list[RecordedStore[Any]]:
    """Every source store partition, as the match with the attempts the commit log (checkpoint format v2)
    recorded asks about it: sparkstate's by its file manager, Spark's RocksDB provider's by its directory."""
    stores: list[RecordedStore[Any]] = []
    for s in plan.stores:
        for part in [0] if s.single_partition else range(plan.partitions):
            if plan.source_class == PROVIDER_CLASS:
                fm = ours.file_manager(s, part)
                stores.append(RecordedStore(s.operator_id, s.store_name, part, fm, fm.manifests_dir))
            else:
                location = spark_store_location(plan.checkpoint, s.operator_id, part, s.store_name)
                stores.append(RecordedStore(s.operator_id, s.store_name, part, location, location))
    return stores


def _held_attempt(plan: MigrationPlan, fio: FileIO) -> Callable[[Any, list[str]], int | None]:
    """How to tell which candidate attempt of the source version a source store holds (None: none of them)."""
    version = plan.source_version

    def held(handle: Any, candidates: list[str]) -> int | None:
        if plan.source_class == PROVIDER_CLASS:
            return held_attempt(handle, version, candidates)
        # Spark's RocksDB provider: a version's attempt is <v>_<id>.zip or <v>_<id>.changelog
        names = [[join_path(handle, f"{version}_{c}{ext}") for ext in ROCKSDB_VERSION_FILES] for c in candidates]
        return next((i for i, paths in enumerate(names) if any(fio.exists(p) for p in paths)), None)
    return held


def already_migrated(checkpoint: str, provider: str, partitions: int | None = None) -> AlreadyMigratedError:
    """The answer to a migration whose checkpoint already runs on `provider` (class name), with `partitions`
    partitions when a rescale was asked for too."""
    if partitions is None:
        return AlreadyMigratedError(f"the query of {checkpoint} already runs on {provider_name(provider)} ({provider})")
    return AlreadyMigratedError(f"the query of {checkpoint} already runs on {provider_name(provider)} with "
                                f"{partitions} partitions")


def migrated_already(checkpoint: str, to: str, backend: str | None, partitions: int | None,
                     fio: FileIO) -> AlreadyMigratedError | None:
    """What the migration raises for a query whose last committed batch, with no batch started after it,
    already runs on provider `to` (and has `partitions` partitions, if given): read from the logs alone, so
    that a migration run again says so without starting Spark. None for anything else, and for a sparkstate
    `backend` to compare with the stores' (read with the session's settings): the job then migrates,
    resumes or refuses."""
    target = PROVIDERS.get(to)
    if target is None or (backend is not None and target == PROVIDER_CLASS):
        return None
    checkpoint = normalize_checkpoint(checkpoint)
    entry = settled_last_batch(fio, checkpoint)  # None after a started batch: an interrupted migration resumes
    if entry is None:
        return None
    if pinned_provider(entry) != target or (partitions is not None and entry.shuffle_partitions != partitions):
        return None
    return already_migrated(checkpoint, target, partitions)


def committed_logs(fio: FileIO, checkpoint: str) -> tuple[SparkLogs, list[int], list[int]]:
    """(Spark's logs, offset batches, commit batches) of a checkpoint with at least one committed batch, or
    MigrationError saying what it lacks."""
    logs = SparkLogs(fio, checkpoint)
    try:
        offsets, commits = logs.committed()
    except CheckpointError as e:
        raise MigrationError(str(e)) from None
    return logs, offsets, commits


def pinned_provider(entry: OffsetEntry) -> str:
    """The provider class an offset log entry pins (Spark's default, HDFS, when it names none)."""
    return entry.conf.get(PROVIDER_CLASS_CONF) or HDFS_PROVIDER


def _stores(fio: FileIO, checkpoint: str) -> list[StoreToCopy]:
    state = join_path(checkpoint, "state")
    for op in _operator_ids(fio, checkpoint):
        if _lists(fio, join_path(state, str(op), "_metadata", "v2")):
            raise MigrationError(f"operator {op} keeps operator metadata v2 (transformWithState): its state, in "
                                 "column families, cannot be migrated")
    try:
        found = operator_stores(fio, checkpoint)
    except CheckpointError as e:
        raise MigrationError(f"{e}; transformWithState state cannot be migrated") from None
    for s in found:
        if s.operator_name is not None and s.operator_name not in SUPPORTED_OPERATORS:
            raise MigrationError(f"operator {s.operator_id} is {s.operator_name!r}, whose state sparkstate cannot "
                                 f"migrate exactly; supported: {', '.join(sorted(set(SUPPORTED_OPERATORS.values())))}")
    if not found:
        raise MigrationError(f"{checkpoint} has no state (no stateful operator): nothing to migrate; a "
                             "stateless query can change its provider setting directly")
    return [StoreToCopy(s.operator_id, s.operator_name or "unnamed", s.store_name, s.num_cols_prefix_key,
                        s.single_partition, json.dumps(s.key_schema), json.dumps(s.value_schema)) for s in found]


def _operator_ids(fio: FileIO, checkpoint: str) -> list[int]:
    try:
        return operator_ids(fio, checkpoint)
    except CheckpointError as e:
        raise MigrationError(str(e)) from None


def _lists(fio: FileIO, directory: str) -> bool:
    try:
        return bool(fio.list(directory))
    except (FileNotFoundError, NotADirectoryError):
        return False


def refuse_backend_switch(fio: FileIO, checkpoint: str, last_committed: int, backend: str | None,
                          ours: OurStores) -> None:
    """A query on sparkstate asked to move to sparkstate with `backend`: a checkpoint keeps the backend it was
    created with, so another one is refused with the two runs that switch it, not passed over."""
    if backend is None:
        return
    stores = _stores(fio, checkpoint)
    if not stores:
        return
    current = _our_backend(ours, stores[0], last_committed + 1)
    if current != backend:
        raise MigrationError(
            f"the query of {checkpoint} runs on sparkstate with the {current} backend, and a checkpoint keeps the "
            "backend it was created with: migrate does not switch it in place. Switch it in two runs, through "
            f"Spark's RocksDB provider: `sparkstate migrate --checkpoint {checkpoint} --to rocksdb`, then "
            f"`sparkstate migrate --checkpoint {checkpoint} --to sparkstate --backend {backend}` (each with "
            "--file-sink for a file sink)")


class OurStores:
    """sparkstate's stores of the query at `checkpoint`: under it, or under the `stateLocation` of `settings`
    (checkpoint.location), opened with the storage options of `settings` and the Hadoop conf's `fs.s3a.*`
    entries `hadoop_s3a` (S3 endpoint, credentials)."""

    def __init__(self, checkpoint: str, settings: Settings, hadoop_s3a: Mapping[str, str] | None = None) -> None:
        self.checkpoint, self.settings = checkpoint, settings
        self._hadoop_s3a = dict(hadoop_s3a or {})

    def file_manager(self, store: StoreToCopy, partition: int) -> CheckpointFileManager:
        location = StoreLocation(spark_store_location(self.checkpoint, store.operator_id, partition, store.store_name),
                                 store.operator_id, partition, store.store_name,
                                 self.settings.state_location).state_location()
        return open_file_manager(location, self.settings, self._hadoop_s3a)


def _our_backend(ours: OurStores, store: StoreToCopy, version: int) -> str:
    fm = ours.file_manager(store, 0)
    try:
        return fm.read_manifest(version).backend
    except CheckpointError as e:
        hint = "" if ours.settings.state_location else (
            f"; if the query set {PREFIX}stateLocation, pass it (--conf {PREFIX}stateLocation=...)")
        raise MigrationError(f"operator {store.operator_id} store {store.store_name} partition 0: version "
                             f"{version} cannot be read ({e}){hint}; `sparkstate verify` says more") from None


def _has_changelog(fio: FileIO, checkpoint: str) -> bool:
    try:
        return any(i.name.endswith(".changelog") for i in fio.list_info(join_path(checkpoint, "state"), recursive=True))
    except OSError:
        return False


def plan_for_job(plan: MigrationPlan, conf: dict[str, str], hadoop_conf: dict[str, str],
                 state_root: str) -> dict[str, Any]:
    """The JSON the JVM copy job (`io.sparkstate.tools.StateCopy`) reads."""
    target_conf = {PREFIX + "backend": plan.backend} if plan.backend else {}
    # the partition count the stores were written with (Spark hands it to providers in the Hadoop conf;
    # sparkstate's shim checks every key's routing by it)
    hadoop_conf = {**hadoop_conf, "spark.sql.streaming.internal.stateStore.partitions": str(plan.partitions),
                   "spark.sql.shuffle.partitions": str(plan.partitions)}
    # both providers run with the checkpoint's format, whatever the session running the migration says
    conf = {**conf, CHECKPOINT_FORMAT_CONF: "2" if plan.checkpoint_ids else "1"}
    return {
        "stateRoot": state_root, "sourceClass": plan.source_class, "targetClass": plan.target_class,
        "sourceVersion": plan.source_version, "targetBaseVersion": plan.source_version,
        "partitions": plan.partitions, "conf": conf, "sourceConf": plan.source_conf, "targetConf": target_conf,
        "hadoopConf": hadoop_conf, "checkpointIds": plan.checkpoint_ids,
        "stores": [{"operatorId": s.operator_id, "storeName": s.store_name, "keySchema": s.key_schema,
                    "valueSchema": s.value_schema, "numColsPrefixKey": s.num_cols_prefix_key,
                    "singlePartition": s.single_partition,
                    "sourceIds": plan.source_checkpoint_ids.get(f"{s.operator_id}/{s.store_name}", [])}
                   for s in plan.stores],
    }
