"""`sparkstate gc`: delete what retention cannot see in a sparkstate checkpoint."""
from __future__ import annotations

import argparse

from ..checkpoint.gc import DEFAULT_GRACE_S
from ..units import human_bytes
from .common import add_checkpoint_arguments, add_json_argument, no_state_message, open_checkpoint
from .console import EXIT_OK, EXIT_PROBLEM, Output

HELP = "delete checkpoint files nothing references any more; safe while the query runs"
DESCRIPTION = """\
Delete what retention cannot see: files no manifest references (left by crashed commits) once older
than the grace period, manifests beyond Spark's commit log (strays), and the partitions a rescale left
behind once no retained batch needs them. Never deletes a file a version that can still be committed may
name, so it is safe while the query runs."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    p.add_argument("--grace-seconds", type=float, default=DEFAULT_GRACE_S,
                   help="keep unreferenced files younger than this (default: %(default).0f)")
    add_json_argument(p)


def run(args: argparse.Namespace, out: Output) -> int:
    from ..checkpoint.gc import collect_garbage
    from ..checkpoint.location import discover_stores
    from ..checkpoint.spark_logs import SparkLogs
    from ..errors import SparkstateError

    try:
        access = open_checkpoint(args)
        if not discover_stores(access.state_root, access.state_fileio):
            out.error("gc", no_state_message(access))
            return EXIT_PROBLEM
        report = collect_garbage(access.state_root, access.state_fileio, dry_run=args.dry_run,
                                 grace_s=args.grace_seconds, spark_logs=SparkLogs(access.fileio, args.checkpoint))
    except SparkstateError as e:
        out.error("gc", str(e))
        return EXIT_PROBLEM
    verb = "deleted" if report.deleted else "would delete (dry run)"
    rows = []
    for s in report.stores:
        kept = [f"{s.young_unreferenced} too young" if s.young_unreferenced else "",
                f"{s.adoptable} a next commit may name" if s.adoptable else "", s.skipped or ""]
        removed = ("the whole partition (left by a rescale)" if s.abandoned else
                   f"{len(s.orphans)} orphans" + (f", {len(s.stray_manifests)} stray manifests"
                                                  if s.stray_manifests else ""))
        rows.append((s.store, s.versions, s.files, removed, human_bytes(s.orphan_bytes),
                     "; ".join(k for k in kept if k) or "-"))
    out.table(f"gc: {verb}", ["store", "versions", "files", verb, "bytes", "kept / skipped"], rows,
              right=("versions", "files", "bytes"))
    for note in report.notes:
        out.line(note)
    abandoned = sum(1 for s in report.stores if s.abandoned)
    out.line(f"total: {len(report.stores)} stores, {verb} {report.orphans} orphans "
             f"({report.orphan_bytes} bytes)" + (f" and {abandoned} abandoned partition stores" if abandoned else ""))
    out.document({"deleted": report.deleted, "orphans": report.orphans, "orphanBytes": report.orphan_bytes,
                  "notes": report.notes, "stores": report.stores})
    return EXIT_OK
