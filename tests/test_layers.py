"""The package's layers call one way only, and no modules import each other in a circle.

    worker -> engine -> checkpoint -> storage          (a layer may use the ones below it, never above)
    config, errors, liveness, keygroups, units,        (ground: any layer may use them; they use no layer)
    spark_lines
    rescaling, migration, inspection, cli               (tools beside the layers: they use the layers,
                                                         no layer uses them)
    rewrite                                             (what the tools share, beside the layers too: it uses
                                                         the layers, the tools use it, it uses no tool)

A tool imports no private (`_`) name of another package, and nothing outside the engine reaches into a
backend (`engine.heap`, `engine.rocksdb`): the engine's own modules say what it offers the tools.

Read from the source with `ast` (every import statement, at module level or inside a function), so it
holds for lazy imports too. Dynamic imports by name (`importlib`) are not seen.
"""
from __future__ import annotations

import ast
import os

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "provider", "sparkstate")
LAYERS = {"storage": 1, "checkpoint": 2, "engine": 3, "worker": 4}
GROUND = {"config", "errors", "liveness", "keygroups", "units", "spark_lines"}
TOOLS = {"rescaling", "migration", "inspection", "cli"}
SHARED_BY_TOOLS = {"rewrite"}
BACKENDS = ("engine.heap", "engine.rocksdb")


def _modules() -> dict[str, str]:
    """Dotted module name (relative to the package) -> file path."""
    out = {}
    for root, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


def _import_target(module: str, path: str, node: ast.ImportFrom) -> str | None:
    """The package module a `from ... import` in `module` (at `path`) imports from ("" for the package
    itself), or None when it is not this package's."""
    if node.level:
        base = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
        parts = base[: len(base) - (node.level - 1)] if node.level > 1 else list(base)
        return ".".join(parts + ([node.module] if node.module else []))
    if node.module and (node.module == "sparkstate" or node.module.startswith("sparkstate.")):
        return node.module[len("sparkstate."):] if node.module != "sparkstate" else ""
    return None


def _imports(module: str, path: str, known: set[str]) -> set[str]:
    """The package modules `module` imports (relative and absolute `sparkstate.` imports)."""
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.ImportFrom):
            target = _import_target(module, path, node)
            if target is None:
                continue
            for alias in node.names:  # `from . import files` names a module; `from .x import y` a name
                candidate = f"{target}.{alias.name}" if target else alias.name
                found.add(candidate if candidate in known else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sparkstate."):
                    found.add(alias.name[len("sparkstate."):])
    return {m for m in found if m in known and m != module}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: _imports(m, p, known) for m, p in modules.items()}


def _top(module: str) -> str:
    return module.split(".")[0]


def test_no_layer_imports_upwards_or_into_the_tools():
    wrong = []
    for module, deps in _graph().items():
        top = _top(module)
        for dep in deps:
            target = _top(dep)
            if dep == "" or target == top:
                continue
            if top in GROUND and target not in GROUND:
                wrong.append(f"{module} -> {dep} (ground modules use no layer)")
            elif top in LAYERS and target in TOOLS | SHARED_BY_TOOLS:
                wrong.append(f"{module} -> {dep} (a layer uses no tool, nor what the tools share)")
            elif top in SHARED_BY_TOOLS and target in TOOLS:
                wrong.append(f"{module} -> {dep} (what the tools share uses no tool)")
            elif top in LAYERS and target in LAYERS and LAYERS[target] > LAYERS[top]:
                wrong.append(f"{module} -> {dep} (upwards)")
    assert not wrong, "imports against the layering:\n" + "\n".join(sorted(wrong))


def test_only_the_engine_reaches_into_a_backend():
    wrong = [f"{module} -> {dep}" for module, deps in _graph().items() if _top(module) != "engine"
             for dep in deps if dep.startswith(BACKENDS)]
    assert not wrong, "imports of a backend's modules from outside the engine:\n" + "\n".join(sorted(wrong))


def test_no_package_imports_another_ones_private_names():
    """`from ..rescaling.runner import _refuse_if_running_here` in migration would couple two tools through a
    name that promises nothing; what packages share is public (for the tools: in `rewrite`)."""
    modules = _modules()
    known = set(modules)
    wrong = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _import_target(module, path, node)
            if target is None or target not in known and target != "" or _top(target) == _top(module):
                continue
            wrong += [f"{module} imports {alias.name} from {target}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not wrong, "private names imported across packages:\n" + "\n".join(sorted(wrong))


def test_no_import_cycle():
    graph = _graph()
    cycles = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if dep == "":
                continue
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_walk_sees_the_imports_it_checks():
    """The test can fail: it finds the engine's known downward imports (a broken parser would see none)."""
    graph = _graph()
    assert "checkpoint.location" in graph["engine.store"]
    assert "engine.arrow_files" in graph["engine.heap.snapshot"]
    assert "storage.fileio" in graph["checkpoint.location"]
    assert "rewrite.batch" in graph["rescaling.runner"] and "rewrite.batch" in graph["migration.runner"]
