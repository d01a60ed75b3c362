"""Arguments and checks the commands that read a checkpoint share."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ..errors import SparkstateError


def add_checkpoint_arguments(p: argparse.ArgumentParser, state_location: bool = True) -> None:
    p.add_argument("--checkpoint", required=True, metavar="PATH",
                   help="the query's checkpointLocation (a local path, file: URI or s3://bucket/prefix)")
    if state_location:
        p.add_argument("--state-location", metavar="URI", help="the query's sparkstate stateLocation, if it was set")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="sparkstate settings (s3.endpoint=...) and spark.hadoop.fs.s3a.* / fs.s3a.* keys")


def add_json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as one JSON document (for scripts)")


@dataclass
class CheckpointAccess:
    """How to read a query's checkpoint: its path, the state root, settings and the FileIOs of both."""

    checkpoint: str
    state_location: str | None
    state_root: str
    settings: Any
    s3a: dict[str, str]
    fileio: Any        # reads Spark's logs
    state_fileio: Any  # reads the stores

    def open(self, path: str) -> Any:
        from ..checkpoint.location import open_fileio
        return open_fileio(path, self.settings, self.s3a)


def parse_conf(items: list[str]) -> tuple[Any, dict[str, str]]:
    """(settings, fs.s3a.* options) from --conf KEY=VALUE arguments."""
    from ..config import PREFIX, Settings

    settings_raw, s3a = {}, {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SparkstateError(f"--conf expects KEY=VALUE, got {item.split('=')[0]!r}")
        key = key.removeprefix("spark.hadoop.")
        if key.startswith("fs.s3a."):
            s3a[key] = value
        else:
            settings_raw[key if key.startswith(PREFIX) else PREFIX + key] = value
    return Settings.parse(settings_raw), s3a


def open_checkpoint(args: argparse.Namespace) -> CheckpointAccess:
    """Open the checkpoint the arguments name (reads nothing yet)."""
    from ..checkpoint.location import open_fileio, state_root

    settings, s3a = parse_conf(args.conf)
    location = getattr(args, "state_location", None) or settings.state_location
    fileio = open_fileio(args.checkpoint, settings, s3a)
    root = state_root(args.checkpoint, location)
    return CheckpointAccess(args.checkpoint, location, root, settings, s3a, fileio,
                            open_fileio(root, settings, s3a))


def require_checkpoint(fileio: Any, checkpoint: str) -> None:
    """Refuse a path that holds no Spark checkpoint (no `offsets/` log), saying what was looked for: the
    check a command that needs Spark's logs makes before anything else (before starting Spark)."""
    from ..checkpoint.spark_logs import SparkLogs

    try:
        batches = SparkLogs(fileio, checkpoint).offset_batches()
    except OSError as e:
        raise SparkstateError(f"cannot read {checkpoint}: {e}") from e
    if not batches:
        what = "holds no Spark offset log (offsets/)" if _exists(fileio, checkpoint) else "does not exist"
        raise SparkstateError(f"{checkpoint} {what}: --checkpoint must be the checkpointLocation of a query "
                              "that has run at least one batch")


def no_state_message(access: CheckpointAccess) -> str:
    where = ("it does not exist" if not _exists(access.fileio, access.checkpoint)
             else f"nothing under {access.state_root}")
    return (f"no sparkstate state for {access.checkpoint} ({where}): is --checkpoint the query's "
            "checkpointLocation, and was a stateLocation set (--state-location)?")


def _exists(fileio: Any, path: str) -> bool:
    try:
        return bool(fileio.exists(path) or fileio.list(path))
    except OSError:
        return False
