"""CIFAR-10.1-LT, Table 1's natural-shift column (notebook 12): the profile's CIFAR-10
source model and notebook 04's g_phi on the long-tailed subsets of CIFAR-10.1, every Table 1 method
with and without DART (``results/<profile>/natural_shifts.csv``, resumable)."""

from __future__ import annotations

import pandas as pd

from dartlib.data.sources import HOW_TO_GET, expected_path
from dartlib.experiments.engine import prepare_context, run_cells
from dartlib.experiments.settings import Settings
from dartlib.studies.table1 import table1_cells
from dartlib.paths import results_dir


def cifar10_1_not_run(settings: Settings) -> str | None:
    """Why CIFAR-10.1-LT cannot run on this profile or machine (``None`` when it can)."""
    if settings["source_dataset"] != "cifar10":
        return (f"cifar10.1: NOT RUN (needs a CIFAR-10 source model; the {settings.profile} profile's is "
                f"{settings['source_arch']} on {settings['source_dataset']})")
    if not expected_path("cifar10.1").exists():
        return (f"cifar10.1: NOT RUN (data absent at {expected_path('cifar10.1')}); "
                f"how to get it: {HOW_TO_GET['cifar10.1']}")
    return None


def run_cifar10_1(settings: Settings) -> pd.DataFrame:
    """Every Table 1 cell on CIFAR-10.1-LT at the profile's rhos."""
    context, _ = prepare_context(settings=settings)
    cells = table1_cells(dataset="cifar10.1", corruptions=["clean"], rhos=settings["lt_rhos"], seed=settings["seed"])
    return run_cells(cells, context, path=results_dir(settings.profile) / "natural_shifts.csv",
                     experiment="natural_shifts")
