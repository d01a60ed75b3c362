"""A RocksDB SST set's private files (its MANIFEST-*, CURRENT, WAL and rocksdict-config.json) as one shared
file, `private-files.tar.gz`, uploaded with the set's new SST files.

Every version built on the set names that one file, where a manifest would otherwise embed the same
files again at every commit between flushes: they are most of a manifest (about 600 of 1,150 bytes), and
a manifest is written at every commit of every store. A restore unpacks the file into the database
directory. The files are tiny, so one gzip'd tar costs one write per set instead of one per file. A store
that flushes at every commit has no versions between flushes and embeds them in its manifests instead
(snapshot.py).
"""
from __future__ import annotations

import gzip
import os
import tarfile
import zlib

from ...errors import CorruptCheckpointError

PACK_NAME = "private-files.tar.gz"


def pack_private_files(directory: str, names: list[str]) -> str:
    """Pack `names` (files of `directory`) into `directory/private-files.tar.gz`; its name."""
    with tarfile.open(os.path.join(directory, PACK_NAME), "w:gz", compresslevel=9) as tar:
        for name in names:
            tar.add(os.path.join(directory, name), arcname=name, filter=_anonymous)
    return PACK_NAME


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """No owner in the pack: it is read back as bytes, never as this machine's files."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def unpack_private_files(path: str, db_dir: str, source: str) -> None:
    """Write the files of the pack at `path` into `db_dir`; `source` (its remote path) names it in errors.
    Only plain files with plain names are accepted: anything else is not a pack this backend wrote."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                name = member.name
                if not member.isfile() or "/" in name or name in ("", ".", ".."):
                    raise CorruptCheckpointError(f"{source} holds {name!r}, not a database file of a RocksDB "
                                                 "version's private files")
                data = tar.extractfile(member)
                assert data is not None  # a regular file
                with open(os.path.join(db_dir, name), "wb") as out:
                    out.write(data.read())
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:  # a local disk's OSError propagates
        raise CorruptCheckpointError(f"{source} is not a readable gzip'd tar of database files: {e!r}") from None
