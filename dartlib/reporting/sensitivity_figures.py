"""Notebook 08's figure: BNAdapt+DART against alpha, and accuracy against the test batch size."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import save_figure
from dartlib.reporting.tables import with_row_labels


def plot_sensitivity(*, alpha_frame: pd.DataFrame, batch_frame: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Left: BNAdapt+DART's accuracy per alpha and rho (dotted: BNAdapt); right: each method's
    accuracy per test batch size on balanced streams. Saved as ``figures/<profile>/sensitivity``."""
    alphas = settings["alpha_values"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    bn = alpha_frame[alpha_frame.method == "bnadapt"].pivot_table(index="refiner", columns="shift_param",
                                                                 values="accuracy")
    for rho in bn.columns:
        values = [bn.loc[f"DART (alpha={a:g})", rho] for a in alphas]
        axes[0].plot(range(len(alphas)), values, marker="o", label=f"ρ={rho:g}")
        axes[0].axhline(bn.loc["none", rho], ls=":", color=axes[0].lines[-1].get_color())
    axes[0].set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
    axes[0].set_xlabel("alpha (dotted: BNAdapt)")
    axes[0].set_ylabel("BNAdapt+DART accuracy (%)")
    axes[0].legend()
    by_batch = with_row_labels(batch_frame)
    curves = by_batch.pivot_table(index="column", columns="row", values="accuracy")
    curves[by_batch.row.unique()].plot(ax=axes[1], marker="o", logx=True)  # the grid's order, not A-Z
    axes[1].legend(title=None, loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside: inside it hid curves
    axes[1].set_xlabel("test batch size")
    axes[1].set_ylabel("accuracy (%), balanced stream")
    fig.suptitle(f"sensitivity ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="sensitivity")
    return fig
