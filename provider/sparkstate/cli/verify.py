"""`sparkstate verify`: check every retained version of every store, and roll back a damaged checkpoint."""
from __future__ import annotations

import argparse

from .common import add_checkpoint_arguments, add_json_argument, no_state_message, open_checkpoint
from .console import EXIT_OK, EXIT_PROBLEM, Output

HELP = "check every retained version of every store; print (or do) the roll-back of a damaged checkpoint"
DESCRIPTION = """\
Check every retained version of every store (manifests, identity, files, sizes and checksums, heap
chains) without Spark and without changing anything. Exits 1 when the newest committed version of a store
cannot be loaded, and prints the roll-back that fixes it: which Spark log entries and manifests to remove.
--rollback-to N removes them after asking (the query must be stopped); give --file-sink PATH for each
file sink the query writes."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_arguments(p)
    p.add_argument("--rollback-to", type=int, metavar="N",
                   help="remove the Spark log entries and manifests above version N (the query must be stopped)")
    p.add_argument("--file-sink", action="append", default=[], metavar="PATH",
                   help="with --rollback-to: the output path of a file sink the query writes (repeatable)")
    p.add_argument("--yes", action="store_true", help="with --rollback-to: do not ask")
    add_json_argument(p)


def run(args: argparse.Namespace, out: Output) -> int:
    from ..errors import SparkstateError
    from ..inspection import apply_rollback, format_report, rollback_plan, verify_checkpoint

    try:
        access = open_checkpoint(args)
        report = verify_checkpoint(args.checkpoint, access.fileio, access.state_fileio, access.state_location)
        if not report.stores:
            out.error("verify", no_state_message(access))
            return EXIT_PROBLEM
        command = f"sparkstate verify --checkpoint {args.checkpoint}" + (
            f" --state-location {access.state_location}" if access.state_location else "")
        out.line(format_report(report, command))
        target = report.rollback_target()
        out.document({
            "ok": report.ok, "lastBatch": report.last_batch, "partitions": report.num_partitions,
            "notes": report.notes, "rollbackTarget": None if report.ok else target,
            "rollbackPlan": rollback_plan(report, target) if target is not None and not report.ok else [],
            "stores": [{"store": s.rel, "backend": s.backend, "healthy": s.healthy, "needed": s.needed,
                        "abandoned": s.abandoned, "loadable": s.loadable_versions(), "beyond": s.beyond,
                        "problems": {c.version: c.problems for c in s.versions if c.problems}}
                       for s in report.stores]})
        if args.rollback_to is None:
            return EXIT_OK if report.ok else EXIT_PROBLEM
        target = args.rollback_to
        if target not in report.rollback_targets():
            out.error("verify", f"cannot roll back to version {target}: versions every store can load, with "
                                f"Spark's offset log entry: {sorted(report.rollback_targets()) or 'none'}")
            return EXIT_PROBLEM
        sinks = [(access.open(path), path) for path in args.file_sink]
        plan = rollback_plan(report, target, sinks)
        out.line(f"roll-back to version {target} removes {len(plan)} files:")
        out.line("\n".join(f"  {path}" for path in plan))
        if not args.yes and input("Is the query stopped, and remove them? [yes/no] ").strip().lower() != "yes":
            out.line("nothing removed")
            return EXIT_PROBLEM
        apply_rollback(report, target, access.fileio, access.state_fileio, sinks)
        out.line(f"rolled back: restart the query; it runs batch {target} again from version {target}")
        return EXIT_OK
    except SparkstateError as e:
        out.error("verify", str(e))
        return EXIT_PROBLEM
