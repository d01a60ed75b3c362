"""The face every `sparkstate` command shows: tables and progress bars (rich), or one JSON document.

Results go to stdout, progress and errors to stderr, so `--json` output pipes cleanly into a script and a
progress bar never mixes with a table. A terminal gets colour and live bars; a file or a pipe gets plain
text, wide enough that paths are not cut, and progress only as its final state.
"""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from typing import Any, Iterator, Sequence, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Exit codes of every command (documented in the README and `sparkstate --help`).
EXIT_OK = 0          # done; for verify: every store loads the version the query needs
EXIT_PROBLEM = 1     # refused, failed, or found damage; the message says what to do
EXIT_USAGE = 2       # wrong arguments
EXIT_INTERRUPTED = 130

_PLAIN_WIDTH = 200  # columns of a table written to a file or a pipe


def _console(stream: TextIO) -> Console:
    tty = stream.isatty()
    return Console(file=stream, width=None if tty else _PLAIN_WIDTH, no_color=not tty, highlight=False,
                   soft_wrap=True)


class Output:
    """Where a command's results, notes and progress go; `json=True` keeps stdout for one JSON document."""

    def __init__(self, json_mode: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None):
        self.json_mode = json_mode
        self.out = _console(stdout or sys.stdout)
        self.err = _console(stderr or sys.stderr)

    def line(self, text: str = "", style: str | None = None) -> None:
        """A line of the human-readable result (dropped in JSON mode: the document holds the facts)."""
        if not self.json_mode:
            self.out.print(text, style=style, markup=False)

    def note(self, text: str) -> None:
        """Something the user should read that is not the result itself (stderr, kept in JSON mode)."""
        self.err.print(text, markup=False)

    def error(self, command: str, text: str) -> None:
        self.err.print(f"sparkstate {command}: {text}", style="bold red", markup=False)

    def table(self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]],
              right: Sequence[str] = ()) -> None:
        """A table; `right` names the columns of figures (right-aligned)."""
        if self.json_mode:
            return
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False, box=None,
                      header_style="bold")
        for name in columns:
            table.add_column(name, justify="right" if name in right else "left", overflow="fold")
        for row in rows:
            table.add_row(*("-" if v is None else str(v) for v in row))
        self.out.print(table)

    def document(self, doc: Any) -> None:
        """The JSON result (JSON mode only)."""
        if self.json_mode:
            self.out.file.write(json.dumps(to_jsonable(doc), indent=2, sort_keys=True) + "\n")
            self.out.file.flush()

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator["ProgressBar"]:
        """A progress bar on stderr (a terminal only: elsewhere the command's result says it all)."""
        if not self.err.is_terminal:
            yield ProgressBar(None, None)
            return
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=self.err)
        with bar:
            yield ProgressBar(bar, bar.add_task(description, total=total, detail=""))


class ProgressBar:
    def __init__(self, bar: Progress | None, task: Any) -> None:
        self._bar, self._task = bar, task

    def update(self, completed: int, total: int | None = None, detail: str = "") -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, total=total, detail=detail)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, tuples and sets as plain JSON values."""
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value
