"""pyproject.toml and environment.yml declare the same direct dependencies."""

from __future__ import annotations

import re
import tomllib

import yaml

from dartlib.paths import REPO_ROOT

# conda-forge spells a few packages differently from PyPI.
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_DEPENDENCIES = {"python", "pip"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_matches_pyproject():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    declared = {_name(r) for r in pyproject["project"]["dependencies"]}
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    conda, pip = set(), set()
    for entry in env["dependencies"]:
        if isinstance(entry, dict):
            pip |= {_name(r) for r in entry.get("pip", []) if not r.startswith("-e")}
        else:
            name = _name(entry)
            conda.add(CONDA_TO_PYPI.get(name, name))
    assert "conda-forge" in env["channels"]
    assert (conda | pip) - NOT_DEPENDENCIES == declared


def test_design_card_packages_are_declared():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    declared = {_name(r) for r in pyproject["project"]["dependencies"]}
    card = {"torch", "torchvision", "jupyterlab", "papermill", "matplotlib", "seaborn", "pandas", "nbval", "tqdm"}
    assert card <= declared
