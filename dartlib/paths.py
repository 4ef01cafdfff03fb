"""Every path of the suite, resolved from the repository root, and the user's folders where the
package is installed rather than run from a checkout.

Kernels start in different folders under papermill, nbval and JupyterLab, so nothing here
depends on the working directory. Two roots (docs/install.md):

- a checkout (the folder holding pyproject.toml beside ``dartlib/``) ships its artefacts,
  ``data/checkpoints/`` and the committed rows, and keeps data and caches under ``<repo>/data``;
- an installed package (``pip install`` by path or wheel: ``dartlib/`` inside site-packages) writes
  nothing beside itself: data go to the user's data folder and caches to the user's cache folder
  (platformdirs' ``user_data_dir("dartlib")`` / ``user_cache_dir("dartlib")`` where platformdirs
  is installed, else the XDG rules: ``$XDG_DATA_HOME/dartlib`` or ``~/.local/share/dartlib``, and
  ``$XDG_CACHE_HOME/dartlib`` or ``~/.cache/dartlib``).

``DART_DATA_DIR`` moves the data root in either case, and the caches with it (``<root>/cache``).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR: Path = REPO_ROOT / "notebooks"
PROFILES_DIR: Path = NOTEBOOKS_DIR / "profiles"
PAPER_DATA_DIR: Path = REPO_ROOT / "data" / "paper"
SHARED_DIR: Path = REPO_ROOT.parent / "shared"
APP_NAME = "dartlib"


def from_checkout() -> bool:
    """Whether ``dartlib`` runs from a checkout of the repository (pyproject.toml beside the
    package, as in a clone or an editable install) rather than from an installed copy."""
    return (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "dartlib" / "paths.py").is_file()


def _user_dir(kind: str) -> Path:
    """The user's ``data`` or ``cache`` folder for the package (module docstring)."""
    try:
        import platformdirs
    except ImportError:
        variable, default = {"data": ("XDG_DATA_HOME", "~/.local/share"), "cache": ("XDG_CACHE_HOME", "~/.cache")}[kind]
        base = os.environ.get(variable, "")
        # the XDG rules ignore a relative value
        return (Path(base) if os.path.isabs(base) else Path(default).expanduser()) / APP_NAME
    return Path(platformdirs.user_data_dir(APP_NAME) if kind == "data" else platformdirs.user_cache_dir(APP_NAME))


def data_root() -> Path:
    """The data root: ``$DART_DATA_DIR`` when set, else ``<repo>/data`` in a checkout, else the
    user's data folder (module docstring)."""
    from dartlib.environment import setting

    env = setting("DART_DATA_DIR")  # stripped and checked, as the start-up check saw it
    if env:
        return Path(env).expanduser().resolve()
    return REPO_ROOT / "data" if from_checkout() else _user_dir("data")


def cache_root() -> Path:
    """Where caches go (fitted refiners, prepared data, streams' logits): ``<data root>/cache`` in a
    checkout or under ``$DART_DATA_DIR``, else the user's cache folder (module docstring)."""
    from dartlib.environment import setting

    if setting("DART_DATA_DIR") or from_checkout():
        return data_root() / "cache"
    return _user_dir("cache")


# An outputs root for one profile's run (``python -m dartlib run --output DIR``, which sets both for
# the notebooks' kernels): that profile's results/, figures/ and runs/ folders are written under
# DIR instead of the repository, so that a run with changed settings (--set) never mixes its rows
# with the profile's own; every other profile's folders (committed rows a notebook reads) stay put.
OUTPUT_DIR_ENV, OUTPUT_PROFILE_ENV = "DART_OUTPUT_DIR", "DART_OUTPUT_PROFILE"


def output_root(profile: str) -> Path:
    """Where ``results/``, ``figures/`` and ``runs/`` of ``profile`` live: ``$DART_OUTPUT_DIR``
    when it is set for this profile (``$DART_OUTPUT_PROFILE``), else the repository root."""
    from dartlib.environment import setting

    root = setting(OUTPUT_DIR_ENV)
    if root and setting(OUTPUT_PROFILE_ENV) == profile:
        return Path(root).expanduser().resolve()
    if not from_checkout():  # never beside an installed package
        raise FileNotFoundError(f"{profile}'s results/, figures/ and runs/ live in a checkout of the repository, which "
                                f"this installed copy ({REPO_ROOT / 'dartlib'}) is not: clone the repository and work "
                                f"there, or set {OUTPUT_DIR_ENV} and {OUTPUT_PROFILE_ENV}={profile}")
    return REPO_ROOT


def figures_dir(profile: str) -> Path:
    """``figures/<profile>/`` (under :func:`output_root`), created on demand."""
    path = output_root(profile) / "figures" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_dir(profile: str) -> Path:
    """``results/<profile>/`` (under :func:`output_root`), created on demand."""
    path = output_root(profile) / "results" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(profile: str) -> Path:
    """``runs/<profile>/`` (under :func:`output_root`): executed notebook copies (never committed)."""
    path = output_root(profile) / "runs" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path
