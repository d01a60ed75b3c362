"""DeltaJournal: the writes of the version being written, appended to while its batch runs.

Every `apply_batch` after the head version appends its records to `delta-<v>.arrow` (an Arrow IPC
stream in the delta format of arrow_files.py, compressed blocks of at least 4,096 rows), a file of the file
manager's (`new_file`): written in place under its final, per-attempt remote name
`<v>-<attempt>-delta-<v>.arrow` on local storage, staged locally and uploaded at commit elsewhere. Only a
manifest makes it part of a version: an aborted or rewound attempt's journal is deleted, or, after a
crash, left unreferenced for `sparkstate gc`.

The heap backend's deltas are these journals, and so is the RocksDB backend's change log: both backends
record a version's writes in one format, which the change feed reads (change_feed.py).
"""
from __future__ import annotations

from ..checkpoint import SharedFileRef
from ..checkpoint.file_manager import new_attempt_id
from .backend_contract import BackendContext
from . import arrow_files as hf


class DeltaJournal:
    """The delta of `version`, appended to while its batch runs (see the module docstring), written
    through the file manager (`new_file`: in place on local storage, staged and uploaded elsewhere)."""

    def __init__(self, ctx: BackendContext, version: int, compression: str | None = None) -> None:
        """`compression`: the codec of its record batches (None: heap.compression, the heap backend's)."""
        self.version = version
        self.attempt_id = new_attempt_id()
        self._file = ctx.file_manager.new_file(version, self.attempt_id, hf.local_name(hf.KIND_DELTA, version),
                                               ctx.layout.staging_dir)
        try:
            self._writer = hf.JournalWriter(self._file, version,
                                            compression or ctx.settings.heap_compression)
        except BaseException:
            self._file.discard()
            raise

    @property
    def rows(self) -> int:
        return self._writer.rows

    def append(self, records) -> None:
        self._writer.append(records)

    def finish(self, cache_dir: str | None = None) -> SharedFileRef:
        """Make the delta durable; returns its reference (not yet in any manifest). With `cache_dir`, a
        local copy is kept there (NewFile.finish)."""
        self._writer.finish()
        return self._file.finish(cache_dir)

    def discard(self) -> None:
        """Delete an unfinished journal (abort, rewind, close): no manifest can reference it."""
        self._file.discard()
