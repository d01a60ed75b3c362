"""Faults injected into sparkstate worker processes, for the fault-matrix tests (never shipped).

A test describes its faults as JSON in `SPARKSTATE_FAULTS` and points the query's `pythonExec` at a
wrapper script (`python-with-faults`, written by `fault_python`) that installs this
module and then runs `sparkstate.worker` as usual. Each rule patches one method, found by
`"module:Class.method"`, as soon as its module is imported (an import hook, so it also works when the
module is imported long after start-up):

    {"target": "sparkstate.engine.store:Store.get",   # what to patch
     "when": "version >= 2 and partition == 1",       # Python expression over self, args, version,
                                                      #   partition (optional; default: always)
     "stage": "before" | "after",                     # around the original call (default before)
     "action": "sigstop" | "sleep" | "sigkill" | "kill_group" | "abort" | "raise" | "note",
     "seconds": 3.0,                                  # for sleep
     "times": 1,                                      # fire at most this often over all processes
     "marker": "/dir/prefix"}                         # marker files that count firings (with times)

`sigkill` SIGKILLs this worker alone, as the kernel's out-of-memory killer does. `kill_group` SIGKILLs this
process's process group: the whole local-mode driver (python, its JVM and
every worker) dies at once, as in a crash. Each firing appends a line to `<marker>.log` (pid, target,
version) so a test can see what happened; `note` only does that.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from typing import Any, Callable

_rules: list[dict[str, Any]] = []
_patched: set[str] = set()


def _claim(rule: dict[str, Any]) -> bool:
    """Whether this firing is allowed (at most `times` over every process, counted with marker files)."""
    times = rule.get("times")
    if times is None:
        return True
    prefix = rule["marker"]
    for i in range(int(times)):
        try:
            fd = os.open(f"{prefix}.{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    return False


def _version_of(self: Any, args: tuple) -> Any:
    if args and isinstance(args[0], int):
        return args[0]
    if args and hasattr(args[0], "version"):
        return args[0].version
    return getattr(self, "_version", None)


def _partition_of(self: Any) -> Any:
    spec = getattr(self, "spec", None)
    return getattr(spec, "partition_id", None)


def _fire(rule: dict[str, Any], self: Any, args: tuple) -> None:
    env = {"self": self, "args": args, "version": _version_of(self, args), "partition": _partition_of(self)}
    when = rule.get("when")
    try:
        if when and not eval(when, {}, env):  # noqa: S307 - test-only, expression written by the test
            return
    except Exception:
        return
    if not _claim(rule):
        return
    if rule.get("marker"):
        with open(rule["marker"] + ".log", "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "target": rule["target"], "action": rule["action"],
                                  "version": env["version"], "partition": env["partition"],
                                  "time": time.time()}) + "\n")
    action = rule["action"]
    if action == "note":
        return
    if action == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "sleep":
        time.sleep(float(rule.get("seconds", 1.0)))
    elif action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "kill_group":
        os.killpg(os.getpgid(0), signal.SIGKILL)
    elif action == "abort":
        os.abort()
    elif action == "raise":
        raise RuntimeError(f"injected failure at {rule['target']}")
    else:
        raise ValueError(f"unknown fault action {action!r}")


def _wrap(original: Callable[..., Any], rules: list[dict[str, Any]]) -> Callable[..., Any]:
    before = [r for r in rules if r.get("stage", "before") == "before"]
    after = [r for r in rules if r.get("stage") == "after"]

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        for rule in before:
            _fire(rule, self, args)
        result = original(self, *args, **kwargs)
        for rule in after:
            _fire(rule, self, args)
        return result

    return wrapper


def _patch_module(module: Any) -> None:
    name = module.__name__
    by_method: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rule in _rules:
        mod, attr = rule["target"].split(":")
        if mod == name:
            cls, method = attr.split(".")
            by_method.setdefault((cls, method), []).append(rule)
    for (cls_name, method), rules in by_method.items():
        key = f"{name}:{cls_name}.{method}"
        if key in _patched:
            continue
        cls = getattr(module, cls_name)
        setattr(cls, method, _wrap(getattr(cls, method), rules))
        _patched.add(key)


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the targets' modules with the normal machinery, then patches them once executed."""

    def __init__(self, modules: set[str]) -> None:
        self._modules = modules

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001
        if fullname not in self._modules:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        inner = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, s):  # noqa: ANN001
                return inner.create_module(s)

            def exec_module(self, module):  # noqa: ANN001
                inner.exec_module(module)
                _patch_module(module)

        spec.loader = _Loader()
        return spec


def install(spec_json: str | None = None) -> None:
    """Install the rules of `spec_json` (default: env SPARKSTATE_FAULTS); no-op without rules."""
    raw = spec_json if spec_json is not None else os.environ.get("SPARKSTATE_FAULTS")
    if not raw:
        return
    _rules.extend(json.loads(raw))
    modules = {r["target"].split(":")[0] for r in _rules}
    for name in modules:
        if name in sys.modules:
            _patch_module(sys.modules[name])
    sys.meta_path.insert(0, _PatchOnImport({m for m in modules if m not in sys.modules}))


def fault_python(directory: str, rules: list[dict[str, Any]], python: str | None = None) -> str:
    """A `pythonExec` for a query: a script in `directory` that runs the worker with `rules` installed."""
    path = os.path.join(directory, "python-with-faults")
    here = os.path.dirname(os.path.abspath(__file__))
    bootstrap = ("import sys; sys.path.insert(0, %r); import fault_plugin; fault_plugin.install(); "
                 "import runpy; runpy.run_module(sys.argv[2], run_name='__main__', alter_sys=True)") % here
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
        f.write(f"export SPARKSTATE_FAULTS={_sh_quote(json.dumps(rules))}\n")
        # The shim runs `<pythonExec> -m sparkstate.worker`: keep its arguments, run the module after install.
        f.write(f'exec {_sh_quote(python or sys.executable)} -c {_sh_quote(bootstrap)} "$@"\n')
    os.chmod(path, 0o755)
    return path


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def fired(marker: str) -> list[dict[str, Any]]:
    """What the rule with `marker` did, in order (one dict per firing)."""
    try:
        with open(marker + ".log") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
