"""Figure 1 and the appendix confusion-matrix figures (BNAdapt under label shift)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from dartlib.analysis.confusion_study import ConfusionStudy
from dartlib.reporting.figures import WIDTH, confusion_heatmap, save_figure

HIGHLIGHT = 0.11  # Figure 1 boxes the off-diagonal cells above 11%


def show_figure1(study: ConfusionStudy, *, columns: Sequence[str], rho: float, profile: str) -> None:
    """Figure 1: LT (top) and inverse-LT (bottom) confusion matrices of each set in ``columns``."""
    fig, axes = plt.subplots(2, len(columns), figsize=(WIDTH, 2 * WIDTH / len(columns) + 0.5))
    for c, name in enumerate(columns):
        for r, inverse in enumerate((False, True)):
            kind = "inverse LT" if inverse else "LT"
            confusion_heatmap(axes[r, c], study.matrix(name, rho, inverse=inverse), highlight_above=HIGHLIGHT,
                              annotate=False, title=f"{name.replace('_', ' ')}, {kind}")
            if r == 0:
                axes[r, c].set_xlabel("")  # the bottom row's label serves both rows (no overlap with its titles)
    fig.suptitle(f"BNAdapt confusion matrices, rho = {rho:g} ({profile} profile; red: off-diagonal > 11%)")
    save_figure(fig, profile=profile, name="fig1_confusion")
    plt.show()


def show_lt_grids(matrices: dict[tuple[float, str], np.ndarray], *, names: Sequence[str], rhos: Sequence[float],
                  profile: str, cols: int = 4) -> None:
    """One figure per rho: the LT confusion matrix of every set in ``names``."""
    rows_n = -(-len(names) // cols)
    for rho in rhos:
        fig, axes = plt.subplots(rows_n, cols, figsize=(WIDTH, WIDTH / cols * rows_n + 0.4),
                                 squeeze=False)
        for i, (ax, name) in enumerate(zip(axes.flat, names)):
            confusion_heatmap(ax, matrices[(rho, name)], highlight_above=HIGHLIGHT, annotate=False,
                              title=name.replace("_", " "))
            if i // cols < rows_n - 1:
                ax.set_xlabel("")  # x labels on the last row only, clear of the titles below them
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.suptitle(f"BNAdapt confusion matrices, LT rho = {rho:g} ({profile} profile)")
        save_figure(fig, profile=profile, name=f"confusion_lt_rho{rho:g}")
        plt.show()
