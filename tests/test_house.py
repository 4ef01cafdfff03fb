"""The house rules ARCHITECTURE.md states that a test can check: no function of dartlib runs past
80 lines; none takes more than 10 parameters but those listed here, a list that only shrinks (each
is to take a settings object instead); no module runs past 500 lines but those listed here, which
may only shrink until they are split; no module re-exports or forwards names it does not define."""

from __future__ import annotations

import ast
from pathlib import Path

from dartlib.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "dartlib"
MAX_LINES, MAX_PARAMETERS = 80, 10
# function -> its parameter count today; remove an entry when the function takes fewer
WIDE: dict[str, int] = {}


def functions(package: Path = PACKAGE):
    """(place, lines, parameters) of every function, ``self``/``cls`` not counted."""
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                count = len(names) - (names[:1] in (["self"], ["cls"]))
                yield f"{path.relative_to(package).as_posix()}:{node.name}", node.end_lineno - node.lineno + 1, count


def test_no_function_runs_past_80_lines():
    assert [(place, lines) for place, lines, _ in functions() if lines > MAX_LINES] == []


def test_no_function_takes_more_than_10_parameters_but_the_listed_ones():
    wide = {place: count for place, _, count in functions() if count > MAX_PARAMETERS}
    assert {p: c for p, c in wide.items() if WIDE.get(p) != c} == {}, "a new wide function, or a listed one grew"
    assert set(WIDE) - set(wide) == set(), "a listed function takes 10 parameters or fewer now: remove it from WIDE"


def test_a_planted_long_or_wide_function_is_found(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n\n\ndef wide(a, b, c, d, e, f, g, h, i, j, k):\n    pass\n")
    found = {place: (lines, count) for place, lines, count in functions(tmp_path)}
    assert found == {"m.py:long": (86, 0), "m.py:wide": (2, 11)}


MAX_MODULE_LINES = 500
# module -> its line count when listed; it may shrink, not grow, and its entry goes once it is split
# under MAX_MODULE_LINES (one module a concept)
LONG_MODULES: dict[str, int] = {}


def long_modules(package: Path = PACKAGE) -> dict[str, int]:
    """The modules of ``package`` that run past :data:`MAX_MODULE_LINES` lines, with their line counts."""
    counts = {path.relative_to(package).as_posix(): len(path.read_text().splitlines())
              for path in sorted(package.rglob("*.py"))}
    return {module: lines for module, lines in counts.items() if lines > MAX_MODULE_LINES}


def test_no_module_runs_past_500_lines_but_the_listed_ones():
    long = long_modules()
    grown = {m: n for m, n in long.items() if n > LONG_MODULES.get(m, MAX_MODULE_LINES)}
    assert grown == {}, "a new module over 500 lines, or a listed one grew: split it by concern"
    assert set(LONG_MODULES) - set(long) == set(), "a listed module runs 500 lines or fewer now: remove it from LONG_MODULES"


def test_a_planted_long_module_is_found(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert long_modules(tmp_path) == {"sub/long.py": MAX_MODULE_LINES + 1}


# packages whose __init__ imports on purpose: dartlib (the version), data (its facade: ``from
# dartlib.data import load``), tta (it defines the METHODS registry from its modules' classes), cli
# (it builds the parser of ``python -m dartlib`` from its command modules' parsers)
IMPORTING_PACKAGES = {"dartlib/__init__.py", "dartlib/data/__init__.py", "dartlib/tta/__init__.py",
                      "dartlib/cli/__init__.py"}


def test_no_module_forwards_names_it_does_not_define():
    """No module answers unknown attributes (``__getattr__``), and no other package re-exports a
    submodule's names: a name is imported from the module that defines it."""
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert not [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"], path
        if path.name == "__init__.py" and path.relative_to(REPO_ROOT).as_posix() not in IMPORTING_PACKAGES:
            assert not [n for n in tree.body if isinstance(n, ast.ImportFrom | ast.Import)], path


# where a TestTimeContext is built: the engine (prepare_context, from a profile's Settings) and the
# large benchmarks (from a benchmark's own settings: they have no profile); a study derives its
# contexts from prepare_context's with TestTimeContext.variant
CONTEXT_BUILDERS = {"experiments/engine.py", "studies/large_benchmarks.py"}


def context_builders(package: Path = PACKAGE) -> set[str]:
    """The modules of ``package`` that call ``TestTimeContext(...)``."""
    return {path.relative_to(package).as_posix() for path in package.rglob("*.py")
            if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "TestTimeContext"
                   for n in ast.walk(ast.parse(path.read_text())))}


def test_contexts_are_made_in_one_place():
    assert context_builders() == CONTEXT_BUILDERS


def test_a_planted_hand_built_context_is_found(tmp_path):
    (tmp_path / "study.py").write_text("def prepare(model):\n    return TestTimeContext(source=model, refiner=None)\n")
    assert context_builders(tmp_path) == {"study.py"}
