"""The executor side of a rescale: build every store of one new partition (no pyspark, no JVM).

For each store of the query, new partition p reads, from each old partition that can hold its keys, the
latest committed version through the engine's `Store` API (`load`, `open_cursor`), keeps exactly the
entries whose key group routes to p (`pmod(kg, N) == p`), and writes them into an empty backend of the
same kind (for RocksDB as sorted SST files ingested into an empty database; see `targets.py`), committed
as version N+2 through the backend's own snapshot path (`run_snapshot`). Data files go
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

import numpy as np

from ..checkpoint import CheckpointFileManager, Manifest
from ..checkpoint.location import open_file_manager, open_fileio
from ..engine import Store, StoreSpec
from ..engine.backend_contract import BackendContext, CommitIds
from ..engine.local_layout import InstanceLayout
from ..errors import RescaleError
from ..storage import FileIO, fileio_for, join_path
from .plan import Plan, StorePlan, store_spec_doc
from .targets import Target, data_bytes, new_target, pick, route_chunk

CHUNK_ROWS = 65536
CHUNK_BYTES = 16 << 20


def staged_manifest_path(plan: Plan, store: StorePlan, part: int) -> str:
    return join_path(plan.staging_dir, "manifests", str(store.operator_id), str(part), f"{store.store_name}.manifest")


def done_marker_path(plan: Plan, part: int) -> str:
    return join_path(plan.staging_dir, "done", f"{part}.json")


class StagingFileManager(CheckpointFileManager):
    """Writes data files where the store keeps them, but the manifest to a staging path."""

    def __init__(self, location: str, fileio: FileIO, staged_path: str, staging_io: FileIO, io_threads: int) -> None:
        super().__init__(location, fileio, io_threads=io_threads)
        self._staged_path, self._staging_io = staged_path, staging_io
        self.staged: Manifest | None = None

    def publish_manifest(self, manifest: Manifest) -> Manifest:
        self._staging_io.write_bytes_atomic(self._staged_path, manifest.to_bytes())
        self.staged = manifest
        return manifest

    def publish_attempt(self, manifest: Manifest) -> Manifest:
        """Checkpoint format v2: the staged manifest carries the attempt's id; the driver publishes both names."""
        return self.publish_manifest(manifest)


def _files_exist(fm: CheckpointFileManager, manifest: Manifest) -> bool:
    return all(fm.fileio.exists(fm.file_path(ref.remote)) for ref in manifest.shared_files)


def rescale_partition(plan_json: str, part: int, local_root: str | None = None) -> dict[str, Any]:
    """Build (stage) every store of new partition `part`; returns its statistics."""
    return rescale_partitions(plan_json, [part], local_root)[0]


def rescale_partitions(plan_json: str, parts: list[int], local_root: str | None = None) -> list[dict[str, Any]]:
    """Build (stage) every store of the new partitions `parts`, which must share their source partitions
    (`Plan.task_groups`): each old store is scanned once and its entries are dealt to the targets.
    Partitions already staged by an interrupted run (done marker, files intact) are reused."""
    plan = Plan.from_json(plan_json)
    staging_io = fileio_for(plan.checkpoint)
    results: dict[int, dict[str, Any]] = {}
    todo = []
    for part in parts:
        marker = done_marker_path(plan, part)
        if staging_io.exists(marker) and _staged_outputs_intact(plan, part, staging_io):
            stats = json.loads(staging_io.read_bytes(marker))
            stats["skipped"] = True
            results[part] = stats
        else:
            todo.append(part)
    if todo:
        t0 = time.perf_counter()
        root = local_root or tempfile.mkdtemp(prefix=f"sparkstate-rescale-{todo[0]}-")
        stats_of = {p: {"partition": p, "rows": 0, "dataBytes": 0, "bytesUploaded": 0, "filesUploaded": 0,
                        "stores": 0, "skipped": False} for p in todo}
        try:
            for store in plan.stores:
                targets = [p for p in todo if not (store.single_partition and p != 0)]
                if not targets:
                    continue
                sources = plan.source_partitions(store, targets[0])
                assert all(plan.source_partitions(store, p) == sources for p in targets), "bad task group"
                for p, (rows, data_bytes, outcome) in _build_stores(plan, store, targets, sources, root,
                                                                     staging_io).items():
                    st = stats_of[p]
                    st["rows"] += rows
                    st["dataBytes"] += data_bytes
                    st["bytesUploaded"] += outcome.bytes_uploaded
                    st["filesUploaded"] += outcome.files_uploaded
                    st["stores"] += 1
        finally:
            if local_root is None:
                shutil.rmtree(root, ignore_errors=True)
        ms = int((time.perf_counter() - t0) * 1000)
        for p in todo:
            stats_of[p]["ms"] = ms
            staging_io.write_bytes_atomic(done_marker_path(plan, p), json.dumps(stats_of[p], sort_keys=True).encode())
            results[p] = stats_of[p]
    return [results[p] for p in parts]


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
        fm = open_file_manager(spec.state_location(), spec.settings, spec.hadoop_s3a)
        if not _files_exist(fm, manifest):
            return False
    return True


def _new_target(plan: Plan, store: StorePlan, part: int, root: str, staging_io: FileIO) -> Target:
    """An empty store of new partition `part` whose commit writes its manifest to the staging area."""
    spec = StoreSpec.from_json(store_spec_doc(plan, store, part, f"rescale-w-{uuid.uuid4().hex[:12]}"))
    location = spec.state_location()
    layout = InstanceLayout(os.path.join(root, spec.instance_id))
    fm = StagingFileManager(location, open_fileio(location, spec.settings, spec.hadoop_s3a),
                            staged_manifest_path(plan, store, part), staging_io, spec.settings.io_threads)
    ids = CommitIds(str(uuid.uuid4())) if plan.checkpoint_ids else CommitIds()  # format v2: a new attempt
    ctx = BackendContext(settings=spec.settings, layout=layout, file_manager=fm, instance_id=spec.instance_id,
                         query_run_id=spec.query_run_id, store=spec.identity(), commit_ids=ids)
    return new_target(plan.backend, ctx, layout, f"{store.label} new partition {part}")


def _build_stores(plan: Plan, store: StorePlan, parts: list[int], sources: list[int], root: str,
                  staging_io: FileIO) -> dict[int, tuple]:
    targets: dict[int, Target] = {}
    try:
        for p in parts:
            targets[p] = _new_target(plan, store, p, root, staging_io)
        for old in sources:
            _copy_from(plan, store, old, root, targets)
        out = {}
        for p, target in targets.items():
            outcome = target.commit(plan.target_version)
            if outcome.manifest.num_keys != target.rows:
                raise RescaleError(f"{store.label} new partition {p}: wrote {target.rows} entries but version "
                                   f"{plan.target_version} holds {outcome.manifest.num_keys}")
            out[p] = (target.rows, target.data_bytes, outcome)
        return out
    finally:
        for target in targets.values():
            target.close()


def _copy_from(plan: Plan, store: StorePlan, old: int, root: str, targets: dict[int, Target]) -> None:
    """Scan old partition `old` once, in key order; deal each entry to the target its key group routes to."""
    spec = StoreSpec.from_json(store_spec_doc(plan, store, old, f"rescale-r{old}-{uuid.uuid4().hex[:12]}"))
    reader = Store(spec, local_root=root)
    n_new, n_old = plan.new_partitions, plan.old_partitions
    try:
        reader.load(plan.source_version, plan.source_checkpoint_id(store, old))
        stamps = reader.stored_stamps()
        for target in targets.values():
            target.take_stamps(old, stamps)
        for chunk in reader.scan(b"", CHUNK_ROWS, CHUNK_BYTES, as_stored=True):  # idle-state stamps kept
            if store.single_partition:
                targets[0].add(old, chunk, data_bytes(chunk))
                continue
            parts, sizes = route_chunk(chunk, n_new, n_old, old, store.label)
            for p, target in targets.items():
                picked = np.flatnonzero(parts == p)
                if len(picked):
                    target.add(old, pick(chunk, picked), int(sizes[picked].sum()))
        for target in targets.values():
            target.end_source(old)
    finally:
        reader.close()
