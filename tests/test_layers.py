"""dartlib's layers (dartlib/__init__.py): each subpackage imports only from the layers below it and
from the base modules, never from a layer above it or from the entry points."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dartlib.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "dartlib"
BASE = {"paths", "registry", "devices", "profiles", "settings_tree", "environment", "provenance", "extras", "__init__"}
ENTRY = {"cli", "runner", "schema", "__main__"}
LAYERS = ["data", "models", "dart", "tta", "experiments", "analysis", "perf", "reporting", "studies", "book"]


def layer_of(module: str) -> str:
    """``dartlib.experiments.grid`` -> ``experiments``; base modules -> ``base``; ``cli`` -> ``entry``."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    if head in BASE:
        return "base"
    if head in ENTRY:
        return "entry"
    if head in LAYERS:
        return head
    raise AssertionError(f"{module}: not in any layer; place it in one of {', '.join(LAYERS)} or the base")


def rank(layer: str) -> int:
    return -1 if layer == "base" else len(LAYERS) if layer == "entry" else LAYERS.index(layer)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``dartlib...`` module a file imports (module-level and inside functions)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dartlib":
            if node.module == "dartlib":  # from dartlib import x: x is a module or a base name
                found += [(node.lineno, f"dartlib.{a.name}") for a in node.names if a.name != "__version__"]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "dartlib"]
    return found


def upward_imports(package: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(package.rglob("*.py")):
        module = "dartlib." + ".".join(path.relative_to(package).with_suffix("").parts)
        module = module.removesuffix(".__init__") if module != "dartlib.__init__" else "dartlib"
        own = layer_of(module)
        for line, target in imported_modules(path):
            other = layer_of(target)
            if rank(other) > rank(own):
                problems.append(f"{path.relative_to(package.parent)}:{line}: {own} imports {target} ({other}, above it)")
    return problems


def test_every_module_sits_in_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer_of("dartlib." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))


def test_no_layer_imports_from_a_layer_above_it():
    assert upward_imports() == []


def test_a_planted_upward_import_is_found(tmp_path):
    copy = tmp_path / "dartlib"
    for sub in ["data", "reporting"]:
        (copy / sub).mkdir(parents=True)
    (copy / "data" / "sources.py").write_text("from dartlib.reporting.figures import save_figure\n")
    (copy / "reporting" / "figures.py").write_text("from dartlib.data.sources import load\n")
    problems = upward_imports(copy)
    assert len(problems) == 1 and "data imports dartlib.reporting.figures" in problems[0]


def test_the_top_level_holds_only_the_base_and_the_entry_points():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= BASE | ENTRY, f"modules at dartlib's top level outside the base and entry points: {top - BASE - ENTRY}"


def _module_name(path: Path, package: Path) -> str:
    module = "dartlib." + ".".join(path.relative_to(package).with_suffix("").parts)
    return module.removesuffix(".__init__") if module != "dartlib.__init__" else "dartlib"


def import_cycles(package: Path = PACKAGE) -> list[set[str]]:
    """The groups of modules that import each other in a circle (strongly connected components of
    the import graph, imports inside functions included: such an import hides a circle, it does not
    remove it)."""
    graph = {_module_name(p, package): [t for _, t in imported_modules(p)] for p in package.rglob("*.py")}
    graph = {m: {t if t in graph else t.rsplit(".", 1)[0] for t in targets} & set(graph) - {m}
             for m, targets in graph.items()}
    order, low, stack, cycles = {}, {}, [], []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = set()
            while not group or member != module:
                member = stack.pop()
                group.add(member)
            if len(group) > 1:
                cycles.append(group)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_no_import_cycle():
    """No two modules of dartlib import each other, directly or round a circle, not even through an
    import inside a function (which hides a circle from Python but not from a reader)."""
    assert import_cycles() == []


def test_a_planted_import_cycle_is_found(tmp_path):
    copy = tmp_path / "dartlib" / "experiments"
    copy.mkdir(parents=True)
    (copy / "grid.py").write_text("from dartlib.experiments.outcomes import read_sidecar\n")
    (copy / "outcomes.py").write_text("def f():\n    from dartlib.experiments.grid import read_results\n")
    assert import_cycles(tmp_path / "dartlib") == [{"dartlib.experiments.grid", "dartlib.experiments.outcomes"}]
