"""The per-version manifest: which files make up one committed version of a store.

Format v4 (one header line, then the body):

    byte 0..   b"SPARKSTATE-MANIFEST v4 crc32=<8 lowercase hex> len=<decimal>\\n"
    then       <len> bytes of body: compact JSON (sorted keys), UTF-8, zlib-compressed

The crc32 (zlib) and the length cover the stored body exactly, so a truncated or altered file is detected
before it is parsed; a later format bumps the version and readers refuse versions they do not know.
Formats v1 and v2 store the same JSON uncompressed; v2 marks a version with idle-state stamps, which v3
and v4 mark in the body (`ttlStamps`) alone. v4 is v3 where a RocksDB version's private files may be a
shared file (`private-files.tar.gz`, engine/rocksdb/private_files.py) instead of embedded: a v3 reader
would restore such a version without them, so it must refuse it. A manifest is written at every commit of
every store, so on small batches it is a tenth or more of what a checkpoint writes: compression halves
it, and naming the private files' pack instead of embedding them halves it again (about 1,150 to 600
bytes for a RocksDB version between flushes).

Body fields:

    formatVersion     the header's format version
    version           the store version this manifest commits (int >= 0)
    backend           "rocksdb"
    numKeys           exact number of keys in the version
    writerInstanceId  instance id of the provider that wrote it (diagnostics; lineage tracking)
    queryRunId        run id of the query that wrote it
    createdMs         wall-clock milliseconds at commit
    sharedFiles       [{"remote", "local", "size", "crc32"}]: immutable files (SSTs, the pack of an SST
                      set's private files) stored under `files/<remote>`, possibly shared with other
                      versions; `local` is the file name the database expects
    privateFiles      [{"name", "size", "crc32", "data"}]: small database files (MANIFEST-*, CURRENT,
                      *.log, rocksdict-config.json) embedded as base64 (a restore writes every one it
                      finds, OPTIONS-* included); v4 writers pack them into a shared file unless the
                      store flushes at every commit
    store             optional {"queryKey", "operatorId", "partitionId", "storeName"}: the store the
                      version belongs to; a load of another store refuses it
    adoptableFrom     optional int a: a commit after this version v may name a file that no manifest lists
                      yet, finished earlier, whose name starts with a version n, a <= n <= v (the heap
                      backend's background full snapshots); absent: none. `sparkstate gc` keeps such files
    changeLog         optional {"remote", "local", "size", "crc32"}: the file holding the writes of the
                      batch that made this version, in order (a delta stream, see engine/arrow_files.py:
                      for the heap backend the version's own delta, also in sharedFiles; for RocksDB a file
                      of its own, also in sharedFiles when the version was committed without a flush). It
                      serves Spark's change feed and snapshot replay; RocksDB needs it to load only such a
                      version
    changesKept       optional true: the writer kept every write of this version in `changeLog` (absent
                      `changeLog` then means the batch wrote nothing); absent: it kept none (a bulk-filled
                      version of a rescale or migration, the RocksDB backend with rocksdb.changeLog=false)
    checkpointId      optional: the unique id of this commit attempt under Spark's checkpoint format v2 (the
                      id the driver records in its commit log); absent under format 1
    baseCheckpointId  optional: the checkpoint id of the version this one was built on (its lineage);
                      absent for the first version or a base loaded without an id
    ttlStamps         optional true: every value of the version, and every put of its change log, starts
                      with the 8-byte big-endian batch time of its last write (engine/ttl.py); absent: none
    batchTimeMs       optional (with ttlStamps): the batch time the version's writes were stamped with

A version is one small object write plus its new files (an SST set's, or a change log), and the manifest
is the single thing that must be written last.
"""
from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptCheckpointError

MAGIC = b"SPARKSTATE-MANIFEST"
PLAIN_FORMAT_VERSION = 1    # uncompressed JSON, values as Spark gave them (read only)
STAMPED_FORMAT_VERSION = 2  # uncompressed JSON, values with idle-state stamps: a reader that knows only v1
                            # refuses it rather than read stamps as the values' first bytes (read only)
COMPRESSED_FORMAT_VERSION = 3  # zlib-compressed JSON; `ttlStamps` says whether values carry stamps (read only)
FORMAT_VERSION = 4          # v3 whose RocksDB private files may be a shared file: a v3 reader refuses it
READABLE_FORMATS = (PLAIN_FORMAT_VERSION, STAMPED_FORMAT_VERSION, COMPRESSED_FORMAT_VERSION, FORMAT_VERSION)
_COMPRESSION_LEVEL = 9      # a few KB: the best ratio costs well under a millisecond


@dataclass(frozen=True)
class SharedFileRef:
    """An immutable file in the checkpoint's `files/` directory."""

    remote: str  # name under files/, unique for the whole checkpoint
    local: str   # name inside the database directory
    size: int
    crc32: int


@dataclass(frozen=True)
class PrivateFile:
    """A small database file stored inside the manifest."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def crc32(self) -> int:
        return zlib.crc32(self.data)


@dataclass(frozen=True)
class StoreIdentity:
    """Which store a manifest belongs to: the query (its `query_key`), operator, partition, store name."""

    query_key: str
    operator_id: int
    partition_id: int
    store_name: str

    def describe(self) -> str:
        return (f"query {self.query_key}, operator {self.operator_id}, partition {self.partition_id}, "
                f"store {self.store_name}")


@dataclass(frozen=True)
class Manifest:
    version: int
    backend: str
    num_keys: int
    writer_instance_id: str
    query_run_id: str
    created_ms: int
    shared_files: tuple[SharedFileRef, ...] = ()
    private_files: tuple[PrivateFile, ...] = ()
    store: StoreIdentity | None = None
    adoptable_from: int | None = None
    change_log: SharedFileRef | None = None
    changes_kept: bool = False
    checkpoint_id: str | None = None
    base_checkpoint_id: str | None = None
    ttl_stamps: bool = False
    batch_time_ms: int | None = None

    @property
    def clock_ms(self) -> int:
        """The batch time of the batch that reads this version: its commit's wall clock, never before the
        batch time it was written at (so batch times never go backwards between versions)."""
        return max(self.created_ms, self.batch_time_ms or 0)

    @property
    def files(self) -> tuple[SharedFileRef, ...]:
        """Every remote file this manifest keeps: the shared files, then a change log of its own."""
        if self.change_log is None or self.change_log in self.shared_files:
            return self.shared_files
        return self.shared_files + (self.change_log,)

    @property
    def total_bytes(self) -> int:
        """Bytes of the whole version: its remote files plus embedded private files."""
        return sum(f.size for f in self.files) + sum(p.size for p in self.private_files)

    def remote_names(self) -> frozenset[str]:
        return frozenset(f.remote for f in self.files)

    def may_adopt(self, remote: str) -> bool:
        """Whether a commit after this version may still name `remote`, a file no manifest lists yet."""
        n = remote_version(remote)
        return self.adoptable_from is not None and n is not None and self.adoptable_from <= n <= self.version

    # ---- encoding -------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        doc = json.dumps(self._body(), sort_keys=True, separators=(",", ":")).encode("utf-8")
        body = zlib.compress(doc, _COMPRESSION_LEVEL)
        header = b"%s v%d crc32=%08x len=%d\n" % (MAGIC, FORMAT_VERSION, zlib.crc32(body), len(body))
        return header + body

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "formatVersion": FORMAT_VERSION,
            "version": self.version,
            "backend": self.backend,
            "numKeys": self.num_keys,
            "writerInstanceId": self.writer_instance_id,
            "queryRunId": self.query_run_id,
            "createdMs": self.created_ms,
            "sharedFiles": [{"remote": f.remote, "local": f.local, "size": f.size, "crc32": f.crc32}
                            for f in self.shared_files],
            "privateFiles": [{"name": p.name, "size": p.size, "crc32": p.crc32,
                              "data": base64.b64encode(p.data).decode("ascii")}
                             for p in self.private_files],
        }
        if self.adoptable_from is not None:
            body["adoptableFrom"] = self.adoptable_from
        if self.change_log is not None:
            c = self.change_log
            body["changeLog"] = {"remote": c.remote, "local": c.local, "size": c.size, "crc32": c.crc32}
        if self.changes_kept:
            body["changesKept"] = True
        if self.checkpoint_id is not None:
            body["checkpointId"] = self.checkpoint_id
        if self.base_checkpoint_id is not None:
            body["baseCheckpointId"] = self.base_checkpoint_id
        if self.ttl_stamps:
            body["ttlStamps"] = True
        if self.batch_time_ms is not None:
            body["batchTimeMs"] = self.batch_time_ms
        if self.store is not None:
            body["store"] = {"queryKey": self.store.query_key, "operatorId": self.store.operator_id,
                             "partitionId": self.store.partition_id, "storeName": self.store.store_name}
        return body

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> "Manifest":
        """Parse a manifest; `source` (its path) is named in every error."""
        fmt, body = check_header(raw, source)
        try:
            if fmt >= COMPRESSED_FORMAT_VERSION:
                body = zlib.decompress(body)
            doc = json.loads(body.decode("utf-8"))
            shared = tuple(SharedFileRef(str(f["remote"]), str(f["local"]), int(f["size"]), int(f["crc32"]))
                           for f in doc["sharedFiles"])
            private = []
            for p in doc["privateFiles"]:
                data = base64.b64decode(p["data"], validate=True)
                if len(data) != int(p["size"]) or zlib.crc32(data) != int(p["crc32"]):
                    raise CorruptCheckpointError(
                        f"manifest {source}: embedded file {p['name']} does not match its size/crc32")
                private.append(PrivateFile(str(p["name"]), data))
            store = None
            if doc.get("store") is not None:
                s = doc["store"]
                store = StoreIdentity(str(s["queryKey"]), int(s["operatorId"]), int(s["partitionId"]),
                                      str(s["storeName"]))
            c = doc.get("changeLog")
            change_log = SharedFileRef(str(c["remote"]), str(c["local"]), int(c["size"]), int(c["crc32"])) \
                if c is not None else None
            return cls(version=int(doc["version"]), backend=str(doc["backend"]), num_keys=int(doc["numKeys"]),
                       writer_instance_id=str(doc["writerInstanceId"]), query_run_id=str(doc["queryRunId"]),
                       created_ms=int(doc["createdMs"]), shared_files=shared, private_files=tuple(private),
                       store=store, change_log=change_log, changes_kept=bool(doc.get("changesKept", False)),
                       checkpoint_id=_optional_str(doc.get("checkpointId")),
                       base_checkpoint_id=_optional_str(doc.get("baseCheckpointId")),
                       ttl_stamps=bool(doc.get("ttlStamps", False)),
                       batch_time_ms=int(doc["batchTimeMs"]) if doc.get("batchTimeMs") is not None else None,
                       adoptable_from=int(doc["adoptableFrom"]) if doc.get("adoptableFrom") is not None else None)
        except CorruptCheckpointError:
            raise
        except (ValueError, KeyError, TypeError, zlib.error) as e:
            raise CorruptCheckpointError(f"manifest {source} has a malformed body: {e!r}") from None


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def remote_version(remote: str) -> int | None:
    """The version a remote file name starts with (`<version>-<attempt>-<local name>`)."""
    head, sep, _ = remote.partition("-")
    return int(head) if sep and head.isdigit() else None


def check_header(raw: bytes, source: str) -> tuple[int, bytes]:
    """Validate magic, format version, length and crc32; return the format version and the stored body."""
    nl = raw.find(b"\n")
    if nl < 0 or not raw.startswith(MAGIC + b" "):
        raise CorruptCheckpointError(f"manifest {source} does not start with a sparkstate manifest header "
                                     f"(empty, truncated or not a manifest)")
    parts = raw[:nl].split(b" ")
    try:
        if len(parts) != 4 or not parts[1].startswith(b"v"):
            raise ValueError("header fields")
        fmt = int(parts[1][1:])
        crc = int(parts[2].removeprefix(b"crc32="), 16)
        length = int(parts[3].removeprefix(b"len="))
    except ValueError:
        raise CorruptCheckpointError(f"manifest {source} has a malformed header {raw[:nl][:80]!r}") from None
    if fmt not in READABLE_FORMATS:
        raise CorruptCheckpointError(
            f"manifest {source} has format v{fmt}; this sparkstate reads "
            f"{' and '.join(f'v{f}' for f in READABLE_FORMATS)} (newer writer?)")
    body = raw[nl + 1:]
    if len(body) != length:
        raise CorruptCheckpointError(
            f"manifest {source} is truncated or padded: body has {len(body)} bytes, header says {length}")
    if zlib.crc32(body) != crc:
        raise CorruptCheckpointError(f"manifest {source} fails its crc32 check (body altered)")
    return fmt, body


def header_crc(raw: bytes) -> int | None:
    """The body crc32 announced in the header, or None if there is no readable header (cheap check)."""
    nl = raw.find(b"\n", 0, 128)
    parts = raw[:nl].split(b" ") if nl > 0 else []
    if len(parts) != 4 or parts[0] != MAGIC:
        return None
    try:
        return int(parts[2].removeprefix(b"crc32="), 16)
    except ValueError:
        return None
