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
                             once no retained batch needs them; safe while the query runs. --conf takes sparkstate settings (s3.endpoint=...)
                             and spark.hadoop.fs.s3a.* / fs.s3a.* keys; otherwise boto3's credential chain.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="sparkstate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["demo", "jar", "conf-docs", "gc", "rescale"])
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


def _gc(argv: list[str]) -> int:
    from .checkpoint.gc import DEFAULT_GRACE_S, collect_garbage, format_report
    from .checkpoint.location import open_fileio, state_root
    from .checkpoint.spark_logs import SparkLogs
    from .config import PREFIX, Settings
    from .errors import SparkstateError

    p = argparse.ArgumentParser(prog="sparkstate gc", description="Delete orphaned sparkstate checkpoint files.")
    p.add_argument("--checkpoint", required=True, help="the query's checkpointLocation")
    p.add_argument("--state-location", help="the query's sparkstate stateLocation, if it was set")
    p.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    p.add_argument("--grace-seconds", type=float, default=DEFAULT_GRACE_S,
                   help=f"keep unreferenced files younger than this (default {DEFAULT_GRACE_S:.0f})")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
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
    try:
        settings = Settings.parse(settings_raw)
        root = state_root(args.checkpoint, args.state_location or settings.state_location)
        io = open_fileio(root, settings, s3a)
        logs = SparkLogs(open_fileio(args.checkpoint, settings, s3a), args.checkpoint)
        report = collect_garbage(root, io, dry_run=args.dry_run, grace_s=args.grace_seconds, spark_logs=logs)
    except SparkstateError as e:
        print(f"sparkstate gc: {e}", file=sys.stderr)
        return 1
    print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
