"""Every error sparkstate raises, under one root.

Classes are named for the condition. Messages say what to fix and name the store, version, file or
setting involved; the worker boundary adds the store id to anything it did not expect.
"""
from __future__ import annotations

import errno
import os
import re
from contextlib import contextmanager
from typing import Iterator


class SparkstateError(Exception):
    """Root of all sparkstate errors."""


class ConfigError(SparkstateError):
    """A `spark.sql.streaming.stateStore.sparkstate.*` setting is unknown or has an invalid value."""


class CheckpointError(SparkstateError):
    """A checkpoint cannot be read or written."""


class VersionNotFoundError(CheckpointError):
    """The requested version has no manifest in the checkpoint (never committed, or deleted)."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file does not match what its manifest says (size or checksum), or cannot be parsed."""


class WrongStoreError(CheckpointError):
    """A store's checkpoint holds another store's versions or keys (a directory moved or copied to the
    wrong operator, partition or query)."""


class ChangeFeedError(CheckpointError):
    """The change feed or snapshot replay asked for versions, or a snapshot, the checkpoint does not hold
    (or holds no change log of); the message says what it holds."""


class SparkCheckpointError(CheckpointError):
    """One of Spark's own checkpoint files (offset or commit log, operator metadata, state schema) is
    missing, unreadable, or in a format sparkstate does not read."""


class StorageError(CheckpointError):
    """The storage system (e.g. S3) failed an operation after retries; the message names the operation
    and the object, never credentials."""


class StoreStateError(SparkstateError):
    """A store method was called in a lifecycle state that does not allow it."""


class ProtocolError(SparkstateError):
    """A malformed frame on the data channel."""


class UnknownHandleError(SparkstateError, KeyError):
    """A data frame or control call named a store handle this worker does not hold."""


class RescaleError(SparkstateError):
    """A rescale was refused or failed; the message says why and what to do."""


class MigrationError(SparkstateError):
    """A migration between state store providers was refused or failed; the message says why and what to do."""


class AlreadyDoneError(SparkstateError):
    """A rescale or migration asked for what the last committed batch already has (its partition count, its
    provider): there is nothing to rewrite. The commands report it and succeed, so that running one again
    after it finished is harmless."""


class AlreadyRescaledError(RescaleError, AlreadyDoneError):
    """The state already has the partition count a rescale asks for."""


class AlreadyMigratedError(MigrationError, AlreadyDoneError):
    """The query already runs on the provider (and partition count) a migration asks for."""


class ClassicSessionRequired(SparkstateError):
    """A tool that runs a Spark job of its own (rescale, migrate) was given a Spark Connect session: its
    tasks open the stores through the executors' JVMs, which a Connect client cannot reach."""


class LocalDiskError(StorageError):
    """A local file system refused a write (full, read-only, no permission); names the path."""


_ADVICE = {
    errno.ENOSPC: "the file system is full: free space on it (or move this location to a larger disk), then "
                  "restart the query; committed versions are intact",
    errno.EDQUOT: "the disk quota is exhausted: free space or raise the quota, then restart the query",
    errno.EROFS: "the file system is read-only: point the location at a writable one",
    errno.EACCES: "permission denied: make it writable by the user running the executors",
    errno.EPERM: "operation not permitted: make it writable by the user running the executors",
    errno.EISDIR: "a directory sits where sparkstate expects a file: move it away (`sparkstate verify` checks "
                  "the checkpoint)",
    errno.ENOTDIR: "a file sits where sparkstate expects a directory: move it away (`sparkstate verify` checks "
                   "the checkpoint)",
}


def local_disk_error(error: OSError, path: str, action: str) -> OSError | LocalDiskError:
    """`error` as a LocalDiskError naming `path` and what to do, when it is one a user can fix (full,
    read-only, not permitted); any other OSError is returned as it is (the caller re-raises it)."""
    code = error.errno
    if code is None:  # pyarrow reports the OS error only in its text: "... [errno 28] No space left ..."
        found = re.search(r"errno (\d+)", str(error), re.IGNORECASE)
        code = int(found.group(1)) if found else None
    advice = _ADVICE.get(code or 0)
    if advice is None:
        return error
    reason = error.strerror or os.strerror(code or 0)
    return LocalDiskError(f"cannot {action} {path}: {reason} [errno {code}]; {advice}")


@contextmanager
def disk_errors_named(action: str, path: str) -> Iterator[None]:
    """OSErrors a user can fix (a full or read-only disk) raised inside name the file the system call
    failed on (else `path`) and what to do (local_disk_error); others pass as they are."""
    try:
        yield
    except OSError as e:
        named = local_disk_error(e, e.filename or path, action)
        if named is e:
            raise
        raise named from e


# RocksDB reports an OS error only in its status text ("IO error: No space left on device: While
# appending to file: ..."), with the C library's wording of the errno.
_ROCKSDB_REASONS = {os.strerror(code): code for code in _ADVICE}


def rocksdb_disk_error(error: Exception, where: str, action: str) -> Exception:
    """A RocksDB failure whose text names an OS error a user can fix (full, read-only, not permitted) as a
    LocalDiskError naming `where` (the database) and what to do; any other error is returned as it is (the
    caller re-raises it)."""
    text = str(error)
    for reason, code in _ROCKSDB_REASONS.items():
        if reason in text:
            return LocalDiskError(f"cannot {action} {where}: {reason} [errno {code}]; {_ADVICE[code]}. "
                                  f"RocksDB said: {text}")
    return error
