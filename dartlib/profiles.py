"""Profiles: YAML files of notebook parameters (``notebooks/profiles/<name>.yaml``).

``smoke`` is the default; its values equal those of every notebook's ``parameters`` cell, so a
plain run (nbval, JupyterLab) is the smoke run. papermill passes another profile's values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dartlib.paths import PROFILES_DIR
from dartlib.registry import UnknownNameError, unknown_name_message

DEFAULT_PROFILE = "smoke"


def profile_names() -> list[str]:
    """The profiles present, ``smoke`` first."""
    names = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    return sorted(names, key=lambda n: n != DEFAULT_PROFILE)


def profile_path(name: str) -> Path:
    path = PROFILES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownNameError(unknown_name_message("profile", name, profile_names()))
    return path


def load_profile(name: str) -> dict[str, Any]:
    """The parameters of profile ``name``; its ``profile`` key always equals the name."""
    params = yaml.safe_load(profile_path(name).read_text()) or {}
    if params.get("profile") != name:
        raise ValueError(f"{profile_path(name)} must set `profile: {name}`")
    return params
