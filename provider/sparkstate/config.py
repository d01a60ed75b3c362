"""Settings of sparkstate, each declared once.

Every key lives under `spark.sql.streaming.stateStore.sparkstate.` (Spark hands explicitly set
`spark.sql.streaming.stateStore.*` keys to providers on executors). `Settings.parse` turns the raw
strings into a frozen, typed object and rejects unknown keys and bad values with an error that names the
key and the valid values. docs/configuration.md, the settings page, is generated from `DECLARATIONS`
(`sparkstate conf-docs --page`).
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import ConfigError

PREFIX = "spark.sql.streaming.stateStore.sparkstate."
PROVIDER_CLASS = "io.sparkstate.PythonStateStoreProvider"
PROVIDER_CLASS_KEY = "spark.sql.streaming.stateStore.providerClass"


@dataclass(frozen=True)
class Declaration:
    """One setting: its key (after PREFIX), field name, default, parser and doc line."""

    key: str
    field: str
    default: Any
    parse: Callable[[str], Any]
    doc: str
    valid: str  # human description of valid values, used in errors and docs


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError
        return value
    parse.choices = options  # type: ignore[attr-defined]  # for declarations_json
    return parse


def _int_at_least(low: int, at_most: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if value < low or (at_most is not None and value > at_most):
            raise ValueError
        return value
    parse.minimum = low  # type: ignore[attr-defined]  # for declarations_json: the JVM checks both bounds
    parse.maximum = at_most  # type: ignore[attr-defined]
    return parse


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError
    return raw.strip()


class InvalidValue(ValueError):
    """A parser's refusal with its own reason, shown after the expected values."""


_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_S3_URI = re.compile(r"^s3a?://([^/]+)(/.*)?$", re.IGNORECASE)
_S3_SCHEMES = ("s3", "s3a")


def _local_path(raw: str) -> str:
    """An absolute local directory path (or a `file:` URI of one)."""
    value = _text(raw)
    scheme = _URI_SCHEME.match(value)
    if scheme and scheme.group(1).lower() != "file":
        raise InvalidValue(f"'{scheme.group(1)}:' is not a local file system")
    path = re.sub(r"^file:(//)?", "", value, flags=re.IGNORECASE) if scheme else value
    if not os.path.isabs(path):
        raise InvalidValue("a relative path would depend on each worker's working directory")
    return value


def _state_location(raw: str) -> str:
    """An absolute local path, a `file:` URI or an `s3://bucket/prefix` (`s3a://`) URI."""
    value = _text(raw)
    scheme = _URI_SCHEME.match(value)
    if scheme and scheme.group(1).lower() in _S3_SCHEMES:
        if not _S3_URI.match(value):
            raise InvalidValue(f"an S3 location is {scheme.group(1).lower()}://<bucket>[/<prefix>]")
        return value
    if scheme and scheme.group(1).lower() != "file":
        raise InvalidValue(f"sparkstate cannot write '{scheme.group(1)}:' locations")
    return _local_path(value)


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ValueError
    return value == "true"


_DURATION = re.compile(r"^(\d+)\s*(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_TTL_MS = 100 * 365 * 86_400_000  # a century: beyond it a duration is a slip of the keyboard


def _duration(raw: str) -> int | None:
    """A duration such as `30d`, `12h`, `90s`, `500ms`, in milliseconds; `none`: never expires (None)."""
    value = raw.strip().lower()
    if value == "none":
        return None
    match = _DURATION.match(value)
    if not match:
        raise ValueError
    ms = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if ms <= 0 or ms > MAX_TTL_MS:
        raise InvalidValue("a duration from 1ms to 100 years")
    return ms


_DURATION_VALID = "a duration: an integer with ms, s, m, h or d (`30d`, `12h`, `90s`), or none"
# Per-operator durations: `ttl.operator.<id>`, a family of keys declared once.
TTL_OPERATOR_KEY = "ttl.operator.<id>"
_TTL_OPERATOR = re.compile(r"^ttl\.operator\.(\d+)$", re.IGNORECASE)


def format_duration(ms: int | None) -> str:
    """`ms` in the largest unit that divides it (the inverse of the duration parser); None: `none`."""
    if ms is None:
        return "none"
    for unit in ("d", "h", "m", "s"):
        if ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


BACKENDS = ("rocksdb", "heap")
TRANSPORTS = ("shm", "socket", "py4j", "embedded")
COMPRESSIONS = ("lz4", "zstd", "snappy", "none")
MAX_BLOCK_SIZE_KB = 4 * 1024 * 1024 - 1  # RocksDB refuses blocks of 4 GiB or more
MAX_SIZE_MB = 1 << 20  # 1 TiB: a RocksDB size beyond it is a slip of the keyboard, not a memory or disk size
# A day: a timeout beyond it is a slip of the keyboard, and the JVM counts timeouts in nanoseconds, where a
# value of about 9.2e12 ms overflows into a negative limit that would call every worker hung at once.
MAX_TIMEOUT_MS = 24 * 3600 * 1000
MAX_S3_ATTEMPTS = 100  # with botocore's backoff (at most 20 s a wait) about half an hour for one request
MAX_IO_THREADS = 256
_TIMEOUT = f"an integer from {{low}} to {MAX_TIMEOUT_MS} (a day)"
HEAP_COMPRESSIONS = ("lz4", "zstd", "none")
HEAP_LAYOUTS = ("packed", "dict")

DECLARATIONS: tuple[Declaration, ...] = (
    Declaration("backend", "backend", "rocksdb", _choice(*BACKENDS),
                "State backend of the query's stores.", ", ".join(BACKENDS)),
    Declaration("transport", "transport", "shm", _choice(*TRANSPORTS),
                "Where the stores run and how the JVM shim reaches them: `shm`, a worker process per "
                "running task, frames through shared memory (Linux x86-64; elsewhere it falls back to "
                "`socket`); `socket`, the same over a Unix domain socket; `py4j`, the same with frames over "
                "py4j (the slow, simple reference path); `embedded`, the executor JVM's own CPython through "
                "Jep (needs `pip install \".[embedded]\"` from a checkout; no process hop per get, at the "
                "price of sharing the executor's process and one GIL).", ", ".join(TRANSPORTS)),
    Declaration("pythonExec", "python_exec", None, _text,
                "Python interpreter for the store workers. Unset: spark.pyspark.python, then "
                "PYSPARK_PYTHON, then python3. `sparkstate.configure()` sets it to the current interpreter.",
                "a path or command"),
    Declaration("workerStartTimeoutMs", "worker_start_timeout_ms", 60000,
                _int_at_least(1000, at_most=MAX_TIMEOUT_MS),
                "How long an executor waits for a new Python worker to register.", _TIMEOUT.format(low=1000)),
    Declaration("workerHeartbeatTimeoutMs", "worker_heartbeat_timeout_ms", 30000,
                _int_at_least(1000, at_most=MAX_TIMEOUT_MS),
                "A worker process whose heartbeat (a thread that beats every tenth of this, at most every "
                "second) stops this long is hung: stopped, frozen, or stuck in native code holding the "
                "interpreter lock. The executor kills it, and the task it serves fails with the call, the store "
                "and the worker's stderr (its Python stacks); Spark retries the task on a fresh worker.",
                _TIMEOUT.format(low=1000)),
    Declaration("workerStallTimeoutMs", "worker_stall_timeout_ms", 600000,
                _int_at_least(1000, at_most=MAX_TIMEOUT_MS),
                "A call during which a live worker reports no progress this long (no frame handled, no byte "
                "moved, no record restored or written) is stuck, e.g. deadlocked; the worker is killed as a "
                "hung one. Busy is not stuck: a long restore or a throttled upload keeps reporting progress.",
                _TIMEOUT.format(low=1000)),
    Declaration("maxWorkers", "max_workers", None, _int_at_least(1),
                "Python worker processes an executor may run (shm, socket and py4j transports). Beyond one per "
                "running task, extra workers keep each store on the worker that holds it; with fewer, a "
                "partition whose task lands on another worker is restored there from the checkpoint. "
                "Unset: twice the executor JVM's available processors.", "an integer >= 1"),
    Declaration("shmDir", "shm_dir", None, _text,
                "Directory for the shared-memory segments of transport shm (a 2 MiB file per worker "
                "connection, deleted once mapped). Unset: /dev/shm when writable, else the JVM's temp "
                "directory. A segment that cannot be created there falls back to the socket with a warning.",
                "a local directory path"),
    Declaration("keyFilter.maxKeys", "key_filter_max_keys", 4_000_000, _int_at_least(0),
                "Keys per store the JVM shim's key filter may hold. The filter (a Bloom filter in the "
                "executor JVM: 12 bits per key of a capacity that grows 4x at a time, at most about 6 MiB "
                "per store at the default) answers a get or prefix scan of a key the store cannot "
                "have without a call to the worker; most of a dropDuplicates', join's, session window's or "
                "new group's lookups are such. A store that outgrows it asks the worker every time. 0 turns "
                "the filter off.", "an integer >= 0"),
    Declaration("localDir", "local_dir", None, _local_path,
                "Directory for the workers' local working copies (live databases, file cache), created if "
                "missing; each store's directory in it is private to the user (0700). Unset: "
                "<base>/sparkstate-local-<uid>, created 0700 and used only if it is a directory of this "
                "user's, where <base> is the application's first scratch directory from the cluster manager "
                "(YARN's LOCAL_DIRS, a standalone worker's SPARK_EXECUTOR_DIRS, SPARK_LOCAL_DIRS), which it "
                "removes with the application, else the system temp directory.", "an absolute local path"),
    Declaration("rocksdb.blockCacheSizeMB", "rocksdb_block_cache_mb", 64, _int_at_least(0, at_most=MAX_SIZE_MB),
                "RocksDB block cache of a worker process, in MiB, shared by every RocksDB store the worker "
                "holds (0 turns it off). RocksDB keeps the blocks of deleted files until they are evicted, "
                "so each cache fills to its size in a long run; one per worker bounds that memory whatever "
                "the number of stores, and lets a large store use the room small ones leave. A worker "
                "serves one task slot at a time, so an executor holds up to spark.sql.streaming."
                "stateStore.sparkstate.maxWorkers of them.", f"an integer from 0 to {MAX_SIZE_MB}"),
    Declaration("rocksdb.writeBufferSizeMB", "rocksdb_write_buffer_mb", 64, _int_at_least(1, at_most=MAX_SIZE_MB),
                "RocksDB memtable size per store, in MiB.", f"an integer from 1 to {MAX_SIZE_MB}"),
    Declaration("rocksdb.targetFileSizeMB", "rocksdb_target_file_mb", 8, _int_at_least(1, at_most=MAX_SIZE_MB),
                "Size of the SST files RocksDB's compactions write, in MiB (RocksDB's own default is 64). A "
                "compaction rewrites whole files, and every file it writes is uploaded at the next commit.",
                f"an integer from 1 to {MAX_SIZE_MB}"),
    Declaration("rocksdb.maxBytesForLevelBaseMB", "rocksdb_level_base_mb", 16, _int_at_least(1, at_most=MAX_SIZE_MB),
                "Size of RocksDB's first level below level 0, in MiB (RocksDB's own default is 256); each "
                "level below is 10 times larger. Level-0 files are merged into this level, so it bounds "
                "what that merge rewrites. A commit's flush is a level-0 file of a few MiB, so the level is "
                "sized like level 0 at its compaction trigger, as RocksDB's tuning guide advises "
                "(docs/benchmarks/recovery.md has the measurements).", f"an integer from 1 to {MAX_SIZE_MB}"),
    Declaration("rocksdb.level0CompactionTrigger", "rocksdb_level0_trigger", 10, _int_at_least(2, at_most=1000),
                "Level-0 files at which RocksDB merges them into the level below (RocksDB's own default is "
                "4). A commit's flush adds one level-0 file; under updates spread over the whole key space "
                "the merge rewrites the whole level below, and every file it writes is uploaded at the next "
                "commit, so a checkpoint writes about the state's bytes every this many commits. At 4 that "
                "rewrite was half of what an aggregation's checkpoint wrote; at 10 a get checks the bloom "
                "filters of up to 10 level-0 files. RocksDB slows and stops writes at 16 and 32 files beyond "
                "it (python/bench/rocksdb_checkpoint_files.py breaks a checkpoint's bytes down).",
                "an integer from 2 to 1000"),
    Declaration("rocksdb.bloomFilterBitsPerKey", "rocksdb_bloom_bits", 10, _int_at_least(0),
                "Bits per key of the RocksDB bloom filter (0 turns it off).", "an integer >= 0"),
    Declaration("rocksdb.blockSizeKB", "rocksdb_block_size_kb", 4, _int_at_least(1, at_most=MAX_BLOCK_SIZE_KB),
                "Size of the data blocks of RocksDB SST files, in KiB (as Spark's RocksDB provider's "
                "blockSizeKB). A get that misses the block cache reads and decompresses one block: smaller "
                "blocks make that cheaper, for a larger index and less compression.",
                f"an integer from 1 to {MAX_BLOCK_SIZE_KB}"),
    Declaration("rocksdb.compression", "rocksdb_compression", "zstd", _choice(*COMPRESSIONS),
                "Compression of RocksDB SST files. Every flush uploads its new files, so this sets much of a "
                "checkpoint's bytes: zstd stores an aggregation's state in about 0.6x of lz4's "
                "bytes, and decompresses a block that misses the block cache in more CPU than lz4 (state "
                "larger than the cache reads more of them: conf/presets/low-latency.conf keeps lz4).",
                ", ".join(COMPRESSIONS)),
    Declaration("rocksdb.bottommostCompression", "rocksdb_bottommost_compression", "same",
                _choice("same", *COMPRESSIONS),
                "Compression of the SST files of RocksDB's last level, which holds most of the state and "
                "is what compactions rewrite (same: as rocksdb.compression).",
                "same, " + ", ".join(COMPRESSIONS)),
    Declaration("rocksdb.mmapReads", "rocksdb_mmap_reads", False, _bool,
                "Read SST files through memory maps. With rocksdb.compression none, a get reads its block "
                "where it lies in the page cache, with no read call, copy or block cache entry: with more "
                "state than the block cache holds, gets cost about 40% less, for SST files, checkpoints and "
                "restores about twice as large (docs/benchmarks/rocksdb_gets.md, docs/benchmarks/recovery.md). "
                "The mapped pages count in the worker's "
                "resident memory (as YARN's memory check sees it), and so the store's memoryUsedBytes "
                "includes its SST files' bytes. With compression, blocks are still decompressed into the "
                "block cache: at 10M keys that cost as much as mapping saved. A file truncated under a "
                "mapped store (on local disk the checkpoint's SST files are links to the live ones) ends "
                "its worker process (SIGBUS) instead of failing the read; the task is retried, and its "
                "restore names the damaged file.", "true, false"),
    Declaration("rocksdb.memtable", "rocksdb_memtable", "auto", _choice("auto", "skiplist"),
                "RocksDB backend: the memtable that holds a store's writes until a flush. auto: with "
                "rocksdb.flushEveryVersions above 1, a hash table of short sorted lists (keyed by the whole "
                "key) while the store serves only gets and puts, where a write costs less than half what it "
                "costs in a skip list holding many batches; before the "
                "store's first scan (watermark eviction, a join's or session window's scan, timeouts, TTL "
                "cleanup), the store flushes it and reopens with a skip list, since every iterator over a "
                "hash memtable sorts all of it first. skiplist: the skip list from the start. The hash "
                "memtable holds fewer entries in rocksdb.writeBufferSizeMB, so it flushes more often. On the "
                "aggregation benchmark (30 batches, no scan) auto gives 1.16x the throughput of skiplist, "
                "the same bytes and 1.10x the state memory (docs/benchmarks/aggregation.md).",
                "auto, skiplist"),
    Declaration("rocksdb.changeLog", "rocksdb_change_log", False, _bool,
                "RocksDB backend: keep each commit's writes in a change log file beside its SSTs (an Arrow "
                "stream compressed as rocksdb.changeLogCompression, retained with its version), which Spark's change "
                "feed (`readChangeFeed`) and snapshot replay (`snapshotStartBatchId`) of the statestore "
                "source read. Its cost follows the keys written, not the state: about as many bytes per commit "
                "as the new SSTs of an update-heavy batch. Every commit keeps one anyway while "
                "rocksdb.flushEveryVersions is above 1, as it is by default. The heap backend's deltas serve "
                "both without it.",
                "true, false"),
    Declaration("rocksdb.flushEveryVersions", "rocksdb_flush_every", 20, _int_at_least(1),
                "RocksDB backend: flush the memtables and upload new SST files at least every this many "
                "commits (1: every commit), or sooner once the change logs since the last flush hold half the "
                "bytes of its SST files and at least 4 MiB. A commit in between makes only its change log "
                "durable, as rocksdb.changeLog writes it (so above 1 every version keeps one for the change "
                "feed), and opening such a version replays the change logs after the last flush (as one "
                "ingested SST file, about 0.5 us per logged write). Once half that many logs wait, Spark's "
                "maintenance flushes an idle store and uploads its SST files in the background, for the next "
                "commit to build on: about as often as Spark's RocksDB provider with changelog checkpointing "
                "writes its snapshots (once 10 versions wait). Against 1: shorter commits and fewer bytes, for a "
                "memtable that holds more versions (rocksdb.memtable) and a journal of every write. On the "
                "aggregation benchmark (30 batches) 20 gives 0.21x the median commit time of 1 and 0.67x the "
                "bytes, at 1.10x the throughput. The price is recovery: opening a version replays its change "
                "logs (at 1M keys, 5 logs of 50,000 writes per store, a restart's 4 stores load in 1.2-1.3 s "
                "against 0.1 s with 1, and its first batch takes a median 1.15x as long as Spark's RocksDB "
                "provider's against 1.07x). A "
                "store opened by replaying two or more logs writes that version's SST set in the background "
                "before its first write, so its next open replays only the logs committed since. A query whose "
                "recovery time matters more than its checkpoint's bytes and commit time can set 1 "
                "(docs/benchmarks/aggregation.md, \"Checkpoint cost against Spark's providers\"; "
                "docs/benchmarks/recovery.md, \"Commits between flushes\").",
                "an integer >= 1"),
    Declaration("rocksdb.changeLogCompression", "rocksdb_change_log_compression", "zstd",
                _choice(*HEAP_COMPRESSIONS),
                "RocksDB backend: compression of its change logs' record batches (rocksdb.changeLog, "
                "rocksdb.flushEveryVersions). A change log is the durable form of every commit between "
                "flushes, so its bytes are most of what such a checkpoint writes: zstd stores an "
                "aggregation's writes in about half the bytes lz4 does, for the same time to write them "
                "(the log's columns are built either way). Readers take any of them.",
                ", ".join(HEAP_COMPRESSIONS)),
    Declaration("heap.snapshotEveryVersions", "heap_snapshot_every", 10, _int_at_least(1),
                "Heap backend: Spark's maintenance starts a full snapshot (written in the background) once "
                "this many deltas follow the last one and they hold heap.snapshotMinDeltaPercent of its "
                "bytes, as Spark's HDFS provider writes its snapshots (spark.sql.streaming.stateStore."
                "minDeltasForSnapshot): at most one per maintenance interval, whatever the batch rate. A "
                "commit starts one itself once four times this many deltas wait. Every commit writes its "
                "delta synchronously.", "an integer >= 1"),
    Declaration("heap.snapshotMinDeltaPercent", "heap_snapshot_min_delta_percent", 100,
                _int_at_least(0, 10_000),
                "Heap backend: a full snapshot also waits until the deltas since the last one hold this "
                "percentage of its bytes (0: heap.snapshotEveryVersions alone decides), and is written anyway "
                "once four times heap.snapshotEveryVersions deltas follow it. A state that grows by small "
                "batches then rewrites itself less often, while a restore reads at most about twice its full "
                "snapshot's bytes: on the small-batches workload (60 batches of 1,000 rows) its full "
                "snapshots hold 0.99 MB against 1.76 MB with 0, and a batch writes 35 KiB against 47 "
                "(docs/benchmarks/workloads.md). Where a batch's delta is large against the state, the count "
                "decides.",
                "an integer from 0 to 10000"),
    Declaration("heap.maxVersionsInMemory", "heap_max_versions_in_memory", 2, _int_at_least(1),
                "Heap backend: committed versions kept in memory (copy-on-write) for reloads and retries, "
                "including the current one; a version a background snapshot is writing stays until done.",
                "an integer >= 1"),
    Declaration("heap.layout", "heap_layout", "packed", _choice(*HEAP_LAYOUTS),
                "Heap backend: in-memory layout of the live state. `packed` packs entries per hash bucket "
                "(about a third of a dict's memory per key); `dict` keeps a Python dict of bytes (a cheaper "
                "get and put, ~150 bytes of overhead per key).", ", ".join(HEAP_LAYOUTS)),
    Declaration("heap.compression", "heap_compression", "zstd", _choice(*HEAP_COMPRESSIONS),
                "Heap backend: compression of its delta and full snapshot files (Arrow IPC, every buffer "
                "compressed on its own). On a streaming aggregation's state, zstd's files are about 10% "
                "smaller than lz4's (docs/internals/arrow-files.md#heap-backend). "
                "Readers need no setting: every record batch names its codec.", ", ".join(HEAP_COMPRESSIONS)),
    Declaration("ttl", "ttl_ms", None, _duration,
                "Idle-state expiry: a key no batch has written for longer than this is expired (a get does "
                "not see it, scans skip it, and a later commit deletes it), measured in the batch times the "
                "checkpoint records, so a re-executed batch expires the same keys. Unset or none: nothing "
                "expires. A stream-stream join forgets a side's key with all its rows. Costs 8 bytes per key; "
                "docs/ttl.md says what it means for each operator.", _DURATION_VALID),
    Declaration(TTL_OPERATOR_KEY, "ttl_operators", (), _duration,
                "The ttl of the operator with this id (the operatorId Spark's state-metadata source lists), "
                "over the query's: a duration, or none to keep that operator's state forever.",
                _DURATION_VALID),
    Declaration("ttl.cleanupRowsPerCommit", "ttl_cleanup_rows", 4096, _int_at_least(1),
                "With ttl: entries each commit examines for expired keys to delete, continuing where the "
                "last commit stopped; bounds what expiry adds to a commit, however many keys expire at once.",
                "an integer >= 1"),
    Declaration("checkpoint.verifyLocalCache", "verify_local_cache", False, _bool,
                "Re-verify checksums of files already in the local cache when restoring a version "
                "(files are always verified when downloaded).", "true, false"),
    Declaration("checkpoint.ioThreads", "io_threads", 4, _int_at_least(1, at_most=MAX_IO_THREADS),
                "Files uploaded (commit) or downloaded (restore) in parallel per store.",
                f"an integer from 1 to {MAX_IO_THREADS}"),
    Declaration("stateLocation", "state_location", None, _state_location,
                "Where state files go instead of the query's checkpointLocation, e.g. s3://bucket/prefix "
                "(one location per query, like checkpointLocation); stores keep the <op>/<part>[/<store>] "
                "layout below it.", "an absolute local path, a file: URI or s3://<bucket>[/<prefix>] "
                "(s3a:// too)"),
    Declaration("s3.endpoint", "s3_endpoint", None, _text,
                "S3 endpoint URL (S3-compatible servers). Unset: fs.s3a.endpoint, else AWS.", "a URL"),
    Declaration("s3.region", "s3_region", None, _text,
                "S3 region. Unset: fs.s3a.endpoint.region, else boto3's default.", "a region name"),
    Declaration("s3.pathStyleAccess", "s3_path_style", None, _bool,
                "Path-style bucket addressing. Unset: fs.s3a.path.style.access, else boto3's default.",
                "true, false"),
    Declaration("s3.maxAttempts", "s3_max_attempts", 6, _int_at_least(1, at_most=MAX_S3_ATTEMPTS),
                "Attempts per S3 request, the first included (retries with backoff on throttling, 5xx, "
                "timeouts). A request whose last attempt times out makes the worker's later requests to that "
                "endpoint fail at once, for as long as that request waited: a silent server fails a query in "
                "about one request's time, not one per file and task attempt.",
                f"an integer from 1 to {MAX_S3_ATTEMPTS}"),
    Declaration("s3.retryMode", "s3_retry_mode", "standard", _choice("standard", "adaptive"),
                "botocore retry mode; adaptive adds client-side rate limiting under throttling.",
                "standard, adaptive"),
    Declaration("s3.connectTimeoutMs", "s3_connect_timeout_ms", 5000,
                _int_at_least(100, at_most=MAX_TIMEOUT_MS),
                "S3 connect timeout per attempt.", _TIMEOUT.format(low=100)),
    Declaration("s3.readTimeoutMs", "s3_read_timeout_ms", 30000,
                _int_at_least(100, at_most=MAX_TIMEOUT_MS),
                "S3 read timeout per attempt.", _TIMEOUT.format(low=100)),
)

_BY_KEY = {d.key.lower(): d for d in DECLARATIONS}


@dataclass(frozen=True)
class Settings:
    backend: str = "rocksdb"
    transport: str = "shm"
    python_exec: str | None = None
    worker_start_timeout_ms: int = 60000
    worker_heartbeat_timeout_ms: int = 30000
    worker_stall_timeout_ms: int = 600000
    max_workers: int | None = None
    shm_dir: str | None = None
    key_filter_max_keys: int = 4_000_000
    local_dir: str | None = None
    rocksdb_block_cache_mb: int = 64
    rocksdb_write_buffer_mb: int = 64
    rocksdb_target_file_mb: int = 8
    rocksdb_level_base_mb: int = 16
    rocksdb_level0_trigger: int = 10
    rocksdb_bloom_bits: int = 10
    rocksdb_block_size_kb: int = 4
    rocksdb_compression: str = "zstd"
    rocksdb_bottommost_compression: str = "same"
    rocksdb_mmap_reads: bool = False
    rocksdb_memtable: str = "auto"
    rocksdb_change_log: bool = False
    rocksdb_flush_every: int = 20
    rocksdb_change_log_compression: str = "zstd"
    heap_snapshot_every: int = 10
    heap_snapshot_min_delta_percent: int = 100
    heap_max_versions_in_memory: int = 2
    heap_compression: str = "zstd"
    heap_layout: str = "packed"
    ttl_ms: int | None = None
    ttl_operators: tuple[tuple[int, int | None], ...] = ()  # (operator id, ttl ms or None), sorted
    ttl_cleanup_rows: int = 4096
    verify_local_cache: bool = False
    io_threads: int = 4
    state_location: str | None = None
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_path_style: bool | None = None
    s3_max_attempts: int = 6
    s3_retry_mode: str = "standard"
    s3_connect_timeout_ms: int = 5000
    s3_read_timeout_ms: int = 30000

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> "Settings":
        """Parse `{full key: string value}`; keys outside PREFIX are ignored."""
        values: dict[str, Any] = {}
        operators: dict[int, int | None] = {}
        for full_key, raw_value in raw.items():
            if not full_key.startswith(PREFIX):
                continue
            short = full_key[len(PREFIX):]
            per_operator = _TTL_OPERATOR.match(short)
            decl = _BY_KEY[TTL_OPERATOR_KEY] if per_operator else _BY_KEY.get(short.lower())
            if decl is None:
                raise ConfigError(unknown_setting_message(full_key))
            try:
                value = decl.parse(str(raw_value))
            except (ValueError, TypeError) as e:
                reason = f" ({e})" if isinstance(e, InvalidValue) else ""
                raise ConfigError(f"invalid value {raw_value!r} for '{full_key}': expected "
                                  f"{decl.valid}{reason}") from None
            if per_operator:
                operators[int(per_operator.group(1))] = value
            else:
                values[decl.field] = value
        if operators:
            values["ttl_operators"] = tuple(sorted(operators.items()))
        return cls(**values)

    def ttl_for(self, operator_id: int) -> int | None:
        """The idle-state duration of operator `operator_id` in ms (its own, else the query's); None: never."""
        for op, ms in self.ttl_operators:
            if op == operator_id:
                return ms
        return self.ttl_ms

    def to_conf(self) -> dict[str, str]:
        """The settings that differ from the defaults, as spark conf entries."""
        out: dict[str, str] = {}
        for decl in DECLARATIONS:
            value = getattr(self, decl.field)
            if decl.parse is _duration:
                if decl.key == TTL_OPERATOR_KEY:
                    out.update((f"{PREFIX}ttl.operator.{op}", format_duration(ms)) for op, ms in value)
                elif value is not None:
                    out[PREFIX + decl.key] = format_duration(value)
                continue
            if value != decl.default and value is not None:
                out[PREFIX + decl.key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def unknown_setting_message(full_key: str) -> str:
    """Names the closest known key when there is one, else lists them all."""
    short = full_key[len(PREFIX):] if full_key.startswith(PREFIX) else full_key
    close = difflib.get_close_matches(short.lower(), list(_BY_KEY), n=1, cutoff=0.6)
    if close:
        return f"unknown setting '{full_key}'; did you mean '{PREFIX}{_BY_KEY[close[0]].key}'?"
    known = ", ".join(d.key for d in DECLARATIONS)
    return f"unknown setting '{full_key}'. Known settings under {PREFIX}: {known}"


def _check_fields_match() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    for decl in DECLARATIONS:
        assert fields.get(decl.field, object()) == decl.default, decl


_check_fields_match()


def declarations_json() -> str:
    """Every declaration as JSON (key, default, kind, bounds or choices): built into the shim's jar, where
    ShimSettings reads the defaults and bounds of the few settings the JVM uses itself, so the two sides
    cannot disagree."""
    import json

    out = []
    for d in DECLARATIONS:
        entry: dict[str, Any] = {"key": PREFIX + d.key, "default": d.default, "valid": d.valid}
        if hasattr(d.parse, "choices"):
            entry.update(kind="choice", choices=list(d.parse.choices))  # type: ignore[attr-defined]
        elif hasattr(d.parse, "minimum"):
            entry.update(kind="int", minimum=d.parse.minimum,  # type: ignore[attr-defined]
                         maximum=d.parse.maximum)  # type: ignore[attr-defined]
        elif d.parse is _bool:
            entry.update(kind="bool")
        else:
            entry.update(kind="text")
        out.append(entry)
    return json.dumps(out, indent=1, sort_keys=True)


def settings_table_markdown() -> str:
    """The settings table of docs/configuration.md, generated from DECLARATIONS."""
    rows = ["| key | default | valid values | what it does |", "|---|---|---|---|"]
    for d in DECLARATIONS:
        default = ("(unset)" if d.default in (None, ()) else str(d.default).lower() if isinstance(d.default, bool)
                   else str(d.default))
        rows.append(f"| `{PREFIX}{d.key}` | `{default}` | {d.valid} | {d.doc} |")
    return "\n".join(rows)


SPARK_DEFAULTS_PLACEHOLDERS = ("/path/to/site-packages/sparkstate/jars/sparkstate-spark-<line>.jar",
                               "/path/to/venv/bin/python")


def spark_defaults_file(jar: str = SPARK_DEFAULTS_PLACEHOLDERS[0], python: str = SPARK_DEFAULTS_PLACEHOLDERS[1]) -> str:
    """The whole of conf/spark-defaults.conf: the three lines that enable sparkstate, with `jar` and
    `python` filled in (`sparkstate conf-docs --spark-defaults` passes this install's), then every
    setting commented out at its default."""
    return f"""\
# sparkstate: state store provider for Spark Structured Streaming, as spark-defaults.conf entries.
#
# Append these lines to $SPARK_HOME/conf/spark-defaults.conf, pass the file with
# `spark-submit --properties-file`, or pass each line as --conf key=value. `sparkstate conf-docs
# --spark-defaults` prints this file with the jar and the interpreter of the current install filled in.
# From PySpark, `sparkstate.configure(SparkSession.builder, **settings)` sets the first three for you.
#
# The provider is recorded in a query's checkpoint on its first batch: a query restarted on an
# existing checkpoint keeps the provider it started with, whatever this file says (Spark only logs a
# warning). Start a new checkpoint to switch providers.

# The JVM shim of your Spark line (3.5, 4.0, 4.1, 4.2 or 4.3), shipped inside the Python package:
# `sparkstate jar --spark-version <version>` prints its path.
spark.jars                                              {jar}

{PROVIDER_CLASS_KEY}            {PROVIDER_CLASS}

# Interpreter that runs the store workers on every executor; it must have sparkstate installed.
# Unset: spark.pyspark.python, then PYSPARK_PYTHON, then python3.
{PREFIX}pythonExec    {python}

# ---- sparkstate settings, with their defaults (the list is provider/sparkstate/config.py DECLARATIONS).
# ---- Uncomment to change one.

{settings_spark_defaults()}"""


def settings_spark_defaults() -> str:
    """The commented settings block of conf/spark-defaults.conf, generated from DECLARATIONS."""
    blocks = []
    for d in DECLARATIONS:
        doc = f"{d.doc} Valid: {d.valid}."
        lines = textwrap.wrap(doc, width=100, initial_indent="# ", subsequent_indent="# ")
        if d.default in (None, ()):
            lines.append(f"#{PREFIX}{d.key}")
        else:
            value = str(d.default).lower() if isinstance(d.default, bool) else str(d.default)
            lines.append(f"#{PREFIX + d.key:<71} {value}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
