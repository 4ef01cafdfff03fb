"""Profiles: YAML files of notebook parameters (``notebooks/profiles/<name>.yaml``).

``smoke`` is the default; its values equal those of every notebook's ``parameters`` cell, so a
plain run (nbval, JupyterLab) is the smoke run. papermill passes another profile's values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dartlib import environment
from dartlib.paths import PROFILES_DIR
from dartlib.registry import UnknownNameError, unknown_name_message
from dartlib.settings_tree import default_values

DEFAULT_PROFILE = "smoke"


class ProfileError(ValueError):
    """A profile that cannot be used as written; the message is one line naming the file, the key,
    the value and what is allowed (the command line prints it and exits with status 2)."""


def profile_names() -> list[str]:
    """The profiles present, ``smoke`` first."""
    names = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    return sorted(names, key=lambda n: n != DEFAULT_PROFILE)


environment.profile_names = profile_names  # the check of DART_OUTPUT_PROFILE lists these


def profile_path(name: str) -> Path:
    """``notebooks/profiles/<name>.yaml`` for ``name`` one of :func:`profile_names`; any other name
    (a path such as ``../../x`` among them) raises :class:`UnknownNameError` listing the valid ones."""
    if not isinstance(name, str) or name not in profile_names():
        raise UnknownNameError(unknown_name_message("profile", str(name), profile_names()))
    return PROFILES_DIR / f"{name}.yaml"


def load_profile(name: str) -> dict[str, Any]:
    """The parameters of profile ``name``, every setting of the tree by its flat key; its ``profile``
    key always equals the name. The chain starts from the tree's defaults
    (:func:`dartlib.settings_tree.default_values`); a profile holds only what differs from the one it
    names in ``extends:`` (the root, smoke, from the defaults): its values go on top of the other's
    (which may extend a third, never itself)."""
    return _load(name, chain=())


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, refusing a mapping that holds a key twice (YAML itself keeps the
    last value silently)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[object, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise ProfileError(f"{loader.name}: key `{key}` is set twice (lines {seen[key]} and {line}); keep one")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def load_yaml(path: Path) -> object:
    """The YAML document of file ``path`` as ``yaml.safe_load`` reads it, but a key set twice in one
    mapping raises :class:`ProfileError` naming the file, the key and both lines."""
    loader = _UniqueKeyLoader(Path(path).read_text())
    loader.name = str(path)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _read(path: Path) -> dict[str, Any]:
    try:
        params = load_yaml(path) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)  # where the bad entry starts
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ProfileError(f"{path}{where}: not valid YAML ({problem}); fix the file") from None
    if not isinstance(params, dict):
        raise ProfileError(f"{path}: expected `key: value` lines, found {type(params).__name__}")
    return params


def _load(name: str, *, chain: tuple[str, ...]) -> dict[str, Any]:
    path = profile_path(name)
    params = _read(path)
    if params.get("profile") != name:
        raise ProfileError(f"{path} must set `profile: {name}`")
    base = params.pop("extends", None)
    if base is None:
        return {**default_values(), **params}
    if not isinstance(base, str) or base not in profile_names():
        raise ProfileError(f"{path}: `extends: {base}` names no profile; valid: {', '.join(profile_names())}")
    if base in chain + (name,):
        raise ProfileError(f"{path}: `extends: {base}` goes round in a circle ({' -> '.join(chain + (name, base))}); "
                           "fix the file")
    return {**_load(base, chain=chain + (name,)), **params}
