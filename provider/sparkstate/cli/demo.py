"""`sparkstate demo`: the demo pipeline (python/demo.py) on local Spark with our provider."""
from __future__ import annotations

import argparse

from .console import Output

HELP = "run the demo pipeline on local Spark with sparkstate (`sparkstate demo --help` for its options)"
DESCRIPTION = HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("demo_args", nargs=argparse.REMAINDER)


def run_demo(argv: list[str]) -> int:
    import sys

    from sparkstate_jobs.demo import main as demo_main
    try:
        return int(demo_main(argv) or 0)
    except SystemExit as e:  # argparse's --help and usage errors, the demo's refusals
        if isinstance(e.code, str):
            print(f"sparkstate demo: {e.code}", file=sys.stderr)
            return 1
        return int(e.code or 0)


def run(args: argparse.Namespace, out: Output) -> int:
    return run_demo(args.demo_args)
