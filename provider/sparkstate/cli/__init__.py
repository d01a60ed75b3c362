"""The `sparkstate` command: one entry point, one module per sub-command, one face (`console.Output`).

Every sub-command module offers `HELP` (one line), `add_arguments(parser)` and `run(args, out) -> int`;
heavy imports (pyspark, pyarrow) wait inside `run`, so `--help` answers at once.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .console import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, Output

# name -> module below this package, in the order `--help` lists them
COMMANDS = {
    "demo": "demo", "jar": "jar", "conf-docs": "conf_docs",
    "inspect": "inspect", "verify": "verify", "gc": "gc", "rescale": "rescale", "migrate": "migrate",
}

EPILOG = f"""\
exit codes: {EXIT_OK} done (verify: every store loads what the query needs), {EXIT_PROBLEM} refused, failed or damage
found (the message says what to do), {EXIT_USAGE} wrong arguments, {EXIT_INTERRUPTED} interrupted.
`sparkstate <command> --help` describes each command. Commands that read a checkpoint take --conf for
sparkstate settings (s3.endpoint=...) and spark.hadoop.fs.s3a.* keys; otherwise boto3's credential chain.
"""


def _version() -> str:
    from .. import __version__
    return f"sparkstate {__version__}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparkstate", description="Tools for Spark Structured Streaming state kept by sparkstate.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"{__name__}.{module_name}")
        p = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION,
                           prog=f"sparkstate {name}", formatter_class=argparse.RawDescriptionHelpFormatter,
                           add_help=name != "demo")
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "demo":  # the demo parses its own arguments (`sparkstate demo --help`)
            from .demo import run_demo
            return run_demo(argv[1:])
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            return int(e.code or 0) if isinstance(e.code, int) else EXIT_USAGE
        out = Output(json_mode=getattr(args, "json", False))
        return int(args._run(args, out) or 0)
    except KeyboardInterrupt:
        print("\nsparkstate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (`sparkstate conf-docs | head`): stop quietly, and keep Python's exit-time flush
        # of stdout from failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "EXIT_INTERRUPTED"]
