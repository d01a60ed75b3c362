"""The `sparkstate` command.

  sparkstate demo [args]     run the demo pipeline (python/demo.py) on local Spark with our provider
  sparkstate jar             print the path of the shim jar (for --jars / spark.jars)
  sparkstate conf-docs       print the settings table (the README's table is generated from it)
  sparkstate rescale --checkpoint PATH --partitions N [--master M] [--conf K=V ...]
                             change the number of state partitions of a stopped query (key groups)
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="sparkstate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["demo", "jar", "conf-docs", "rescale"])
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
    if args.command == "conf-docs":
        from .config import settings_table_markdown
        print(settings_table_markdown())
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
