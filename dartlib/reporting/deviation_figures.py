"""Figure 4 (per-batch accuracy against D(u, p_bar_B) and the prediction deviation d_B) and
Figure 3 (accuracy against the imbalance ratio rho)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dartlib.reporting.figures import PALETTE, save_figure

# Figure 3's caption (and Figure 2's): NoAdapt blue, BNAdapt orange, BNAdapt+DART green.
FIGURE3_STYLE = {"noadapt": ("NoAdapt", 0), "bnadapt": ("BNAdapt", 1), "bnadapt+dart": ("BNAdapt+DART", 2)}


def show_figure4(deviation: pd.DataFrame, *, title: str, profile: str) -> None:
    """Batch accuracy against D(u, p_bar_B) (left) and d_B (right), one colour per imbalance ratio."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
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
    colours = sns.color_palette(PALETTE)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for method, group in curve.groupby("method", sort=False):
        label, colour = FIGURE3_STYLE.get(method, (method, 3 + len(ax.lines)))
        ax.plot(group.rho, group.accuracy, marker="o", label=label, color=colours[colour % len(colours)])
    ax.set_xscale("log")
    ax.set_xlabel("imbalance ratio rho")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title)
    ax.legend()
    save_figure(fig, profile=profile, name="fig3_accuracy_vs_rho")
    plt.show()
