"""Where one profile's book reads from: its executed notebooks, figures and results (none of them
created here), and where books are built (``build/book/<profile>/``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dartlib.paths import NOTEBOOKS_DIR, REPO_ROOT

BOOK_DIR = REPO_ROOT / "build" / "book"


@dataclass(frozen=True)
class BookSources:
    """Where one profile's book reads from."""

    profile: str
    notebooks: Path
    figures: Path
    results: Path
    runs: Path | None = None  # the smoke profile: the last run's executed copies (runs/smoke/), shown where present


def book_sources(*, profile: str) -> BookSources:
    """The executed notebooks, figures and results of ``profile`` (none of them created here)."""
    notebooks = NOTEBOOKS_DIR if profile == "smoke" else REPO_ROOT / "results" / profile / "notebooks"
    runs = REPO_ROOT / "runs" / profile if profile == "smoke" else None
    return BookSources(profile, notebooks, REPO_ROOT / "figures" / profile, REPO_ROOT / "results" / profile, runs)


def executed_notebooks(sources: BookSources) -> list[Path]:
    """The executed notebooks the book shows, in order: ``sources.notebooks``; on the smoke profile
    the committed notebooks, each replaced by the copy that ``make reproduce`` executed
    (``runs/smoke/``) where there is one, so that the notebooks show the run that wrote
    ``results/smoke/`` and ``figures/smoke/``."""
    pattern = "[0-9][0-9]_*.ipynb"
    found = {p.stem: p for p in sources.notebooks.glob(pattern)} if sources.notebooks.is_dir() else {}
    if sources.runs is not None and sources.runs.is_dir():
        found.update({p.stem: p for p in sources.runs.glob(pattern)})
    return [found[name] for name in sorted(found)]


def has_results(sources: BookSources) -> bool:
    """Whether the profile's results folder holds any results file (a fresh clone has no smoke
    results: ``make reproduce`` writes them)."""
    return sources.results.is_dir() and any(sources.results.glob("*.csv"))


def missing_results_note(profile: str) -> str:
    """What to run when ``profile`` has no results on this checkout."""
    run = "make reproduce" if profile == "smoke" else f"make reproduce PROFILE={profile}"
    return (f"No results of the {profile} profile on this checkout: `results/{profile}/` and `figures/{profile}/` are "
            f"written by `{run}` (the smoke profile: about 10 minutes on 2 CPU cores). Until then the claims ledger "
            f"and the tables read NOT RUN and the gallery is empty. Run `{run}`, then "
            f"`make book PROFILE={profile}`.")
