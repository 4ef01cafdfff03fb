"""Notebook 11's figure: NoAdapt and BNAdapt (+DART, +DART-split) against the imbalance ratio."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import HALF_WIDTH, row_colours, save_figure
from dartlib.reporting.tables import row_label


def plot_online_imbalance(*, results: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Accuracy per IR of the BNAdapt family, in the grid's order and each method's colour
    (figures.row_colours); saved as ``figures/<profile>/online_imbalance``."""
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 3.6))
    rows = results[results.method.isin(["noadapt", "bnadapt"])].assign(
        row=lambda f: [row_label(m, r) for m, r in zip(f.method, f.refiner)])
    curves = rows.pivot_table(index="shift_param", columns="row", values="accuracy")[list(rows.row.unique())]
    colours = row_colours(list(curves.columns))
    for label in curves.columns:
        ax.plot(curves.index, curves[label], marker="o", label=label, color=colours[label])
    ax.set_xscale("log")
    ax.legend(title=None)
    ax.set_xlabel("imbalance ratio (IR)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"online imbalance, {settings['corrupted_dataset']} ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="online_imbalance")
    return fig
