"""Figure 4 (per-batch accuracy against D(u, p_bar_B) and the prediction deviation d_B) and
Figure 3 (accuracy against the imbalance ratio rho)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from dartlib.reporting.figures import HALF_WIDTH, WIDTH, row_colours, save_figure

# Figure 3's caption (and Figure 2's): NoAdapt blue, BNAdapt orange, BNAdapt+DART green (figures.row_colours).
FIGURE3_LABELS = {"noadapt": "NoAdapt", "bnadapt": "BNAdapt", "bnadapt+dart": "BNAdapt+DART"}


def show_figure4(deviation: pd.DataFrame, *, title: str, profile: str) -> None:
    """Batch accuracy against D(u, p_bar_B) (left) and d_B (right), one colour per imbalance ratio."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.6), sharey=True)
    for ir, group in deviation.groupby("ir"):
        axes[0].scatter(group.ce_u_pbar, group.accuracy, s=12, label=f"IR = {ir:g}")
        axes[1].scatter(group.d, group.accuracy, s=12, label=f"IR = {ir:g}")
    axes[0].set_xlabel("D(u, p_bar) (nats)")
    axes[1].set_xlabel("prediction deviation d (nats)")
    axes[0].set_ylabel("batch accuracy (%)")
    axes[1].legend()
    fig.suptitle(title)
    save_figure(fig, profile=profile, name="fig4_prediction_deviation")
    plt.show()


def show_figure3(curve: pd.DataFrame, *, title: str, profile: str) -> None:
    """Accuracy of each method against rho (log scale), in the paper's colours (Figure 3's
    caption: BNAdapt orange, DART green; NoAdapt blue as in Figure 2)."""
    colours = row_colours([FIGURE3_LABELS.get(m, m) for m in curve.method.unique()])
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 3.6))
    for method, group in curve.groupby("method", sort=False):
        label = FIGURE3_LABELS.get(method, method)
        ax.plot(group.rho, group.accuracy, marker="o", label=label, color=colours[label])
    ax.set_xscale("log")
    ax.set_xlabel("imbalance ratio rho")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title)
    ax.legend()
    save_figure(fig, profile=profile, name="fig3_accuracy_vs_rho")
    plt.show()
