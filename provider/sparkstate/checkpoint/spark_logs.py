"""Spark's own checkpoint files that sparkstate's tools read and write (format of PySpark 4.3.0): a
rescale, `sparkstate verify` and `sparkstate gc`.

- Offset log `<ckpt>/offsets/<batch>`: `v1` line, one `OffsetSeqMetadata` JSON line (its `conf` pins
  `spark.sql.shuffle.partitions`, the state partition count), then one line per source offset.
- Commit log `<ckpt>/commits/<batch>`: `v1` line + `{"nextBatchWatermarkMs":...}`; under checkpoint format
  v2 a `v2` line + `{"nextBatchWatermarkMs":...,"stateUniqueIds":{"<opId>":[[<id per store>] per
  partition]}}`: the id of the state commit attempt each store's next load must take.
- Operator metadata `<ckpt>/state/<op>/_metadata/metadata`: `v1` line + `{"operatorInfo":{"operatorId",
  "operatorName"},"stateStoreInfo":[{"storeName","numColsPrefixKey","numPartitions"}]}`. Metadata v2
  (`_metadata/v2/<batch>`) is written only by transformWithState.
- State schema `<store dir of partition 0>/_metadata/schema`: Java `writeUTF("v2")`, then key and value
  schema JSON, each as `int32 chunkCount` + chunks of `writeUTF` (u16 length + modified UTF-8).

A repartition batch (Spark's `OfflineStateRepartitionUtils.isRepartitionBatch`) is a batch whose offset
log entry pins another partition count than the batch before it. On restart, Spark refuses a checkpoint
whose newest offset log entry is an uncommitted repartition batch (`checkUnfinishedRepartitionOnRestart`).
A migration batch (`sparkstate migrate`) pins another state store provider than the batch before it.
Neither runs the query, so neither writes output.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import SparkCheckpointError
from ..storage import FileIO

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PROVIDER_CLASS_CONF = "spark.sql.streaming.stateStore.providerClass"
_BATCH_RE = re.compile(r"^\d+$")
# The stateful operators sparkstate serves (operator metadata names), with what users call them
SUPPORTED_OPERATORS = {
    "stateStoreSave": "streaming aggregation",
    "dedupe": "dropDuplicates",
    "dedupeWithinWatermark": "dropDuplicatesWithinWatermark",
    "symmetricHashJoin": "stream-stream join",
    "sessionWindowStateStoreSaveExec": "session window",
    "flatMapGroupsWithState": "flatMapGroupsWithState",
    "applyInPandasWithState": "applyInPandasWithState",
    "globalLimit": "streaming limit",
}


@dataclass(frozen=True)
class OffsetEntry:
    batch_id: int
    raw: str                  # exact file content
    metadata: dict[str, Any]  # parsed OffsetSeqMetadata (key order preserved)

    @property
    def conf(self) -> dict[str, str]:
        return dict(self.metadata.get("conf") or {})

    @property
    def shuffle_partitions(self) -> int | None:
        value = self.conf.get(SHUFFLE_PARTITIONS)
        return int(value) if value is not None else None

    def with_partitions(self, num_partitions: int) -> str:
        """This entry's content with the pinned partition count replaced (what Spark's repartition
        writes as batch N+1: same offsets, watermark and timestamp, new `spark.sql.shuffle.partitions`)."""
        return self.with_conf({SHUFFLE_PARTITIONS: str(num_partitions)})

    def with_conf(self, changes: dict[str, str]) -> str:
        """This entry's content with the given conf entries set (Spark restores a restarting query's
        pinned confs, the partition count and the state store provider among them, from its newest entry)."""
        lines = self.raw.split("\n")
        meta = json.loads(lines[1])
        meta.setdefault("conf", {}).update(changes)
        lines[1] = json.dumps(meta, separators=(",", ":"), ensure_ascii=False)
        return "\n".join(lines)


@dataclass(frozen=True)
class CommitEntry:
    batch_id: int
    raw: str  # exact file content
    # checkpoint format v2: {operator id: [[checkpoint id per store] per partition]}; None under format 1
    state_unique_ids: dict[str, list[list[str]]] | None

    @property
    def format_version(self) -> int:
        return 1 if self.state_unique_ids is None else 2

    def with_state_unique_ids(self, ids: dict[str, list[list[str]]]) -> str:
        """This v2 entry's content with other state ids (what a batch that rewrote the state records)."""
        header, _, body = self.raw.partition("\n")
        doc = json.loads(body)
        doc["stateUniqueIds"] = ids
        return f"{header}\n{json.dumps(doc, separators=(',', ':'))}"


class SparkLogs:
    """Read/write access to the offset and commit logs of one checkpoint."""

    def __init__(self, fileio: FileIO, checkpoint: str) -> None:
        self.fileio, self.checkpoint = fileio, checkpoint
        self.offsets_dir = fileio.join(checkpoint, "offsets")
        self.commits_dir = fileio.join(checkpoint, "commits")

    @staticmethod
    def _batches(names: list[str]) -> list[int]:
        return sorted(int(n) for n in names if _BATCH_RE.match(n))

    def offset_batches(self) -> list[int]:
        return self._batches(self.fileio.list(self.offsets_dir))

    def commit_batches(self) -> list[int]:
        return self._batches(self.fileio.list(self.commits_dir))

    def offset_path(self, batch: int) -> str:
        return self.fileio.join(self.offsets_dir, str(batch))

    def committed(self) -> tuple[list[int], list[int]]:
        """(offset batches, commit batches) of a checkpoint with at least one committed batch, or
        SparkCheckpointError saying what it lacks (the first check of every offline tool)."""
        offsets, commits = self.offset_batches(), self.commit_batches()
        if not offsets:
            raise SparkCheckpointError(f"{self.checkpoint} has no offset log: not a streaming checkpoint, or the "
                                       "query never ran")
        if not commits:
            raise SparkCheckpointError(f"{self.checkpoint} has no committed batch: run the query at least one "
                                       "batch first")
        return offsets, commits

    def commit_path(self, batch: int) -> str:
        return self.fileio.join(self.commits_dir, str(batch))

    def read_offset(self, batch: int) -> OffsetEntry:
        path = self.offset_path(batch)
        try:
            raw = self.fileio.read_bytes(path).decode("utf-8")
        except FileNotFoundError:
            raise SparkCheckpointError(f"offset log entry {path} is missing") from None
        lines = raw.split("\n")
        if lines[0].strip() != "v1":
            raise SparkCheckpointError(f"offset log entry {path} has format {lines[0].strip()!r}; sparkstate "
                                       "reads offset log v1 only")
        if len(lines) < 2 or not lines[1].startswith("{"):
            raise SparkCheckpointError(f"offset log entry {path} has no metadata line; cannot tell its partition count")
        try:
            meta = json.loads(lines[1])
        except ValueError as e:
            raise SparkCheckpointError(f"offset log entry {path} has unreadable metadata: {e}") from None
        return OffsetEntry(batch, raw, meta)

    def read_commit(self, batch: int) -> "CommitEntry":
        path = self.commit_path(batch)
        try:
            raw = self.fileio.read_bytes(path).decode("utf-8")
        except FileNotFoundError:
            raise SparkCheckpointError(f"commit log entry {path} is missing") from None
        header, _, body = raw.partition("\n")
        header = header.strip()
        if header not in ("v1", "v2"):
            raise SparkCheckpointError(f"commit log entry {path} has format {header!r}; sparkstate reads v1 and v2")
        ids = None
        if header == "v2":
            try:
                doc = json.loads(body)
                ids = {str(op): [[str(i) for i in stores] for stores in parts]
                       for op, parts in (doc.get("stateUniqueIds") or {}).items()}
            except (ValueError, TypeError, AttributeError) as e:
                raise SparkCheckpointError(f"commit log entry {path} has unreadable state ids: {e}") from None
        return CommitEntry(batch, raw, ids)

    def is_repartition_batch(self, batch: int) -> bool:
        """Spark's rule: the batch pins another partition count than the batch before it."""
        return self._pins_another(batch, lambda entry: entry.shuffle_partitions)

    def is_migration_batch(self, batch: int) -> bool:
        """The batch pins another state store provider than the batch before it: only `sparkstate migrate`
        writes such a batch (Spark keeps the provider a checkpoint was created with)."""
        return self._pins_another(batch, lambda entry: entry.conf.get(PROVIDER_CLASS_CONF))

    def _pins_another(self, batch: int, pinned: Callable[[OffsetEntry], Any]) -> bool:
        """Whether batch `batch`'s offset log entry pins another value than the entry before it (both set)."""
        if batch <= 0:
            return False
        cur, prev = pinned(self.read_offset(batch)), pinned(self.read_offset(batch - 1))
        return cur is not None and prev is not None and cur != prev


def routing_partition_counts(fileio: FileIO, checkpoint: str, version: int) -> list[int]:
    """The state partition counts Spark routed with when it wrote store `version` (pinned by the offset log
    entry of batch `version - 1`) and routes with now (the newest entry), in that order, without repeats;
    [] when the checkpoint has no readable offset log. A reader whose session sets another
    `spark.sql.shuffle.partitions` (Spark's state data source does not pin it) checks keys with these."""
    logs = SparkLogs(fileio, checkpoint)
    counts: list[int] = []
    try:
        batches = logs.offset_batches()
        wanted = [b for b in (version - 1, batches[-1] if batches else None) if b is not None and b in batches]
        for batch in wanted:
            n = logs.read_offset(batch).shuffle_partitions
            if n is not None and n > 0 and n not in counts:
                counts.append(n)
    except (OSError, SparkCheckpointError):
        return counts
    return counts


def unfinished_repartition(fileio: FileIO, checkpoint: str, batch: int) -> int | None:
    """The partition count batch `batch` repartitions to, when it is an uncommitted repartition batch (a
    rescale that stopped before its commit log entry); None otherwise, or when the logs cannot be read.
    Spark 4.3 refuses to run such a batch itself (`checkUnfinishedRepartitionOnRestart`); earlier lines
    would run it on state half rescaled."""
    logs = SparkLogs(fileio, checkpoint)
    try:
        if batch <= 0 or not fileio.exists(logs.offset_path(batch)) or fileio.exists(logs.commit_path(batch)):
            return None
        if not logs.is_repartition_batch(batch):
            return None
        return logs.read_offset(batch).shuffle_partitions
    except (OSError, SparkCheckpointError):
        return None


@dataclass(frozen=True)
class StoreInfo:
    store_name: str
    num_cols_prefix_key: int
    num_partitions: int


@dataclass(frozen=True)
class OperatorMetadata:
    operator_id: int
    operator_name: str
    stores: tuple[StoreInfo, ...]


def rewrite_operator_partitions(fileio: FileIO, path: str, num_partitions: int) -> None:
    """Set `numPartitions` of every store in the operator metadata at `path` (what Spark's `state-metadata`
    source reports). Hadoop's local file system keeps a `.<name>.crc` beside the file and would reject the
    new content against the old checksum; it is removed first (a file without one is read unchecked)."""
    raw = fileio.read_bytes(path).decode("utf-8")
    header, _, body = raw.partition("\n")
    doc = json.loads(body)
    if all(int(s["numPartitions"]) == num_partitions for s in doc["stateStoreInfo"]):
        return
    for store in doc["stateStoreInfo"]:
        store["numPartitions"] = num_partitions
    directory, _, name = path.rpartition("/")
    fileio.delete_many([f"{directory}/.{name}.crc"])
    fileio.write_bytes_atomic(path, f"{header}\n{json.dumps(doc, separators=(',', ':'))}".encode("utf-8"))


def read_operator_metadata(fileio: FileIO, path: str) -> OperatorMetadata:
    try:
        raw = fileio.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise SparkCheckpointError(f"operator metadata {path} is missing") from None
    header, _, body = raw.partition("\n")
    if header.strip() != "v1":
        raise SparkCheckpointError(f"operator metadata {path} has version {header.strip()!r}; only v1 (all operators "
                           "sparkstate serves; v2 is transformWithState's) can be rescaled")
    doc = json.loads(body)
    info = doc["operatorInfo"]
    stores = tuple(StoreInfo(str(s["storeName"]), int(s["numColsPrefixKey"]), int(s["numPartitions"]))
                   for s in doc["stateStoreInfo"])
    return OperatorMetadata(int(info["operatorId"]), str(info["operatorName"]), stores)


def parse_state_schema(raw: bytes, source: str) -> tuple[dict, dict]:
    """(key schema, value schema) as StructType JSON dicts from a v2 `_metadata/schema` file."""
    pos = 0

    def utf() -> str:
        nonlocal pos
        (n,) = struct.unpack_from(">H", raw, pos)
        pos += 2
        text = raw[pos:pos + n].decode("utf-8")  # schema JSON is ASCII-safe in practice
        pos += n
        return text

    def chunks() -> str:
        nonlocal pos
        (count,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        return "".join(utf() for _ in range(count))

    try:
        version = utf()
        if version != "v2":
            raise SparkCheckpointError(f"state schema {source} has version {version!r}; expected v2")
        key, value = json.loads(chunks()), json.loads(chunks())
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise SparkCheckpointError(f"state schema {source} cannot be parsed: {e}") from None
    return key, value


def is_single_partition_key(key_schema: dict, num_cols_prefix_key: int) -> bool:
    """Stores whose partition-key columns are none or NullType only (global aggregation, streaming
    limit) run in one partition whatever the partition count."""
    fields = key_schema.get("fields") or []
    if num_cols_prefix_key > 0:
        fields = fields[:num_cols_prefix_key]
    return all(f.get("type") == "void" for f in fields)
