"""Every error sparkstate raises, under one root.

Classes are named for the condition. Messages say what to fix and name the store, version, file or
setting involved; the worker boundary adds the store id to anything it did not expect.
"""
from __future__ import annotations


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


class StorageError(CheckpointError):
    """The storage system (e.g. S3) failed an operation after retries; the message names the operation
    and the object, never credentials."""


class StoreStateError(SparkstateError):
    """A store method was called in a lifecycle state that does not allow it."""


class ProtocolError(SparkstateError):
    """A malformed frame on the data channel."""
