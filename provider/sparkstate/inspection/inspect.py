"""`sparkstate inspect`: what is in a query's checkpoint, read without Spark and without changing anything.

For a sparkstate checkpoint, per store: the retained versions (keys, checkpoint bytes, and the bytes a
version shares with the one before it, from the manifests), and for one version (the newest committed,
or the state after `--batch N`) the contents read through the engine's own `Store`: the number of keys,
the live bytes (key + value), and the key group of every key. Key groups give the balance over the
query's partitions and the balance a rescale to N partitions would give (`pmod(key group, N)`, the rule
Spark routes by), before anything is rescaled. For a version whose values carry idle-state stamps (a query
with a `ttl`), the time since each key's last write, at the batch time of the batch that reads the version:
the distribution a user chooses a duration from.

For a checkpoint of Spark's own providers (HDFS, RocksDB) only what the files say without Spark: the
versions each partition retains, their files and bytes. Their contents take Spark's `statestore` source.
The provider is the one the newest offset log entry pins: after `sparkstate migrate` moved a query's state
out of sparkstate, its sparkstate stores (the state from before the move) are named in a note, not shown.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..checkpoint import CheckpointFileManager
from ..checkpoint.file_manager import versions_of
from ..checkpoint.location import discover_stores, spark_store_location
from ..checkpoint.recorded_attempts import RecordedAttempts, read_recorded_manifest
from ..checkpoint.operator_stores import operator_ids, stores_of_operator
from ..checkpoint.spark_logs import SparkLogs
from ..config import PREFIX, PROVIDER_CLASS, PROVIDER_CLASS_KEY
from ..errors import CheckpointError, SparkstateError
from ..engine.ttl import STAMP_BYTES
from ..keygroups import KEY_GROUP_BYTES, partition_of
from ..storage import FileIO
from .unfinished import unfinished_rewrite

SCAN_ROWS = 65536
SCAN_BYTES = 16 << 20
_STORE_RE = re.compile(r"^(\d+)/(\d+)(?:/(.+))?$")
# Files of Spark's providers: HDFS `<v>.delta` / `<v>.snapshot`, RocksDB `<v>[_<id>].zip` / `.changelog`
_SPARK_FILE_RE = re.compile(r"^(\d+)(?:_[0-9a-f-]+)?\.(delta|snapshot|zip|changelog)$")
_KG_OFFSETS = np.arange(KEY_GROUP_BYTES, dtype=np.int64)
# Upper bounds (ms) of the bins of the time since a key's last write; the last bin is open.
AGE_BINS = (("1m", 60_000), ("10m", 600_000), ("1h", 3_600_000), ("6h", 21_600_000), ("1d", 86_400_000),
            ("7d", 604_800_000), ("30d", 2_592_000_000))
AGE_LABELS = tuple(f"<= {label}" for label, _ in AGE_BINS) + (f"> {AGE_BINS[-1][0]}",)


@dataclass
class StoreSchema:
    operator_id: int
    operator_name: str
    store_name: str
    num_cols_prefix_key: int
    key_schema: dict | None = None
    value_schema: dict | None = None

    def columns(self, which: str) -> str:
        schema = self.key_schema if which == "key" else self.value_schema
        if schema is None:
            return "?"
        return ", ".join(f"{f['name']} {_type_name(f['type'])}" for f in schema.get("fields", []))


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type", "?"))


@dataclass
class VersionFigures:
    version: int
    keys: int | None
    checkpoint_bytes: int       # every file the version lists
    shared_bytes: int           # of those, bytes the version before it lists too
    files: int


@dataclass
class StoreFigures:
    rel: str                    # `<op>/<part>[/<name>]` below the state root
    operator_id: int
    partition_id: int
    store_name: str
    backend: str | None = None
    versions: list[VersionFigures] = field(default_factory=list)
    version: int | None = None  # the version whose contents were read
    checkpoint_id: str | None = None  # its attempt, under checkpoint format v2
    keys: int | None = None
    live_bytes: int | None = None
    problem: str | None = None
    key_groups: np.ndarray | None = field(default=None, repr=False)  # one per key, not in reports
    ages_ms: np.ndarray | None = field(default=None, repr=False)  # per key, with idle-state stamps only

    def figures_of(self, version: int | None) -> VersionFigures | None:
        return next((v for v in self.versions if v.version == version), None)


@dataclass
class Balance:
    """Keys per partition of one operator at some partition count."""

    operator_id: int
    partitions: int
    keys: list[int]

    @property
    def max(self) -> int:
        return max(self.keys, default=0)

    @property
    def mean(self) -> float:
        return sum(self.keys) / len(self.keys) if self.keys else 0.0

    @property
    def skew(self) -> float:
        """max / mean: 1.0 is perfect balance."""
        return self.max / self.mean if self.mean else 1.0


@dataclass
class InspectReport:
    checkpoint: str
    state_root: str
    provider: str | None
    last_batch: int | None
    num_partitions: int | None
    version: int | None                  # the version inspected (state after batch version-1)
    schemas: list[StoreSchema] = field(default_factory=list)
    stores: list[StoreFigures] = field(default_factory=list)
    balance: list[Balance] = field(default_factory=list)     # at the query's partition count
    predicted: list[Balance] = field(default_factory=list)   # at --partitions N
    largest_key_group: dict[int, tuple[int, int]] = field(default_factory=dict)  # op -> (group, keys)
    key_ages: dict[int, list[int]] = field(default_factory=dict)  # op -> keys per AGE_LABELS bin
    notes: list[str] = field(default_factory=list)

    @property
    def ours(self) -> bool:
        return self.provider in (None, PROVIDER_CLASS) and any(s.backend for s in self.stores)

    @property
    def backends(self) -> list[str]:
        return sorted({s.backend for s in self.stores if s.backend})

    def key_group_notes(self) -> list[str]:
        """Per operator, the keys that no rescale can spread: a key group (Spark's hash of the partitioning
        columns, one per key) always goes to one partition, so its keys stay together."""
        out = []
        for op, (group, keys) in sorted(self.largest_key_group.items()):
            if keys == 1:
                out.append(f"operator {op}: every key has a key group of its own")
                continue
            where = f", now in partition {partition_of(group, self.num_partitions)}" if self.num_partitions else ""
            out.append(f"operator {op}: at most {keys:,} keys share one key group ({group}{where}); a rescale "
                       f"keeps a key group's keys in one partition")
        return out

    def retained_versions(self) -> list[int]:
        return sorted({v.version for s in self.stores for v in s.versions})

    def totals_by_version(self) -> list[tuple[int, int, int, int]]:
        """(version, keys, checkpoint bytes, bytes shared with the version before) summed over the stores
        that retain the version."""
        out = []
        for version in self.retained_versions():
            figures = [f for s in self.stores if (f := s.figures_of(version)) is not None]
            out.append((version, sum(f.keys or 0 for f in figures), sum(f.checkpoint_bytes for f in figures),
                        sum(f.shared_bytes for f in figures)))
        return out


def inspect_checkpoint(checkpoint: str, fileio: FileIO, state_fileio: FileIO, state_root: str, *,
                       batch: int | None = None, partitions: int | None = None, read_contents: bool = True,
                       settings_conf: dict[str, str] | None = None, s3a: dict[str, str] | None = None,
                       state_location: str | None = None,
                       progress: Callable[[int, int], None] | None = None) -> InspectReport:
    """Everything `sparkstate inspect` shows; reads only. `batch`: inspect the state after that batch
    (default: the newest committed). `partitions`: also predict the balance after a rescale to it.
    `state_location`: the query's stateLocation that `state_root` derives from; the stores' contents are
    read through it (their files are not under the checkpoint then)."""
    logs = SparkLogs(fileio, checkpoint)
    offsets, commits = logs.offset_batches(), logs.commit_batches()
    provider, num_partitions = None, None
    if offsets:
        entry = logs.read_offset(offsets[-1])
        provider, num_partitions = entry.conf.get(PROVIDER_CLASS_KEY), entry.shuffle_partitions
    last = commits[-1] if commits else None
    if batch is not None and last is not None and batch > last:
        raise SparkstateError(f"--batch {batch} was never committed: the commit log ends at batch {last}")
    version = (batch + 1) if batch is not None else (last + 1 if last is not None else None)
    report = InspectReport(checkpoint, state_root, provider, last, num_partitions, version)
    unfinished = unfinished_rewrite(logs, offsets, commits, checkpoint)
    if unfinished:
        report.notes.append(unfinished)
    report.schemas = _schemas(fileio, checkpoint)
    settings = dict(settings_conf or {})
    if state_location:
        settings[PREFIX + "stateLocation"] = state_location
    rels = discover_stores(state_root, state_fileio)
    if rels and provider not in (None, PROVIDER_CLASS):  # moved out of sparkstate by `sparkstate migrate`
        report.notes.append(f"sparkstate's stores under {state_root} hold the state from before the query "
                            f"moved to {provider}; the query does not read them")
        rels = []
    if rels:
        attempts = RecordedAttempts(logs, commits)
        with tempfile.TemporaryDirectory(prefix="sparkstate-inspect-") as scratch:
            for i, rel in enumerate(rels):
                report.stores.append(_our_store(report, rel, state_fileio, attempts, read_contents, scratch,
                                                settings, s3a or {}))
                if progress:
                    progress(i + 1, len(rels))
        report.stores.sort(key=lambda s: (s.operator_id, s.partition_id, s.store_name))  # numeric: 0/2 before 0/10
        _balances(report, partitions)
        _key_ages(report)
    else:
        report.stores = _spark_provider_stores(fileio, checkpoint)
        if report.stores:
            report.notes.append("state written by Spark's provider: versions, files and bytes only (its "
                                "contents: spark.read.format('statestore'))")
    if batch is not None and report.ours and not any(s.figures_of(version) for s in report.stores):
        raise SparkstateError(f"no store retains version {version} (the state after batch {batch}); retained: "
                              f"{report.retained_versions()}")
    return report


def _schemas(fileio: FileIO, checkpoint: str) -> list[StoreSchema]:
    """Each operator's stores with their schemas (checkpoint.operator_stores); an operator whose metadata or
    schema files cannot be read is left out (inspect reports what it can)."""
    out: list[StoreSchema] = []
    try:
        ops = operator_ids(fileio, checkpoint)
    except (CheckpointError, OSError):
        return out
    for op in ops:
        try:
            stores = stores_of_operator(fileio, checkpoint, op)
        except (CheckpointError, ValueError, KeyError, OSError):
            continue
        out.extend(StoreSchema(s.operator_id, s.operator_name or "unnamed", s.store_name, s.num_cols_prefix_key,
                               s.key_schema, s.value_schema) for s in stores)
    return out


def _our_store(report: InspectReport, rel: str, io: FileIO, attempts: RecordedAttempts, read_contents: bool,
               scratch: str, settings_conf: dict[str, str], s3a: dict[str, str]) -> StoreFigures:
    m = _STORE_RE.match(rel)
    op, part, name = (int(m.group(1)), int(m.group(2)), m.group(3) or "default") if m else (-1, -1, rel)
    figures = StoreFigures(rel, op, part, name)
    fm = CheckpointFileManager(io.join(report.state_root, rel), io)
    try:
        names = io.list(fm.manifests_dir)
    except (CheckpointError, OSError) as e:
        figures.problem = f"manifests unreadable: {e}"
        return figures
    versions = versions_of(names)
    attempt_of: dict[int, str | None] = {}
    before: frozenset[str] = frozenset()
    for v in versions:
        try:
            candidates = attempts.candidates(v, op, part) if m else None
            manifest = read_recorded_manifest(fm, v, candidates, names)
        except (CheckpointError, OSError) as e:
            figures.problem = f"version {v}: {e}"
            continue
        attempt_of[v] = None if candidates is None else manifest.checkpoint_id
        figures.backend = manifest.backend
        sizes = {f.remote: f.size for f in manifest.files}
        private = sum(p.size for p in manifest.private_files)
        figures.versions.append(VersionFigures(
            v, manifest.num_keys, sum(sizes.values()) + private,
            sum(size for remote, size in sizes.items() if remote in before), len(sizes) + len(manifest.private_files)))
        before = frozenset(sizes)
    wanted = report.version if report.version is not None else (versions[-1] if versions else None)
    if wanted is None or figures.figures_of(wanted) is None:
        return figures
    figures.version, figures.checkpoint_id = wanted, attempt_of.get(wanted)
    figures.keys = figures.figures_of(wanted).keys  # type: ignore[union-attr]
    if read_contents and figures.problem is None:
        try:
            _read_contents(report, figures, scratch, settings_conf, s3a)
        except SparkstateError as e:
            figures.problem = f"version {wanted} cannot be read: {e} (`sparkstate verify` says more)"
    return figures


def _read_contents(report: InspectReport, figures: StoreFigures, scratch: str, settings_conf: dict[str, str],
                   s3a: dict[str, str]) -> None:
    """Load the version read-only with the engine's `Store` and scan it once: keys, bytes, key groups."""
    from ..engine import Store, StoreSpec

    settings = {k: v for k, v in settings_conf.items() if k.startswith(PREFIX)}
    settings[PREFIX + "backend"] = figures.backend or "rocksdb"
    spec = StoreSpec.from_json({
        "checkpointLocation": spark_store_location(report.checkpoint, figures.operator_id, figures.partition_id,
                                                   figures.store_name),
        "operatorId": figures.operator_id, "partitionId": figures.partition_id, "storeName": figures.store_name,
        "instanceId": f"inspect-{figures.rel.replace('/', '-')}", "queryRunId": "sparkstate-inspect",
        "keySchema": "{}", "valueSchema": "{}", "numColsPrefixKey": 0,
        "numPartitions": report.num_partitions or 1, "minVersionsToRetain": 1 << 30,
        "settings": settings, "hadoopS3a": s3a})
    store = Store(spec, local_root=scratch)
    groups, ages, live, keys = [], [], 0, 0
    try:
        store.load(figures.version, figures.checkpoint_id)  # type: ignore[arg-type]
        stamps = store.stored_stamps()
        # With stamps: every stored entry (expired ones not deleted yet too), its stamp read off its value.
        for chunk in store.scan(b"", SCAN_ROWS, SCAN_BYTES, as_stored=stamps.stamped):
            key_list = [k for k, _ in chunk]
            lens = np.fromiter(map(len, key_list), dtype=np.int64, count=len(key_list))
            live += int(lens.sum()) + sum(len(v) for _, v in chunk) - (STAMP_BYTES * len(chunk) if stamps.stamped else 0)
            keys += len(chunk)
            if stamps.stamped:
                stamped = np.frombuffer(b"".join(v[:STAMP_BYTES] for _, v in chunk), dtype=">u8").astype(np.int64)
                ages.append(stamps.batch_time_ms - stamped)
            starts = np.zeros(len(key_list), dtype=np.int64)
            np.cumsum(lens[:-1], out=starts[1:])
            buf = np.frombuffer(b"".join(key_list), dtype=np.uint8)
            groups.append(buf[starts[:, None] + _KG_OFFSETS].view(">i4").ravel().astype(np.int64))
    finally:
        store.close()
    figures.keys, figures.live_bytes = keys, live
    figures.key_groups = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    if stamps.stamped:
        figures.ages_ms = np.concatenate(ages) if ages else np.zeros(0, dtype=np.int64)


def _key_ages(report: InspectReport) -> None:
    """Per operator with stamps: its keys counted by time since their last write (AGE_LABELS)."""
    edges = np.array([limit for _, limit in AGE_BINS], dtype=np.int64)
    for op in sorted({s.operator_id for s in report.stores if s.ages_ms is not None}):
        ages = np.concatenate([s.ages_ms for s in report.stores if s.operator_id == op and s.ages_ms is not None])
        bins = np.searchsorted(edges, ages, side="left")  # age <= edge i -> bin i
        report.key_ages[op] = np.bincount(bins, minlength=len(AGE_LABELS)).tolist()


def _single_partition(report: InspectReport, op: int) -> bool:
    from ..checkpoint.spark_logs import is_single_partition_key
    schemas = [s for s in report.schemas if s.operator_id == op and s.key_schema is not None]
    return bool(schemas) and all(is_single_partition_key(s.key_schema, s.num_cols_prefix_key)  # type: ignore[arg-type]
                                 for s in schemas)


def _balances(report: InspectReport, partitions: int | None) -> None:
    for op in sorted({s.operator_id for s in report.stores}):
        stores = [s for s in report.stores if s.operator_id == op and s.key_groups is not None]
        if not stores:
            continue
        groups = np.concatenate([s.key_groups for s in stores])  # type: ignore[misc]
        single = _single_partition(report, op)
        if report.num_partitions:
            keys = [0] * report.num_partitions
            for s in stores:
                if s.partition_id < report.num_partitions:
                    keys[s.partition_id] += s.keys or 0
            report.balance.append(Balance(op, report.num_partitions, keys))
        if partitions:
            if single:
                predicted = [len(groups)] + [0] * (partitions - 1)
            else:
                predicted = np.bincount(groups % partitions, minlength=partitions).tolist()
            report.predicted.append(Balance(op, partitions, predicted))
        if len(groups) and not single:
            values, counts = np.unique(groups, return_counts=True)
            top = int(np.argmax(counts))
            report.largest_key_group[op] = (int(values[top]), int(counts[top]))


def _spark_provider_stores(fileio: FileIO, checkpoint: str) -> list[StoreFigures]:
    """Per partition store of Spark's providers: retained versions, file count and bytes (no contents)."""
    state = fileio.join(checkpoint, "state")
    by_store: dict[str, StoreFigures] = {}
    per_version: dict[str, dict[int, list[int]]] = {}
    try:
        infos = fileio.list_info(state, recursive=True)
    except OSError:
        return []
    for info in infos:
        parts = info.name.split("/")
        if (len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()) or "_metadata" in parts
                or "sparkstate" in parts[2:-1]):  # sparkstate's own tree, beside Spark's after a migration
            continue
        tail = parts[2:]
        name = tail[0] if len(tail) > 1 and not tail[0].isdigit() and tail[0] != "SSTs" else "default"
        rel = f"{parts[0]}/{parts[1]}" + ("" if name == "default" else f"/{name}")
        figures = by_store.setdefault(rel, StoreFigures(rel, int(parts[0]), int(parts[1]), name,
                                                        backend="spark"))
        m = _SPARK_FILE_RE.match(tail[-1])
        version = int(m.group(1)) if m else -1  # -1: files shared by versions (RocksDB SSTs)
        per_version.setdefault(rel, {}).setdefault(version, []).append(info.size)
    for rel, figures in by_store.items():
        shared = per_version[rel].pop(-1, [])
        for v in sorted(per_version[rel]):
            sizes = per_version[rel][v]
            figures.versions.append(VersionFigures(v, None, sum(sizes), 0, len(sizes)))
        if shared and figures.versions:  # RocksDB's SSTs: counted with the newest version, as shared
            last = figures.versions[-1]
            last.checkpoint_bytes += sum(shared)
            last.shared_bytes += sum(shared)
            last.files += len(shared)
        figures.version = figures.versions[-1].version if figures.versions else None
    return sorted(by_store.values(), key=lambda s: (s.operator_id, s.partition_id, s.store_name))


def report_document(report: InspectReport) -> dict[str, Any]:
    """The report as JSON-ready values (what `--json` prints)."""
    return {
        "checkpoint": report.checkpoint, "stateRoot": report.state_root, "provider": report.provider,
        "backends": report.backends, "lastBatch": report.last_batch, "partitions": report.num_partitions,
        "version": report.version, "notes": report.notes,
        "operators": [{"operatorId": s.operator_id, "operatorName": s.operator_name, "storeName": s.store_name,
                       "numColsPrefixKey": s.num_cols_prefix_key, "keySchema": s.key_schema,
                       "valueSchema": s.value_schema} for s in report.schemas],
        "stores": [{"store": s.rel, "operatorId": s.operator_id, "partitionId": s.partition_id,
                    "storeName": s.store_name, "backend": s.backend, "version": s.version, "keys": s.keys,
                    "liveBytes": s.live_bytes, "problem": s.problem,
                    "checkpointBytes": f.checkpoint_bytes if (f := s.figures_of(s.version)) else None,
                    "sharedBytes": f.shared_bytes if f else None,
                    "versions": [{"version": v.version, "keys": v.keys, "checkpointBytes": v.checkpoint_bytes,
                                  "sharedBytes": v.shared_bytes, "files": v.files} for v in s.versions]}
                   for s in report.stores],
        "balance": [_balance_doc(b) for b in report.balance],
        "predicted": [_balance_doc(b) for b in report.predicted],
        "largestKeyGroup": {str(op): {"keyGroup": g, "keys": n} for op, (g, n) in report.largest_key_group.items()},
        "keyAges": {str(op): {"bins": list(AGE_LABELS), "keys": n} for op, n in report.key_ages.items()},
    }


def _balance_doc(b: Balance) -> dict[str, Any]:
    return {"operatorId": b.operator_id, "partitions": b.partitions, "keys": b.keys, "max": b.max,
            "mean": round(b.mean, 3), "skew": round(b.skew, 3)}
