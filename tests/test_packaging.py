"""pyproject.toml and environment.yml declare the same direct dependencies (the core and every
extra); the core is light, and importing it imports none of the extras."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import yaml

from dartlib.paths import REPO_ROOT

# conda-forge spells a few packages differently from PyPI.
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_DEPENDENCIES = {"python", "pip"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _declared(project: dict) -> set[str]:
    """The core's and every extra's package names (an extra naming dartlib's own extras left out)."""
    names = {_name(r) for r in project["dependencies"]}
    for extra in project.get("optional-dependencies", {}).values():
        names |= {_name(r) for r in extra}
    return names - {"dartlib"}


def test_environment_matches_pyproject():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    declared = _declared(pyproject["project"])
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
    declared = _declared(pyproject["project"])
    card = {"torch", "torchvision", "jupyterlab", "papermill", "matplotlib", "seaborn", "pandas", "nbval", "tqdm"}
    assert card <= declared


# Packages of the extras that the core must not pull in, as installed and as imported.
HEAVY = {"jupyterlab", "papermill", "nbval", "nbformat", "ray", "sphinx", "myst-nb", "sphinx-book-theme", "playwright",
         "pytest", "matplotlib", "seaborn", "scikit-learn", "ipykernel"}
HEAVY_MODULES = ("jupyterlab", "jupyter_client", "jupyter_server", "papermill", "nbval", "nbformat", "ray", "sphinx",
                 "myst_nb", "playwright", "pytest", "matplotlib", "seaborn", "sklearn", "IPython", "ipykernel")
# The core's modules: the public API of docs/using-dart.md, the methods, the data and its protocols, the CLI.
CORE_MODULES = ("dartlib", "dartlib.dart.fit", "dartlib.dart.intermediate", "dartlib.tta", "dartlib.tta.wrap",
                "dartlib.data", "dartlib.data.protocols", "dartlib.data.prepare", "dartlib.devices",
                "dartlib.studies.alpha_choice", "dartlib.cli")


def test_the_core_installs_without_the_extras_and_make_setup_installs_them_all():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    assert not core & HEAVY, f"core dependencies that belong in an extra: {sorted(core & HEAVY)}"
    extras = project["optional-dependencies"]
    assert {"notebooks", "book", "ray", "dev", "all"} <= set(extras)
    assert extras["all"] == ["dartlib[notebooks,book,ray,dev]"]
    assert '-e ".[all]"' in (REPO_ROOT / "Makefile").read_text()


def test_importing_the_core_imports_none_of_the_extras():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in CORE_MODULES)
            + f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "[]", f"the core imports {out.stdout.strip()} at import time"


# The import name of each extra's distribution where it differs from the distribution's name.
IMPORT_NAMES = {"scikit-learn": "sklearn", "imagecorruptions-imaug": "imagecorruptions"}


def test_every_extras_package_is_named_by_the_extra_a_missing_import_points_to():
    from dartlib.extras import EXTRAS, extra_for

    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, requirements in extras.items():
        for name in {_name(r) for r in requirements} - {"dartlib"}:
            module = IMPORT_NAMES.get(name, name.replace("-", "_"))
            assert extra_for(module) == extra, f"{name} (import {module}) of the {extra} extra: add it to EXTRAS"
    assert set(EXTRAS) == set(extras) - {"all"}
    assert extra_for("torch") is None and extra_for("matplotlib.pyplot") == "notebooks"
