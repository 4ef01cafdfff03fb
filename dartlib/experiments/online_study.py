"""Notebook 11's experiment (Table 2, Appendix B): the profile's online-imbalance streams with
DART and DART-split, through the grid runner (``results/<profile>/online_imbalance.csv``,
resumable; ``python -m dartlib grid online_imbalance`` computes the same cells outside the notebook)."""

from __future__ import annotations

import pandas as pd

from dartlib.experiments.engine import TestTimeContext, run_cells
from dartlib.experiments.online import SHARED_RESULTS, profile_cells
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir


def run_online_imbalance(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """Every cell of :func:`dartlib.experiments.online.profile_cells` for the profile."""
    out = results_dir(settings.profile)
    cells = profile_cells(settings)
    # notebook 09's rows of the same streams are copied, not recomputed
    return run_cells(cells, context, path=out / "online_imbalance.csv", experiment="online_imbalance",
                     progress=settings.profile != "smoke", reuse=[out / name for name in SHARED_RESULTS])
