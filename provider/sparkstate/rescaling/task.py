"""The executor side of a rescale: build every store of one new partition (no pyspark, no JVM).

For each store of the query, new partition p reads, from each old partition that can hold its keys, the
latest committed version through the engine's `Store` API (`load`, `open_cursor`), keeps exactly the
entries whose key group routes to p (`pmod(kg, N) == p`), and writes them into an empty backend of the
same kind, committed as version N+2 through the backend's own snapshot path (`run_snapshot`). Data files go
to the store's checkpoint directory under fresh names (unreferenced until published); the manifest is
*staged* in the rescale's staging directory instead of `manifests/`, so nothing the query can see changes
until the driver publishes all of them. A done marker per partition (written last) lets a re-run skip
finished partitions.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from typing import Any

from ..checkpoint import CheckpointFileManager, Manifest
from ..checkpoint.file_manager import PublishResult
from ..engine.backend import BackendContext, builder_for, run_snapshot
from ..engine.local_layout import InstanceLayout
from ..engine.store import Store, StoreSpec, storage_conf_for
from ..keygroups import KEY_GROUP_BYTES
from ..storage import FileIO, fileio_for
from .plan import Plan, StorePlan, join, store_spec_doc
from .spark_logs import RescaleError

CHUNK_ROWS = 65536
CHUNK_BYTES = 16 << 20
WRITE_BATCH_ROWS = 65536


def staged_manifest_path(plan: Plan, store: StorePlan, part: int) -> str:
    return join(plan.staging_dir, "manifests", str(store.operator_id), str(part), f"{store.store_name}.manifest")


def done_marker_path(plan: Plan, part: int) -> str:
    return join(plan.staging_dir, "done", f"{part}.json")


class StagingFileManager(CheckpointFileManager):
    """Writes data files where the store keeps them, but the manifest to a staging path."""

    def __init__(self, location: str, fileio: FileIO, staged_path: str, staging_io: FileIO, io_threads: int) -> None:
        super().__init__(location, fileio, io_threads=io_threads)
        self._staged_path, self._staging_io = staged_path, staging_io
        self.staged: Manifest | None = None

    def publish_manifest(self, manifest: Manifest) -> PublishResult:
        self._staging_io.write_bytes_atomic(self._staged_path, manifest.to_bytes())
        self.staged = manifest
        return PublishResult(manifest, False)


def _key_group(key: bytes) -> int:
    return int.from_bytes(key[:KEY_GROUP_BYTES], "big", signed=True)


def _files_exist(fm: CheckpointFileManager, manifest: Manifest) -> bool:
    return all(fm.fileio.exists(fm.file_path(ref.remote)) for ref in manifest.shared_files)


def rescale_partition(plan_json: str, part: int, local_root: str | None = None) -> dict[str, Any]:
    """Build (stage) every store of new partition `part`; returns its statistics."""
    plan = Plan.from_json(plan_json)
    staging_io = fileio_for(plan.checkpoint)
    marker = done_marker_path(plan, part)
    if staging_io.exists(marker):
        stats = json.loads(staging_io.read_bytes(marker))
        if _staged_outputs_intact(plan, part, staging_io):
            stats["skipped"] = True
            return stats
    t0 = time.perf_counter()
    root = local_root or tempfile.mkdtemp(prefix=f"sparkstate-rescale-{part}-")
    stats: dict[str, Any] = {"partition": part, "rows": 0, "dataBytes": 0, "bytesUploaded": 0,
                             "filesUploaded": 0, "stores": 0, "skipped": False}
    try:
        for store in plan.stores:
            sources = plan.source_partitions(store, part)
            if store.single_partition and part != 0:
                continue
            rows, data_bytes, outcome = _build_store(plan, store, part, sources, root, staging_io)
            stats["rows"] += rows
            stats["dataBytes"] += data_bytes
            stats["bytesUploaded"] += outcome.bytes_uploaded
            stats["filesUploaded"] += outcome.files_uploaded
            stats["stores"] += 1
    finally:
        if local_root is None:
            shutil.rmtree(root, ignore_errors=True)
    stats["ms"] = int((time.perf_counter() - t0) * 1000)
    if part in plan.fail_partitions:
        raise RescaleError(f"injected failure in new partition {part} (test hook)")
    staging_io.write_bytes_atomic(marker, json.dumps(stats, sort_keys=True).encode())
    return stats


def _staged_outputs_intact(plan: Plan, part: int, staging_io: FileIO) -> bool:
    for store in plan.stores:
        if store.single_partition and part != 0:
            continue
        path = staged_manifest_path(plan, store, part)
        try:
            manifest = Manifest.from_bytes(staging_io.read_bytes(path), path)
        except Exception:  # noqa: BLE001 - missing or unreadable: redo the partition
            return False
        spec = StoreSpec.from_json(store_spec_doc(plan, store, part, "check"))
        location = spec.state_location()
        fm = CheckpointFileManager(location, fileio_for(location, storage_conf_for(location, spec)))
        if not _files_exist(fm, manifest):
            return False
    return True


def _build_store(plan: Plan, store: StorePlan, part: int, sources: list[int], root: str,
                 staging_io: FileIO):
    spec = StoreSpec.from_json(store_spec_doc(plan, store, part, f"rescale-w-{uuid.uuid4().hex[:12]}"))
    location = spec.state_location()
    layout = InstanceLayout(os.path.join(root, spec.instance_id))
    fm = StagingFileManager(location, fileio_for(location, storage_conf_for(location, spec)),
                            staged_manifest_path(plan, store, part), staging_io, spec.settings.io_threads)
    ctx = BackendContext(settings=spec.settings, layout=layout, file_manager=fm,
                         instance_id=spec.instance_id, query_run_id=spec.query_run_id)
    backend = builder_for(plan.backend)(ctx, None)
    rows = data_bytes = 0
    try:
        for old in sources:
            r, b = _copy_from(plan, store, old, part, root, backend)
            rows += r
            data_bytes += b
        outcome, _ = run_snapshot(backend, plan.new_version)
    finally:
        backend.close()
        layout.delete_all()
    if outcome.manifest.num_keys != rows:
        raise RescaleError(f"{store.label} new partition {part}: wrote {rows} entries but version "
                           f"{plan.new_version} holds {outcome.manifest.num_keys}")
    return rows, data_bytes, outcome


def _copy_from(plan: Plan, store: StorePlan, old: int, part: int, root: str, backend) -> tuple[int, int]:
    """Copy the entries of old partition `old` that route to new partition `part` into `backend`."""
    spec = StoreSpec.from_json(store_spec_doc(plan, store, old, f"rescale-r{part}-{uuid.uuid4().hex[:12]}"))
    reader = Store(spec, local_root=root)
    n_new, n_old = plan.new_partitions, plan.old_partitions
    check_old = not store.single_partition
    rows = data_bytes = 0
    try:
        reader.load(plan.old_version)
        cursor = reader.open_cursor(b"")
        try:
            pending: list[tuple[bytes, bytes | None]] = []
            done = False
            while not done:
                chunk, done = cursor.next_chunk(CHUNK_ROWS, CHUNK_BYTES)
                if store.single_partition:
                    keep = chunk
                else:
                    keep = []
                    for k, v in chunk:
                        kg = _key_group(k)
                        if kg % n_new == part:
                            keep.append((k, v))
                        if check_old and kg % n_old != old:
                            raise RescaleError(
                                f"{store.label} old partition {old}: an entry with key group {kg} belongs to "
                                f"partition {kg % n_old} of {n_old}; the stored key groups do not match Spark's "
                                "routing, so this state cannot be rescaled exactly")
                pending.extend(keep)
                rows += len(keep)
                data_bytes += sum(len(k) + len(v) for k, v in keep)
                if len(pending) >= WRITE_BATCH_ROWS:
                    backend.apply_batch(pending)
                    pending = []
            if pending:
                backend.apply_batch(pending)
        finally:
            cursor.close()
    finally:
        reader.close()
    return rows, data_bytes
