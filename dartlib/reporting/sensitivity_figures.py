"""Notebook 08's figure: BNAdapt+DART against alpha, and accuracy against the test batch size."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import WIDTH, row_colours, save_figure
from dartlib.reporting.tables import with_row_labels


def plot_sensitivity(*, alpha_frame: pd.DataFrame, batch_frame: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Left: BNAdapt+DART's accuracy per alpha and rho (dotted: BNAdapt); right: each method's
    accuracy per test batch size on balanced streams. The left panel's colours are shades of grey
    by rho, the right panel's the methods' own colours (figures.row_colours): no colour means two
    things. Saved as ``figures/<profile>/sensitivity``."""
    alphas = settings["alpha_values"]
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.4))
    bn = alpha_frame[alpha_frame.method == "bnadapt"].pivot_table(index="refiner", columns="shift_param",
                                                                 values="accuracy")
    shades = plt.cm.Greys(np.linspace(0.45, 0.95, len(bn.columns)))
    for rho, shade, marker in zip(bn.columns, shades, "os^vD"):
        values = [bn.loc[f"DART (alpha={a:g})", rho] for a in alphas]
        axes[0].plot(range(len(alphas)), values, marker=marker, color=shade, label=f"ρ={rho:g}")
        axes[0].axhline(bn.loc["none", rho], ls=":", color=shade)
    axes[0].set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
    axes[0].set_xlabel("alpha (dotted: BNAdapt)")
    axes[0].set_ylabel("BNAdapt+DART accuracy (%)")
    axes[0].legend(title="BNAdapt+DART")
    by_batch = with_row_labels(batch_frame)
    curves = by_batch.pivot_table(index="column", columns="row", values="accuracy")
    colours = row_colours(list(by_batch.row.unique()))
    for label in by_batch.row.unique():  # the grid's order, not A-Z
        axes[1].plot(curves.index, curves[label], marker="o", label=label, color=colours[label])
    axes[1].set_xscale("log")
    axes[1].legend(title=None, loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside: inside it hid curves
    axes[1].set_xlabel("test batch size")
    axes[1].set_ylabel("accuracy (%), balanced stream")
    fig.suptitle(f"sensitivity ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="sensitivity")
    return fig
