"""Notebook 07's figure: each DART variant's gain over BNAdapt per stream."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.experiments.ablations import VARIANTS
from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import WIDTH, save_figure


def plot_variant_gains(*, ours: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Bars of each variant's accuracy minus BNAdapt's (``ours``: refiner x column means), saved
    as ``figures/<profile>/ablations_gain``."""
    gain = ours.drop(index="none") - ours.loc["none"]
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4))
    gain.reindex(list(VARIANTS)).T.plot.bar(ax=ax, width=0.85)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylabel("gain over BNAdapt (points)")
    ax.set_xlabel("")
    ax.set_title(f"DART variants on {settings['corrupted_dataset']} ({settings.profile} profile, "
                 f"{settings['ablation_epochs']} epoch(s))")
    ax.legend(ncol=4)
    save_figure(fig, profile=settings.profile, name="ablations_gain")
    return fig
