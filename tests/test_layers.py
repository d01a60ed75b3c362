"""The package's layers call one way only, and no modules import each other in a circle.

    worker -> engine -> checkpoint -> storage          (a layer may use the ones below it, never above)
    config, errors, liveness, keygroups, units         (ground: any layer may use them; they use no layer)
    rescaling, migration, inspection, cli               (tools beside the layers: they use the layers,
                                                         no layer uses them)

Read from the source with `ast` (every import statement, at module level or inside a function), so it
holds for lazy imports too. Dynamic imports by name (`importlib`) are not seen.
"""
from __future__ import annotations

import ast
import os

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "provider", "sparkstate")
LAYERS = {"storage": 1, "checkpoint": 2, "engine": 3, "worker": 4}
GROUND = {"config", "errors", "liveness", "keygroups", "units"}
TOOLS = {"rescaling", "migration", "inspection", "cli"}


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


def _imports(module: str, path: str, known: set[str]) -> set[str]:
    """The package modules `module` imports (relative and absolute `sparkstate.` imports)."""
    is_package = path.endswith("__init__.py")
    base = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[: len(base) - (node.level - 1)] if node.level > 1 else list(base)
                target = ".".join(parts + ([node.module] if node.module else []))
            elif node.module and (node.module == "sparkstate" or node.module.startswith("sparkstate.")):
                target = node.module[len("sparkstate."):] if node.module != "sparkstate" else ""
            else:
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
            elif top in LAYERS and target in TOOLS:
                wrong.append(f"{module} -> {dep} (a layer uses no tool)")
            elif top in LAYERS and target in LAYERS and LAYERS[target] > LAYERS[top]:
                wrong.append(f"{module} -> {dep} (upwards)")
    assert not wrong, "imports against the layering:\n" + "\n".join(sorted(wrong))


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
