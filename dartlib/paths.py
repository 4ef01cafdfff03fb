"""Every path of the suite, resolved from the repository root.

Kernels start in different folders under papermill, nbval and JupyterLab, so nothing here
depends on the working directory. The data root can be moved with ``DART_DATA_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR: Path = REPO_ROOT / "notebooks"
PROFILES_DIR: Path = NOTEBOOKS_DIR / "profiles"
PAPER_DATA_DIR: Path = REPO_ROOT / "data" / "paper"
SHARED_DIR: Path = REPO_ROOT.parent / "shared"


def data_root() -> Path:
    """The data root: ``$DART_DATA_DIR`` when set, else ``<repo>/data``."""
    env = os.environ.get("DART_DATA_DIR")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / "data"


def figures_dir(profile: str) -> Path:
    """``figures/<profile>/``, created on demand."""
    path = REPO_ROOT / "figures" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_dir(profile: str) -> Path:
    """``results/<profile>/``, created on demand."""
    path = REPO_ROOT / "results" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(profile: str) -> Path:
    """``runs/<profile>/``: executed notebook copies (never committed)."""
    path = REPO_ROOT / "runs" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def paper_source() -> Path:
    """The paper's LaTeX source, present only beside a developer's checkout."""
    return SHARED_DIR / "paper" / "dart_paper.tex"
