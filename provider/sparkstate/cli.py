"""The `sparkstate` command.

  sparkstate demo [args]     run the demo pipeline (python/demo.py) on local Spark with our provider
  sparkstate jar             print the path of the shim jar (for --jars / spark.jars)
  sparkstate conf-docs       print the settings table (the README's table is generated from it);
                             with --spark-defaults, conf/spark-defaults.conf for this install (jar
                             and interpreter filled in)
  sparkstate rescale --checkpoint PATH --partitions N [--master M] [--conf K=V ...]
                             change the number of state partitions of a stopped query (key groups)
  sparkstate gc --checkpoint PATH [--state-location URI] [--dry-run] [--grace-seconds S] [--conf K=V ...]
                             delete checkpoint files no manifest references (left by crashed commits),
                             stray manifests beyond the commit log, and partitions a rescale left behind
                             once no retained batch needs them; safe while the query runs.
  sparkstate verify --checkpoint PATH [--state-location URI] [--conf K=V ...] [--rollback-to N [--yes]]
                             check every retained version of every store (manifests, files, checksums,
                             heap chains) without changing anything; exit 1 when the newest committed
                             version of a store cannot be loaded, and print the roll-back that fixes it.
                             --rollback-to N removes what that roll-back lists, after asking
                             (--file-sink PATH for each file sink the query writes).
  gc and verify: --conf takes sparkstate settings (s3.endpoint=...) and spark.hadoop.fs.s3a.* / fs.s3a.*
                             keys; otherwise boto3's credential chain.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="sparkstate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["demo", "jar", "conf-docs", "gc", "rescale", "verify"])
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    args, rest = parser.parse_known_args(argv[:1])
    rest = argv[1:]
    if args.command == "demo":
        from sparkstate_jobs.demo import main as demo_main
        return int(demo_main(rest) or 0)
    if args.command == "rescale":
        from .rescaling.cli import main as rescale_main
        return rescale_main(rest)
    if args.command == "jar":
        from . import jar_path
        print(jar_path())
        return 0
    if args.command == "gc":
        return _gc(rest)
    if args.command == "verify":
        return _verify(rest)
    if args.command == "conf-docs":
        from .config import settings_table_markdown, spark_defaults_file
        if rest == ["--spark-defaults"]:
            from . import jar_path
            sys.stdout.write(spark_defaults_file(jar_path(), sys.executable))
        elif not rest:
            print(settings_table_markdown())
        else:
            print(f"sparkstate conf-docs: unknown arguments {rest} (only --spark-defaults)", file=sys.stderr)
            return 2
        return 0
    return 2


def _storage_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--checkpoint", required=True, help="the query's checkpointLocation")
    p.add_argument("--state-location", help="the query's sparkstate stateLocation, if it was set")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="sparkstate settings (s3.endpoint=...) and spark.hadoop.fs.s3a.* / fs.s3a.* keys")
    return p


def _storage_conf(p: argparse.ArgumentParser, args: argparse.Namespace):
    """(settings, fs.s3a.* options) from the --conf arguments."""
    from .config import PREFIX, Settings

    settings_raw, s3a = {}, {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--conf expects KEY=VALUE, got {item.split('=')[0]!r}")
        key = key.removeprefix("spark.hadoop.")
        if key.startswith("fs.s3a."):
            s3a[key] = value
        else:
            settings_raw[key if key.startswith(PREFIX) else PREFIX + key] = value
    return Settings.parse(settings_raw), s3a


def _gc(argv: list[str]) -> int:
    from .checkpoint.gc import DEFAULT_GRACE_S, collect_garbage, format_report
    from .checkpoint.location import open_fileio, state_root
    from .checkpoint.spark_logs import SparkLogs
    from .errors import SparkstateError

    p = _storage_parser("sparkstate gc", "Delete what retention cannot see in a sparkstate checkpoint.")
    p.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    p.add_argument("--grace-seconds", type=float, default=DEFAULT_GRACE_S,
                   help=f"keep unreferenced files younger than this (default {DEFAULT_GRACE_S:.0f})")
    args = p.parse_args(argv)
    try:
        settings, s3a = _storage_conf(p, args)
        root = state_root(args.checkpoint, args.state_location or settings.state_location)
        io = open_fileio(root, settings, s3a)
        logs = SparkLogs(open_fileio(args.checkpoint, settings, s3a), args.checkpoint)
        report = collect_garbage(root, io, dry_run=args.dry_run, grace_s=args.grace_seconds, spark_logs=logs)
    except SparkstateError as e:
        print(f"sparkstate gc: {e}", file=sys.stderr)
        return 1
    print(format_report(report))
    return 0


def _verify(argv: list[str]) -> int:
    from .checkpoint.location import open_fileio, state_root
    from .errors import SparkstateError
    from .inspection import apply_rollback, format_report, rollback_plan, verify_checkpoint

    p = _storage_parser("sparkstate verify", "Check every retained version of a query's sparkstate state.")
    p.add_argument("--rollback-to", type=int, metavar="N",
                   help="remove the Spark log entries and manifests above version N (the query must be stopped)")
    p.add_argument("--file-sink", action="append", default=[], metavar="PATH",
                   help="with --rollback-to: the output path of a file sink the query writes (repeatable)")
    p.add_argument("--yes", action="store_true", help="with --rollback-to: do not ask")
    args = p.parse_args(argv)
    try:
        settings, s3a = _storage_conf(p, args)
        state_location = args.state_location or settings.state_location
        fileio = open_fileio(args.checkpoint, settings, s3a)
        state_fileio = open_fileio(state_root(args.checkpoint, state_location), settings, s3a)
        report = verify_checkpoint(args.checkpoint, fileio, state_fileio, state_location)
        if not report.stores:
            print(f"sparkstate verify: no sparkstate state under {report.root}: is --checkpoint the query's "
                  "checkpointLocation, and was a stateLocation set (--state-location)?", file=sys.stderr)
            return 1
        command = f"sparkstate verify --checkpoint {args.checkpoint}" + (
            f" --state-location {state_location}" if state_location else "")
        print(format_report(report, command))
        if args.rollback_to is None:
            return 0 if report.ok else 1
        target = args.rollback_to
        if target not in report.rollback_targets():
            print(f"sparkstate verify: cannot roll back to version {target}: versions every store can load, "
                  f"with Spark's offset log entry: {sorted(report.rollback_targets()) or 'none'}", file=sys.stderr)
            return 1
        sinks = [(open_fileio(path, settings, s3a), path) for path in args.file_sink]
        plan = rollback_plan(report, target, sinks)
        print(f"roll-back to version {target} removes {len(plan)} files:")
        print("\n".join(f"  {path}" for path in plan))
        if not args.yes and input("Is the query stopped, and remove them? [yes/no] ").strip().lower() != "yes":
            print("nothing removed")
            return 1
        apply_rollback(report, target, fileio, state_fileio, sinks)
        print(f"rolled back: restart the query; it runs batch {target} again from version {target}")
        return 0
    except SparkstateError as e:
        print(f"sparkstate verify: {e}", file=sys.stderr)
        return 1

if __name__ == "__main__":
    sys.exit(main())
