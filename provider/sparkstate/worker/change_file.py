"""The file that hands a range of change records to the JVM (Spark's change feed), read there by
io.sparkstate.ChangeFileReader and deleted by it.

A change feed is read once, front to back, by one task, and can be larger than one data frame: a local
file written in one go keeps the data channel's frames out of it. Layout, big-endian, one record after
another until the end of the file:

    int64  version      the store version whose batch made the change (batch id + 1)
    int32  key length   then the storage key (key group, then the key row; see KeyCodec)
    int32  value length -1 for a remove, then the value row
"""
from __future__ import annotations

import os
import struct
import tempfile
from typing import Iterable

from ..engine import VersionChanges

_HEAD = struct.Struct(">qi")
_LEN = struct.Struct(">i")


def write_change_file(changes: Iterable[VersionChanges], directory: str) -> tuple[str, int]:
    """(path, number of records) of a new file in `directory` holding `changes` in order."""
    os.makedirs(directory, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="changes-", suffix=".bin", dir=directory)
    rows = 0
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            for c in changes:
                for key, value in c.rows:
                    out.write(_HEAD.pack(c.version, len(key)))
                    out.write(key)
                    if value is None:
                        out.write(_LEN.pack(-1))
                    else:
                        out.write(_LEN.pack(len(value)))
                        out.write(value)
                    rows += 1
    except BaseException:
        os.remove(path)
        raise
    return path, rows
