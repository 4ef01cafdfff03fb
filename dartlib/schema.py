"""The settings a run reads, checked before anything runs: profiles and notebook parameters.

The known keys, their defaults (whose kind is each key's type), their ranges and the kinds of names
a string may take are the settings tree's (:mod:`dartlib.settings_tree`, stated there once); this
module resolves the names (:data:`NAME_KINDS`) and checks a profile against the tree. A notebook's
``parameters`` cell sets keys of the tree only (``tests/test_runner.py``). A profile that breaks any
of it raises
:class:`~dartlib.profiles.ProfileError`, one line naming the file, the key, the value and what is
allowed; the command line prints it and exits with status 2 before computing or writing anything.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


from dartlib.paths import NOTEBOOKS_DIR, REPO_ROOT
from dartlib.profiles import ProfileError, profile_names, profile_path
from dartlib.settings_tree import SETTINGS, Range

# Every integer a profile gives ends in a 64-bit integer (torch, numpy); a larger one is refused here.
INT64_MAX = 2**63 - 1

# Every number a profile may set, with its range, as the settings tree states it (once, beside the default).
RANGES: dict[str, Range] = {key: p.field.metadata["range"] for key, p in SETTINGS.items()
                            if p.field.metadata["range"] is not None}


def _corruptions() -> list[str]:
    from dartlib.data.corruptions import CORRUPTIONS

    return list(CORRUPTIONS)


def _datasets() -> list[str]:
    from dartlib.data.sources import SOURCES

    return list(SOURCES)


def _architectures() -> list[str]:
    from dartlib.models.backbones import ARCHITECTURES

    return list(ARCHITECTURES)


def _recipes() -> list[str]:
    from dartlib.models.training import RECIPES

    return list(RECIPES)


def _methods() -> list[str]:
    from dartlib.tta import METHODS

    return list(METHODS)


def _diagnosis_variants() -> list[str]:
    from dartlib.studies.diagnosis import VARIANTS

    return [v.name for v in VARIANTS]


def _shortcut_studies() -> list[str]:
    from dartlib.experiments.settings import SHORTCUT_STUDIES

    return list(SHORTCUT_STUDIES)


def _benchmarks() -> list[str]:
    from dartlib.studies.large_benchmarks import BENCHMARKS

    return list(BENCHMARKS)


# The names a string (or each string of a list) may take: (what they are, where they come from).
NAME_KINDS: dict[str, Callable[[], list[str]]] = {
    "corruption": _corruptions, "dataset": _datasets, "architecture": _architectures, "recipe": _recipes,
    "method": _methods, "benchmark": _benchmarks, "profile": profile_names, "grid backend": lambda: ["local", "ray"],
    "diagnosis variant": _diagnosis_variants, "study": _shortcut_studies,
}


def name_kind(key: str) -> str | None:
    """The kind of name setting ``key`` holds (one of :data:`NAME_KINDS`), as the settings tree states it."""
    place = SETTINGS.get(key)
    return place.field.metadata["names"] if place is not None else None


def notebook_parameters(paths: Iterable[Path] | None = None) -> dict[str, tuple[Any, str]]:
    """Every notebook parameter: name -> (smoke value, first notebook that takes it), read from the
    notebooks' ``parameters`` cells (without executing them)."""
    if paths is None:
        paths = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    found: dict[str, tuple[Any, str]] = {}
    for path in paths:
        from dartlib.data.files import committed_remedy, read_json

        cells = read_json(Path(path), required=("cells",), remedy=committed_remedy(path))["cells"]
        for cell in cells:
            if "parameters" not in cell.get("metadata", {}).get("tags", []):
                continue
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for name, value in parameter_assignments(source):
                found.setdefault(name, (ast.literal_eval(value), Path(path).stem))
    return found


def unknown_parameters(paths: Iterable[Path] | None = None) -> list[str]:
    """``notebook: name`` for each parameter of the notebooks' ``parameters`` cells that the settings
    tree does not hold (a notebook takes settings of the tree only)."""
    return [f"{notebook}: {name}" for name, (_, notebook) in notebook_parameters(paths).items() if name not in SETTINGS]


def parameter_assignments(source: str) -> list[tuple[str, ast.expr]]:
    """(name, value node) of each ``name = value`` or ``name: type = value`` of a parameters cell."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            found.append(((node.target if isinstance(node, ast.AnnAssign) else node.targets[0]).id, node.value))
    return found


def python_literal(value: Any) -> str:
    """``value`` (as a profile's YAML gives it) written as a parameters cell writes it."""
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    return json.dumps(value)


def sync_parameters_cells(*, write: bool, paths: Iterable[Path] | None = None) -> list[str]:
    """Each notebook's ``parameters`` cell given the smoke profile's values, the one place they are
    stated (``notebooks/profiles/smoke.yaml``): every assignment whose value differs is rewritten
    in place, its annotation and comment kept. Returns ``notebook: name old -> new`` for each, and
    writes the notebooks only when ``write``."""
    import nbformat

    from dartlib.profiles import load_profile

    smoke = load_profile("smoke")
    changed = []
    for path in sorted(paths or NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        edited = False
        for cell in nb.cells:
            if "parameters" not in cell.metadata.get("tags", []):
                continue
            lines, here = cell.source.split("\n"), []
            # last first, so that a value rewritten on fewer lines leaves the earlier line numbers valid
            for name, value in reversed(parameter_assignments(cell.source)):
                if name not in smoke or ast.literal_eval(value) == smoke[name]:
                    continue
                new = python_literal(smoke[name])
                first, last = lines[value.lineno - 1], lines[value.end_lineno - 1]
                lines[value.lineno - 1:value.end_lineno] = [first[:value.col_offset] + new + last[value.end_col_offset:]]
                here.insert(0, f"{path.stem}: {name} {ast.get_source_segment(cell.source, value)} -> {new}")
            if here:
                cell.source = "\n".join(lines)
                changed += here
                edited = True
        if edited and write:
            nbformat.write(nb, path)
    return changed


def _kind_of(value: Any) -> str:
    """``bool``, ``int``, ``float``, ``str``, or ``list of <kind>`` of a smoke value."""
    if isinstance(value, list):
        kinds = {_kind_of(v) for v in value}
        kinds = {"float"} if kinds == {"int", "float"} else kinds
        return f"list of {kinds.pop() if len(kinds) == 1 else 'values'}"
    return type(value).__name__


_DESCRIBED = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
              "list of int": "a list of integers", "list of float": "a list of numbers",
              "list of str": "a list of strings", "list of values": "a list"}


def _fits(value: Any, kind: str) -> bool:
    if kind.startswith("list of "):
        return isinstance(value, list) and all(_fits(v, kind[len("list of "):]) for v in value)
    if kind == "values":
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)


def _shown(path: Path) -> str:
    path = Path(path)
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _typename(value: Any) -> str:
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping", type(None): "empty"}.get(type(value), type(value).__name__)


def nearest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name closest to ``name`` (difflib), if any is close."""
    match = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=0.6)
    return match[0] if match else None


def _did_you_mean(name: str, valid: Iterable[str]) -> str:
    close = nearest(name, valid)
    return f" (did you mean {close!r}?)" if close else ""


def check_values(values: dict[str, Any], *, file: Path) -> None:
    """Raise :class:`ProfileError` on the first key of ``values`` (a profile read from ``file``)
    that the settings tree does not hold, or whose value is of the wrong type, out of range, or an
    unknown name (each as the tree states it: :mod:`dartlib.settings_tree`)."""
    known = {key: place.default() for key, place in SETTINGS.items()}
    where = _shown(file)
    for key in values:
        if key not in known:
            raise ProfileError(f"{where}: unknown key {key!r}{_did_you_mean(key, known)}; a profile sets the "
                               "settings of dartlib/settings_tree.py (each by its flat key)")
    for key, value in values.items():
        smoke = known[key]
        kind = _kind_of(smoke)
        if kind == "list of values" or (kind.startswith("list of") and not smoke):
            kind = "list of values"  # an empty smoke list says nothing of its elements
        allowed = RANGES.get(key)
        names = name_kind(key)
        what = _DESCRIBED.get(kind, kind)
        if names is not None:
            what = f"a list of {names} names" if kind.startswith("list") else f"a {names} name"
        if allowed is not None:
            what += f" {allowed}" if not kind.startswith("list") else f", each {allowed}"
        if not _fits(value, kind):
            hint = f" such as `{key}: [{value}]`" if kind.startswith("list") and not isinstance(value, list) else ""
            raise ProfileError(f"{where}: {key}: {value!r} is {_typename(value)}; expected {what}{hint}")
        items = value if isinstance(value, list) else [value]
        if kind in ("float", "list of float") and not all(math.isfinite(v) for v in items):
            raise ProfileError(f"{where}: {key}: {value!r} is not finite; expected {what}")
        if allowed is not None:
            bad = [v for v in items if not allowed.holds(v)]
            if bad:
                raise ProfileError(f"{where}: {key}: {bad[0]!r} is out of range; expected {what}")
        if kind in ("int", "list of int") and any(abs(v) > INT64_MAX for v in items):
            bad = next(v for v in items if abs(v) > INT64_MAX)
            raise ProfileError(f"{where}: {key}: {bad!r} is out of range; expected {what}, within 64-bit integers")
        if names is not None:
            valid = NAME_KINDS[names]()
            bad = [v for v in items if v not in valid]
            if bad:
                raise ProfileError(f"{where}: {key}: unknown {names} {bad[0]!r}{_did_you_mean(bad[0], valid)}; "
                                   f"valid: {', '.join(valid)}")


def checked_profile(name: str) -> dict[str, Any]:
    """The parameters of profile ``name`` (:func:`dartlib.profiles.load_profile`), checked against
    the settings tree (:func:`check_values`)."""
    from dartlib.profiles import load_profile

    values = load_profile(name)
    check_values(values, file=profile_path(name))
    return values
