"""`sparkstate inspect`: what a query's checkpoint holds, without Spark and without changing anything."""
from __future__ import annotations

import argparse

from ..units import human_bytes
from .common import add_checkpoint_arguments, add_json_argument, no_state_message, open_checkpoint
from .console import EXIT_OK, EXIT_PROBLEM, Output

HELP = "show the state a checkpoint holds: operators, stores, versions, sizes, balance over partitions"
DESCRIPTION = """\
Show, without Spark and without changing anything: the provider and backend, every operator and store
with its schema, the committed versions retained, per partition the keys, live bytes, bytes in the
checkpoint and bytes shared with older versions, and how keys spread over the partitions (now, and with
--partitions N after a rescale to N). --html FILE also writes the report as a page with charts. For
checkpoints of Spark's own providers: versions, files and bytes."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_arguments(p)
    p.add_argument("--batch", type=int, metavar="N", help="show the state after batch N (default: the newest "
                                                          "committed)")
    p.add_argument("--partitions", type=int, metavar="N", help="predict keys per partition after a rescale to N")
    p.add_argument("--html", metavar="FILE", help="also write the report as a self-contained HTML page")
    p.add_argument("--files-only", action="store_true",
                   help="read manifests only, not the state itself (no live bytes or key-group balance)")
    add_json_argument(p)


def run(args: argparse.Namespace, out: Output) -> int:
    from ..errors import SparkstateError
    from ..inspection import inspect_checkpoint, report_document

    if args.partitions is not None and args.partitions < 1:
        out.error("inspect", f"--partitions must be a positive integer, got {args.partitions}")
        return EXIT_PROBLEM
    try:
        access = open_checkpoint(args)
        with out.progress("reading stores", None) as bar:
            report = inspect_checkpoint(
                args.checkpoint, access.fileio, access.state_fileio, access.state_root, batch=args.batch,
                partitions=args.partitions, read_contents=not args.files_only,
                settings_conf=_settings_conf(args.conf), s3a=access.s3a, state_location=access.state_location,
                progress=lambda done, total: bar.update(done, total))
    except SparkstateError as e:
        out.error("inspect", str(e))
        return EXIT_PROBLEM
    if not report.stores:
        out.error("inspect", no_state_message(access))
        return EXIT_PROBLEM
    _print(report, out)
    out.document(report_document(report))
    if args.html:
        from ..inspection.html_page import render_html
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(report))
        out.note(f"wrote {args.html}")
    return EXIT_OK


def _settings_conf(items: list[str]) -> dict[str, str]:
    from ..config import PREFIX
    conf = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key.startswith(("fs.s3a.", "spark.hadoop.")):
            conf[key if key.startswith(PREFIX) else PREFIX + key] = value
    return conf


def _print(report, out: Output) -> None:
    from ..checkpoint.file_manager import version_ranges

    out.line(f"checkpoint {report.checkpoint}")
    out.line(f"provider   {report.provider or 'not recorded in the offset log'}"
             + (f", backend {', '.join(report.backends)}" if report.ours else ""))
    out.line(f"batches    newest committed {report.last_batch if report.last_batch is not None else '-'}, "
             f"{report.num_partitions or '?'} partitions; showing version {report.version if report.version is not None else '-'}"
             f"; retained versions {version_ranges(report.retained_versions()) or '-'}")
    for note in report.notes:
        out.line(note)
    if report.schemas:
        out.table("operators and stores", ["op", "operator", "store", "key", "value"],
                  [(s.operator_id, s.operator_name, s.store_name, s.columns("key"), s.columns("value"))
                   for s in report.schemas])
    rows = []
    for s in report.stores:
        f = s.figures_of(s.version)
        rows.append((s.rel, s.backend, s.version, s.keys, human_bytes(s.live_bytes) if s.live_bytes is not None else None,
                     human_bytes(f.checkpoint_bytes) if f else None, human_bytes(f.shared_bytes) if f else None,
                     version_ranges([v.version for v in s.versions]) or None))
    out.table("stores", ["store", "backend", "version", "keys", "live", "in checkpoint", "shared with older",
                         "retained"], rows, right=("version", "keys", "live", "in checkpoint", "shared with older"))
    for s in report.stores:
        if s.problem:
            out.line(f"{s.rel}: {s.problem}", style="red")
    for b in report.balance:
        out.line(f"operator {b.operator_id}: keys per partition now (of {b.partitions}): max {b.max}, mean "
                 f"{b.mean:.1f}, max/mean {b.skew:.2f}")
    for note in report.key_group_notes():
        out.line(note)
    for b in report.predicted:
        out.line(f"operator {b.operator_id}: after a rescale to {b.partitions} partitions: max {b.max}, mean "
                 f"{b.mean:.1f}, max/mean {b.skew:.2f} keys per partition")
    from ..inspection.inspect import AGE_LABELS
    for op, counts in sorted(report.key_ages.items()):
        bins = ", ".join(f"{label} {n:,}" for label, n in zip(AGE_LABELS, counts) if n)
        out.line(f"operator {op}: keys by time since their last write (idle-state stamps): {bins or 'none'}")
