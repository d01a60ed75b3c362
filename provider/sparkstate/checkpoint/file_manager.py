"""CheckpointFileManager: owns every remote name and every remote write of one store's checkpoint.

The engine hands it local directories, local file names and versions, and writes the files of a commit
through it (`upload_new_files` for files that exist locally, `new_file` for files written as a stream);
it never builds a remote path. It also fills and prunes the engine's local cache of remote files.
"""
from __future__ import annotations

import contextvars
import logging
import os
import re
import shutil
import threading
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterable, Sequence, TypeVar

from ..errors import CheckpointError, CorruptCheckpointError, VersionNotFoundError, local_disk_error
from ..storage import FileIO, fileio_for
from .manifest import Manifest, SharedFileRef, header_crc

log = logging.getLogger(__name__)

_MANIFEST_RE = re.compile(r"^(\d+)\.manifest$")
_ATTEMPT_RE = re.compile(r"^(\d+)_([0-9A-Za-z][0-9A-Za-z-]*)\.manifest$")
_SUPERSEDED_RE = re.compile(r"^(\d+)\.superseded-[0-9a-f]+$")
_CHUNK = 1 << 20
_T = TypeVar("_T")
_R = TypeVar("_R")


def file_crc32(path: str) -> tuple[int, int]:
    """(size, crc32) of a local file, read in 1 MiB chunks."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def _describe_writer(raw: bytes | None, path: str) -> str:
    if raw is None:
        return "a manifest that vanished"
    try:
        m = Manifest.from_bytes(raw, path)
    except CorruptCheckpointError:
        return "an unreadable manifest"
    return f"the one of writer {m.writer_instance_id} (run {m.query_run_id}, {m.num_keys} keys)"


def parse_manifest_name(name: str) -> tuple[int, str | None] | None:
    """(version, checkpoint id) of a manifest file name: `<v>.manifest` -> (v, None), `<v>_<id>.manifest`
    (an attempt under checkpoint format v2) -> (v, id); None for any other name."""
    m = _MANIFEST_RE.match(name)
    if m:
        return int(m.group(1)), None
    m = _ATTEMPT_RE.match(name)
    if m:
        return int(m.group(1)), m.group(2)
    return None


def versions_of(manifest_names: Iterable[str]) -> list[int]:
    """The versions, ascending, that a manifests directory's file names hold (attempt manifests too)."""
    return sorted({p[0] for name in manifest_names if (p := parse_manifest_name(name))})


def check_checkpoint_id(checkpoint_id: str) -> str:
    """A checkpoint id becomes part of a file name: letters, digits and dashes only (Spark's are UUIDs)."""
    if not _ATTEMPT_RE.match(f"0_{checkpoint_id}.manifest"):
        raise CheckpointError(f"state store checkpoint id {checkpoint_id!r} is not a UUID-like name "
                              "(letters, digits, dashes); the commit log holding it is damaged")
    return checkpoint_id


def new_attempt_id() -> str:
    """8 hex chars, fresh for every commit attempt: keeps remote names unique across retries."""
    return uuid.uuid4().hex[:8]


@dataclass
class UploadResult:
    refs: list[SharedFileRef]
    bytes_uploaded: int


@dataclass
class CleanupResult:
    versions_deleted: list[int] = field(default_factory=list)
    files_deleted: int = 0


class CheckpointFileManager:
    """Remote layout, manifests, verified downloads and retention of one store.

    Remote tree (`root` = `<storeCheckpointLocation>/sparkstate`)::

        <root>/manifests/<version>.manifest          one per committed version, written last, atomically
        <root>/manifests/<version>_<ckptId>.manifest one per commit attempt under checkpoint format v2,
                                                     written just before `<version>.manifest`, never replaced
        <root>/manifests/<version>.superseded-<id>   read only: older checkpoints may hold such records
                                                     of replaced versions; retention frees their files
        <root>/files/<version>-<id>-<localName>      immutable files (SSTs, heap deltas and snapshots);
                                                     <id> is the commit attempt

    Local tree (the engine's; this class fills and prunes `cache/`)::

        <instanceDir>/cache/<remote name>            verified copies (size + crc32) of remote files
        <instanceDir>/db-<n>/                        live database (hard links into cache/ + private files)
        <instanceDir>/ckpt-<n>/                      temporary database checkpoint during a commit

    Invariants:
      1. A remote file name is never written twice: `<id>` is fresh per commit attempt, so a retried or
         concurrent commit of the same version cannot clobber files another manifest references.
      2. A manifest is written after all files it references exist, atomically; a version exists iff
         its manifest does, and is always exactly one complete manifest. The last attempt to commit a
         version wins (see `publish_manifest`); the files of a replaced manifest stay in place, so a
         reader that read it still finds them. A commit failing earlier leaves only unreferenced files
         behind (removed by `sparkstate gc`). Under checkpoint format v2 every attempt also keeps its own
         manifest (`publish_attempt`), which is what a load with the id Spark's commit log recorded reads:
         there the recorded attempt counts, not the last one.
      3. Every file in `cache/` matched its manifest's size and crc32 when it was downloaded.
      4. Retention deletes only files referenced by deleted manifests (every manifest of a deleted version,
         attempts and superseded records included) and by no retained manifest; it never lists `files/`. Unreferenced leftovers of
         failed commits are therefore never deleted here (a leak, not a corruption; `checkpoint.gc`
         collects them offline with a grace period).

    Thread-safety: the parsed-manifest cache is guarded by `_lock`; no I/O happens under it, so a
    cleanup on a maintenance thread does not stall a commit on the task thread. Two provider instances
    may share the directory: deletes tolerate missing files and manifests vanishing mid-cleanup.
    """

    def __init__(self, checkpoint_location: str, fileio: FileIO | None = None, io_threads: int = 4) -> None:
        self.fileio = fileio if fileio is not None else fileio_for(checkpoint_location)
        self.io_threads = max(1, io_threads)
        self.root = self.fileio.join(checkpoint_location, "sparkstate")
        self.manifests_dir = self.fileio.join(self.root, "manifests")
        self.files_dir = self.fileio.join(self.root, "files")
        self._lock = threading.Lock()
        # manifest file name -> (header crc, raw length, parsed); guarded by _lock
        self._cache: dict[str, tuple[int, int, Manifest]] = {}
        self._reported_beyond: list[int] = []  # last manifests beyond the head that cleanup warned of

    # ---- names ----------------------------------------------------------------------------------
    @staticmethod
    def manifest_name(version: int, checkpoint_id: str | None = None) -> str:
        return f"{version}.manifest" if checkpoint_id is None else f"{version}_{checkpoint_id}.manifest"

    def manifest_path(self, version: int, checkpoint_id: str | None = None) -> str:
        return self.fileio.join(self.manifests_dir, self.manifest_name(version, checkpoint_id))

    def file_path(self, remote: str) -> str:
        return self.fileio.join(self.files_dir, remote)

    @staticmethod
    def remote_name(version: int, attempt_id: str, local_name: str) -> str:
        return f"{version}-{attempt_id}-{local_name}"

    # ---- versions -------------------------------------------------------------------------------
    def versions(self) -> list[int]:
        """Committed versions, ascending."""
        return versions_of(self.fileio.list(self.manifests_dir))

    def latest_version(self) -> int | None:
        vs = self.versions()
        return vs[-1] if vs else None

    def has_version(self, version: int) -> bool:
        return self.fileio.exists(self.manifest_path(version))

    def read_manifest(self, version: int, checkpoint_id: str | None = None) -> Manifest:
        """The manifest of `version` (of its attempt `checkpoint_id`, under checkpoint format v2), always
        read from storage (a retry elsewhere may have replaced it)."""
        path = self.manifest_path(version, checkpoint_id)
        try:
            raw = self.fileio.read_bytes(path)
        except FileNotFoundError:
            if checkpoint_id is not None:
                raise VersionNotFoundError(
                    f"version {version} has no manifest of attempt {checkpoint_id} (the checkpoint id Spark's "
                    f"commit log recorded) at {path}: removed by retention (minBatchesToRetain), or the state "
                    "files are not the ones this commit log was written with") from None
            raise VersionNotFoundError(
                f"version {version} has no manifest at {path}: never committed, removed by retention "
                f"(minBatchesToRetain), or the state lives elsewhere (stateLocation)") from None
        manifest = self._parse_cached(raw, path)
        if manifest.version != version:
            raise CorruptCheckpointError(f"manifest {path} describes version {manifest.version}, not {version}")
        if checkpoint_id is not None and manifest.checkpoint_id != checkpoint_id:
            raise CorruptCheckpointError(
                f"manifest {path} describes attempt {manifest.checkpoint_id}, not {checkpoint_id}")
        return manifest

    def loadable_versions(self, below: int, limit: int = 3, scan: int = 20) -> list[int]:
        """Up to `limit` versions below `below`, newest first, whose manifest parses and whose files are all
        present with the sizes it lists (a restore's needs short of checksums; `sparkstate verify` checks
        those): where a roll-back can go. Reads at most `scan` manifests; an error path, not a hot one."""
        try:
            present = {i.name: i.size for i in self.fileio.list_info(self.files_dir)}
            versions = [v for v in self.versions() if v < below][-scan:]
        except (OSError, CheckpointError):
            return []
        out: list[int] = []
        for v in reversed(versions):
            try:
                manifest = self.read_manifest(v)
            except (OSError, CheckpointError):
                continue
            if all(present.get(ref.remote) == ref.size for ref in manifest.shared_files):
                out.append(v)
                if len(out) == limit:
                    break
        return out

    def _parse_cached(self, raw: bytes, path: str) -> Manifest:
        name = path.rsplit("/", 1)[-1]
        crc = header_crc(raw)
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None and crc is not None and hit[0] == crc and hit[1] == len(raw):
            return hit[2]
        manifest = Manifest.from_bytes(raw, path)
        with self._lock:
            self._cache[name] = (crc or 0, len(raw), manifest)
        return manifest

    # ---- commit ---------------------------------------------------------------------------------
    def upload_new_files(self, version: int, attempt_id: str, local_dir: str,
                         local_names: Sequence[str]) -> UploadResult:
        """Upload files of a local directory under fresh remote names, `io_threads` at a time; returns
        their references once every upload has returned (i.e. is durable). Any failure propagates after
        the other uploads finished, so nothing of this attempt is still being written afterwards."""

        def one(local: str) -> SharedFileRef:
            src = os.path.join(local_dir, local)
            size, crc = file_crc32(src)
            remote = self.remote_name(version, attempt_id, local)
            self.fileio.upload_file(src, self.file_path(remote))
            return SharedFileRef(remote=remote, local=local, size=size, crc32=crc)

        refs = self._parallel(one, list(local_names))
        return UploadResult(refs, sum(r.size for r in refs))

    def _parallel(self, fn: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        """fn over items, up to `io_threads` at a time, results in order; waits for all, then raises the
        first error (so no call is still running when the caller handles it). Each call runs in a copy of
        the caller's context (its S3 request phase, storage.s3_requests)."""
        if len(items) <= 1 or self.io_threads == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.io_threads, len(items)),
                                thread_name_prefix="sparkstate-io") as pool:
            futures = [pool.submit(contextvars.copy_context().run, fn, x) for x in items]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise errors[0]
        return [f.result() for f in futures]

    def publish_manifest(self, manifest: Manifest) -> Manifest:
        """Publish a version; call it only after every file the manifest names is uploaded.

        The last attempt to commit a version is the one that counts, as with Spark's own providers under
        checkpoint format 1: a batch re-executed after a crash (with new input, say, or non-deterministic
        functions) replaces what the killed attempt committed, which Spark's commit log never recorded.
        Created with put-if-absent; if the version exists:
        - same bytes: our own earlier try (a lost response, retried): nothing to do;
        - other content (or a manifest that cannot be parsed): replaced atomically (a single PUT, or
          os.replace), so readers see one complete manifest or the other. The replaced manifest's files
          are not touched: they become orphans for `sparkstate gc` once no manifest lists them.
        """
        version = manifest.version
        path = self.manifest_path(version)
        data = manifest.to_bytes()
        if not self.fileio.create_exclusive(path, data):
            try:
                existing = self.fileio.read_bytes(path)
            except FileNotFoundError:
                existing = None  # removed meanwhile (retention of a far older run): write ours
            if existing != data:
                log.info("version %d at %s is committed again; replacing %s with this attempt's (writer %s, "
                         "run %s, %d keys)", version, self.root, _describe_writer(existing, path),
                         manifest.writer_instance_id, manifest.query_run_id, manifest.num_keys)
                self.fileio.write_bytes_atomic(path, data)
        self._remember(self.manifest_name(version), data, manifest)
        return manifest

    def _remember(self, name: str, data: bytes, manifest: Manifest) -> None:
        """Cache a manifest this instance just wrote."""
        with self._lock:
            self._cache[name] = (header_crc(data) or 0, len(data), manifest)

    def _create_or_match(self, path: str, data: bytes) -> bool:
        """Put-if-absent: True when `path` now holds `data` (written here, or by an earlier try of the same
        step); False when it holds other content."""
        return self.fileio.create_exclusive(path, data) or self.fileio.read_bytes(path) == data

    def publish_attempt(self, manifest: Manifest) -> Manifest:
        """Publish a commit attempt under checkpoint format v2: its own manifest
        `<version>_<checkpointId>.manifest` (put-if-absent: an id names one attempt), then the version's
        `<version>.manifest` as `publish_manifest` does, for readers that know no checkpoint id. A load with
        the id Spark's commit log recorded reads the first, whichever attempt was published last."""
        assert manifest.checkpoint_id is not None
        name = self.manifest_name(manifest.version, manifest.checkpoint_id)
        path = self.fileio.join(self.manifests_dir, name)
        data = manifest.to_bytes()
        if not self._create_or_match(path, data):
            raise CheckpointError(f"{path} already exists with other content: two commit attempts were given "
                                  f"the same checkpoint id {manifest.checkpoint_id}")
        self._remember(name, data, manifest)
        return self.publish_manifest(manifest)

    def new_file(self, version: int, attempt_id: str, local_name: str, staging_dir: str) -> "NewFile":
        """A file of `version` to be written as a stream (a heap journal or snapshot): in place under
        `files/` where the storage writes in place (`FileIO.open_write`), else in `staging_dir` and
        uploaded by `NewFile.finish`. Either way it is unreferenced until a manifest names it."""
        remote = self.remote_name(version, attempt_id, local_name)
        target = self.file_path(remote)
        f = self.fileio.open_write(target)
        staged = None
        if f is None:
            os.makedirs(staging_dir, exist_ok=True)
            staged = os.path.join(staging_dir, f"{attempt_id}-{local_name}")
            f = open(staged, "xb")
        return NewFile(self, remote, local_name, target, staged, f)

    def publish_staged_manifest(self, version: int, data: bytes, checkpoint_id: str | None = None) -> None:
        """Publish a manifest prepared elsewhere (a rescale's staged version): put-if-absent; the same bytes
        already there mean an earlier run of the same step published it. Other content is an error: the
        version was committed by someone else since the manifest was staged. With a `checkpoint_id` (format
        v2) the attempt's own manifest is published first."""
        names = [self.manifest_name(version)]
        if checkpoint_id is not None:
            names.insert(0, self.manifest_name(version, checkpoint_id))
        for name in names:
            path = self.fileio.join(self.manifests_dir, name)
            if not self._create_or_match(path, data):
                raise CheckpointError(f"{path} already exists with other content: the checkpoint changed since "
                                      "this version was prepared")
            with self._lock:
                self._cache.pop(name, None)

    # ---- local cache ----------------------------------------------------------------------------
    @staticmethod
    def add_to_cache(cache_dir: str, local_dir: str, refs: Sequence[SharedFileRef]) -> None:
        """Hard-link just uploaded files (`local_dir/<ref.local>`) into the cache, so a later restore needs
        no download. Best effort: the version is durable already, a missing entry is only downloaded."""
        for ref in refs:
            CheckpointFileManager.cache_file(cache_dir, os.path.join(local_dir, ref.local), ref.remote)

    @staticmethod
    def cache_file(cache_dir: str, path: str, remote: str) -> None:
        """Hard-link (else copy) a local file that is remote file `remote` into the cache; best effort."""
        target = os.path.join(cache_dir, remote)
        try:
            os.makedirs(cache_dir, exist_ok=True)
            os.link(path, target)
        except FileExistsError:
            pass
        except OSError:
            try:
                shutil.copyfile(path, target)
            except OSError:
                pass

    @staticmethod
    def prune_cache(cache_dir: str, keep_remote_names: Iterable[str]) -> None:
        """Remove cached files the current lineage no longer references (they stay on the remote)."""
        keep = set(keep_remote_names)
        try:
            names = os.listdir(cache_dir)
        except FileNotFoundError:
            return
        for name in names:
            if name not in keep:
                try:
                    os.remove(os.path.join(cache_dir, name))
                except OSError:
                    pass

    # ---- restore --------------------------------------------------------------------------------
    def fetch_to_cache(self, ref: SharedFileRef, cache_dir: str, version: int, verify_cached: bool = False) -> str:
        """Local path of a verified copy of `ref` in `cache_dir`, downloading it if needed.

        A downloaded file whose size or crc32 differs from the manifest raises CorruptCheckpointError
        naming the remote file and the version; nothing unverified is ever left in the cache.
        """
        target = os.path.join(cache_dir, ref.remote)
        if os.path.exists(target):
            size, crc = file_crc32(target) if verify_cached else (os.path.getsize(target), ref.crc32)
            if size == ref.size and crc == ref.crc32:
                return target
            os.remove(target)  # a damaged local copy: fetch it again
        os.makedirs(cache_dir, exist_ok=True)
        remote_path = self.file_path(ref.remote)
        tmp = f"{target}.download-{uuid.uuid4().hex[:8]}"
        try:
            try:
                self.fileio.download_file(remote_path, tmp)
            except FileNotFoundError:
                raise CorruptCheckpointError(
                    f"checkpoint file {remote_path} listed by version {version} is missing") from None
            size, crc = file_crc32(tmp)
            if size != ref.size or crc != ref.crc32:
                raise CorruptCheckpointError(
                    f"checkpoint file {remote_path} of version {version} is corrupt (checksum mismatch): "
                    f"size {size} crc32 {crc:08x}, manifest says size {ref.size} crc32 {ref.crc32:08x}. "
                    "The file was damaged after it was written; restore it from a backup, or restart the "
                    "query from a new checkpoint")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return target

    def fetch_all(self, refs: Sequence[SharedFileRef], cache_dir: str, version: int,
                  verify_cached: bool = False) -> dict[str, str]:
        """`fetch_to_cache` for every ref, `io_threads` at a time: {local name: cached path}."""
        paths = self._parallel(lambda r: self.fetch_to_cache(r, cache_dir, version, verify_cached), list(refs))
        return {ref.local: p for ref, p in zip(refs, paths)}

    # ---- retention ------------------------------------------------------------------------------
    def cleanup(self, min_versions_to_retain: int, head: int | None = None) -> CleanupResult:
        """Keep the newest `min_versions_to_retain` versions up to `head` (the version the caller last
        loaded or committed; None: the newest listed); delete older manifests, then the files only they
        referenced. Manifests beyond `head` are kept, and neither counted nor read: a newer writer's, or
        strays (`sparkstate gc` collects those); one of them cannot stop retention. Safe to run while
        this or another instance commits (see invariants)."""
        keep_n = max(1, min_versions_to_retain)
        names = self.fileio.list(self.manifests_dir)
        by_version: dict[int, list[str]] = {}  # version -> its manifest names (plain first, then attempts)
        for n in sorted(names, key=lambda n: (len(n), n)):
            if (parsed := parse_manifest_name(n)) is not None:
                by_version.setdefault(parsed[0], []).append(n)
        listed = sorted(by_version)
        versions = [v for v in listed if head is None or v <= head]
        beyond = [v for v in listed if head is not None and v > head]
        if beyond and beyond != self._reported_beyond:
            self._reported_beyond = beyond
            log.warning("%s: manifests of versions %s are beyond the version this store works on (%d): "
                        "retention ignores them (a newer writer's, or strays: `sparkstate verify` reports "
                        "them, `sparkstate gc` collects strays)", self.manifests_dir, version_ranges(beyond), head)
        if not versions:
            return CleanupResult()
        retained = versions[-keep_n:]
        doomed = [v for v in versions if v < retained[0]]
        doomed_names = [n for v in doomed for n in by_version[v]]
        doomed_records = [n for n in names if (m := _SUPERSEDED_RE.match(n)) and int(m.group(1)) < retained[0]]
        if not doomed and not doomed_records:
            return CleanupResult()

        candidates: set[str] = set()
        for name in doomed_names:
            m = self._cached_or_read(name)
            if m is not None:
                candidates |= m.remote_names()
        for name in doomed_records:
            path = self.fileio.join(self.manifests_dir, name)
            try:
                candidates |= Manifest.from_bytes(self.fileio.read_bytes(path), path).remote_names()
            except (FileNotFoundError, CorruptCheckpointError) as e:
                log.warning("cleanup: skipping unreadable superseded record %s: %s", path, e)

        referenced: set[str] = set()
        for v in retained + beyond:
            for name in by_version[v]:
                path = self.fileio.join(self.manifests_dir, name)
                try:
                    raw = self.fileio.read_bytes(path)  # fresh: a retry may have replaced it since we cached it
                except FileNotFoundError:
                    continue  # a concurrent cleaner with a newer listing deleted it
                try:
                    referenced |= self._parse_cached(raw, path).remote_names()
                except CorruptCheckpointError as e:
                    if v in beyond:
                        continue  # a damaged stray: nothing can load it, its files are of no version we keep
                    # We cannot tell what it references; deleting anything could break it.
                    raise CheckpointError(f"cleanup stopped, retained manifest unreadable: {e}; run `sparkstate "
                                          "verify` on the checkpoint") from e

        # Manifests first: a version must vanish before any of its files do (attempts before the version's
        # plain manifest, so a version is listed until the last of its manifests is gone).
        self.fileio.delete_many([self.fileio.join(self.manifests_dir, n) for n in reversed(doomed_names)] +
                                [self.fileio.join(self.manifests_dir, n) for n in doomed_records])
        with self._lock:
            for n in doomed_names:
                self._cache.pop(n, None)
        victims = sorted(candidates - referenced)
        self.fileio.delete_many(self.file_path(r) for r in victims)
        return CleanupResult(versions_deleted=doomed, files_deleted=len(victims))

    def _cached_or_read(self, name: str) -> Manifest | None:
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None:
            return hit[2]
        path = self.fileio.join(self.manifests_dir, name)
        try:
            return self._parse_cached(self.fileio.read_bytes(path), path)
        except FileNotFoundError:
            return None
        except CorruptCheckpointError as e:
            log.warning("cleanup: cannot read manifest %s (its files may leak): %s", path, e)
            return None

    def drop_cached(self, versions: Iterable[int]) -> None:
        drop = set(versions)
        with self._lock:
            for name in [n for n in self._cache if (p := parse_manifest_name(n)) and p[0] in drop]:
                self._cache.pop(name, None)


class NewFile:
    """A file of a commit being written as a stream (`CheckpointFileManager.new_file`). It counts size and
    crc32 as bytes go through `write`, so `finish` reads nothing back; it is file-like enough to be
    pyarrow's sink (`write`, `flush`, `close`, `closed`; `close` leaves the file to `finish`)."""

    def __init__(self, fm: CheckpointFileManager, remote: str, local: str, target: str, staged: str | None,
                 f: BinaryIO) -> None:
        self._fm, self.remote, self.local, self._target, self._staged, self._file = fm, remote, local, target, staged, f
        self.size = 0
        self.crc = 0
        self.closed = False
        self._ended = False

    def write(self, data) -> int:
        mv = memoryview(data)
        self.crc = zlib.crc32(mv, self.crc)
        self.size += mv.nbytes
        try:
            self._file.write(mv)
        except OSError as e:
            raise _named(e, self._staged or self._target) from e
        return mv.nbytes

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self.closed = True  # the file itself is closed by finish or discard

    def finish(self, cache_dir: str | None = None) -> SharedFileRef:
        """Make the file durable (fsync; upload when staged); its reference, for a manifest to name. With
        `cache_dir`, the local copy is kept there under its remote name, as a download would have put it
        (best effort: a missing entry is only downloaded)."""
        self._ended = True
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as e:
            raise _named(e, self._staged or self._target) from e
        finally:
            self._file.close()
        if self._staged is not None:
            try:
                self._fm.fileio.upload_file(self._staged, self._target)
                if cache_dir is not None:
                    self._fm.cache_file(cache_dir, self._staged, self.remote)
            finally:
                _remove_local(self._staged)
        elif cache_dir is not None:
            self._fm.cache_file(cache_dir, self._file.name, self.remote)  # written in place: a local path
        return SharedFileRef(remote=self.remote, local=self.local, size=self.size, crc32=self.crc)

    def discard(self) -> None:
        """Delete a file no manifest will name (an abort, a rewind); idempotent."""
        if self._ended:
            return
        self._ended = True
        self._file.close()
        if self._staged is not None:
            _remove_local(self._staged)
        else:
            self._fm.fileio.delete_many([self._target])


def version_ranges(versions: Iterable[int]) -> str:
    """`[3, 4, 5, 9]` as `3-5, 9`; `none` for no versions."""
    vs = sorted(versions)
    if not vs:
        return "none"
    out: list[str] = []
    start = prev = vs[0]
    for v in vs[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


def _named(error: OSError, path: str) -> OSError:
    """A full or read-only disk names the file being written (see errors.local_disk_error)."""
    return local_disk_error(error, path, "write")


def _remove_local(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
