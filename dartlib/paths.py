"""Every path of the suite, resolved from the repository root.

Kernels start in different folders under papermill, nbval and JupyterLab, so nothing here
depends on the working directory. The data root can be moved with ``DART_DATA_DIR``.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR: Path = REPO_ROOT / "notebooks"
PROFILES_DIR: Path = NOTEBOOKS_DIR / "profiles"
PAPER_DATA_DIR: Path = REPO_ROOT / "data" / "paper"
SHARED_DIR: Path = REPO_ROOT.parent / "shared"


def data_root() -> Path:
    """The data root: ``$DART_DATA_DIR`` when set, else ``<repo>/data``."""
    from dartlib.environment import setting

    env = setting("DART_DATA_DIR")  # stripped and checked, as the start-up check saw it
    return Path(env).expanduser().resolve() if env else REPO_ROOT / "data"


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
