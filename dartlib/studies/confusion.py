"""BNAdapt's confusion matrices on LT and inverse-LT streams of the clean and corrupted test sets
(Figure 1 and the appendix figures), and how alike they are across corruptions.

Its figures: Figure 1 (:func:`show_figure1`) and the LT / inverse-LT grids (:func:`show_lt_grids`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import nn

from dartlib.analysis.confusion import bnadapt_confusion, offdiagonal_similarity
from dartlib.data import load, protocols
from dartlib.reporting.figures import WIDTH, confusion_heatmap, save_figure


class ConfusionStudy:
    """The clean test split of ``source_dataset`` and the named corruptions of ``corrupted_dataset``,
    classified by the BN-adapted model ``frozen``."""

    def __init__(self, frozen: nn.Module, *, source_dataset: str, corrupted_dataset: str, corruptions: Sequence[str],
                 severity: int, batch_size: int, seed: int) -> None:
        clean = load(source_dataset, split="test")
        self.k = clean.num_classes
        self.sets = {"clean": clean}
        for name in dict.fromkeys(corruptions):
            self.sets[name] = load(corrupted_dataset, corruption=name, severity=severity)
        self.frozen, self.batch_size, self.seed = frozen, batch_size, seed

    def matrix(self, name: str, rho: float, *, inverse: bool = False) -> np.ndarray:
        """Row-normalised confusion matrix of BNAdapt on the (inverse) LT stream of set ``name``."""
        ds = self.sets[name]
        order = protocols.long_tailed(ds.labels, rho=rho, inverse=inverse, seed=self.seed)
        return bnadapt_confusion(self.frozen, ds.images, ds.labels, order, batch_size=self.batch_size,
                                 num_classes=self.k)

    def lt_matrices(self, names: Sequence[str], rhos: Sequence[float]) -> dict[tuple[float, str], np.ndarray]:
        """:meth:`matrix` of every (rho, name)."""
        return {(rho, name): self.matrix(name, rho) for rho in rhos for name in names}


def similarity_table(matrices: dict[tuple[float, str], np.ndarray], *, corruptions: Sequence[str],
                     rhos: Sequence[float], k: int) -> pd.DataFrame:
    """Per rho: the mean pairwise correlation of the off-diagonal entries across ``corruptions``
    and their mean off-diagonal error rate."""
    rows = []
    for rho in rhos:
        mean_corr, _ = offdiagonal_similarity({n: matrices[(rho, n)] for n in corruptions})
        rows.append({"rho": rho, "mean_pairwise_offdiag_correlation": mean_corr,
                     "mean_offdiag_error_rate": float(np.mean([matrices[(rho, n)][~np.eye(k, dtype=bool)].sum() / k
                                                              for n in corruptions]))})
    return pd.DataFrame(rows)


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
