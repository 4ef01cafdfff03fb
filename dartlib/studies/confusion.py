"""BNAdapt's confusion matrices on LT and inverse-LT streams of the clean and corrupted test sets
(Figure 1 and the appendix figures), and how alike they are across corruptions.

Its matrices are one table keyed by what made it (:func:`confusion_matrices`,
:mod:`dartlib.experiments.keyed_tables`): a notebook run again over a current table computes nothing.
Its figures: Figure 1 (:func:`show_figure1`) and the LT / inverse-LT grids (:func:`show_lt_grids`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import nn

from dartlib.analysis.confusion import bnadapt_confusion, matrices_from_rows, matrix_rows, offdiagonal_similarity
from dartlib.data import load, protocols
from dartlib.experiments.keyed_tables import keyed_table, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup
from dartlib.paths import results_dir
from dartlib.reporting.figures import WIDTH, confusion_heatmap, save_figure


# Raised when this module's code changes what its table holds (the stored copy goes stale).
CONFUSION_REVISION = 1

Matrices = dict[tuple[str, float, bool], np.ndarray]  # (set, rho, inverse) -> row-normalised K x K


def confusion_streams(settings: Settings) -> list[tuple[str, float, bool]]:
    """The (set, rho, inverse) streams the notebook shows: Figure 1's columns (``"clean"`` and
    ``fig1_corruptions``) at ``confusion_rho``, LT and inverse LT, and the appendix grids'
    (``"clean"`` and ``confusion_corruptions``) at every ``lt_rhos``, LT."""
    figure1 = [(name, float(settings.confusion.rho), inverse) for name in ["clean", *settings.confusion.fig1_corruptions]
               for inverse in (False, True)]
    grids = [(name, float(rho), False) for rho in settings.test.lt_rhos for name in ["clean", *settings.confusion.corruptions]]
    return list(dict.fromkeys(figure1 + grids))


def bnadapt_matrices(frozen: nn.Module, *, settings: Settings, streams: Sequence[tuple[str, float, bool]]) -> pd.DataFrame:
    """BNAdapt's row-normalised confusion matrix on each (set, rho, inverse) LT stream of the clean
    test split (``"clean"``) or a corruption, one row per entry (set, rho, inverse, true, pred, rate)."""
    rows = []
    for name in dict.fromkeys(s for s, _, _ in streams):
        ds = (load(settings.source.dataset, split="test") if name == "clean" else
              load(settings.test.corrupted_dataset, corruption=name, severity=settings.test.severity))
        for _, rho, inverse in [s for s in streams if s[0] == name]:
            order = protocols.long_tailed(ds.labels, rho=rho, inverse=inverse, seed=settings.seed)
            matrix = bnadapt_confusion(frozen, ds.images, ds.labels, order, batch_size=settings.test.batch_size,
                                       num_classes=ds.num_classes)
            rows.append(matrix_rows(matrix, labels={"set": name, "rho": rho, "inverse": inverse}, column="rate"))
    return pd.concat(rows, ignore_index=True)


def confusion_matrices(*, settings: Settings, setup: SourceSetup) -> Matrices:
    """:func:`bnadapt_matrices` of :func:`confusion_streams`, kept in
    ``results/<profile>/confusion_matrices.csv`` and computed only where that table was not made
    from the same source model, test sets and settings."""
    streams = confusion_streams(settings)
    sets = [(settings.source.dataset, "clean", 0)] + [
        (settings.test.corrupted_dataset, name, settings.test.severity) for name in dict.fromkeys(s for s, _, _ in streams)
        if name != "clean"]
    values = (streams, settings.source.dataset, settings.test.corrupted_dataset, settings.test.severity,
              settings.test.batch_size, settings.seed)
    inputs = study_inputs("confusion", revision=CONFUSION_REVISION, values=values, models=(setup.model,), sets=sets)
    table = keyed_table(results_dir(settings.profile) / "confusion_matrices.csv", inputs=inputs, float_format="%.10g",
                        compute=lambda: bnadapt_matrices(setup.frozen, settings=settings, streams=streams))
    return {(str(name), float(rho), bool(inverse)): matrix for (name, rho, inverse), matrix
            in matrices_from_rows(table, by=["set", "rho", "inverse"], column="rate").items()}


def similarity_table(matrices: Matrices, *, corruptions: Sequence[str], rhos: Sequence[float]) -> pd.DataFrame:
    """Per rho: the mean pairwise correlation of the off-diagonal entries across ``corruptions``
    and their mean off-diagonal error rate."""
    rows = []
    for rho in rhos:
        lt = {n: matrices[(n, float(rho), False)] for n in corruptions}
        k = len(next(iter(lt.values())))
        mean_corr, _ = offdiagonal_similarity(lt)
        rows.append({"rho": rho, "mean_pairwise_offdiag_correlation": mean_corr,
                     "mean_offdiag_error_rate": float(np.mean([lt[n][~np.eye(k, dtype=bool)].sum() / k
                                                              for n in corruptions]))})
    return pd.DataFrame(rows)


HIGHLIGHT = 0.11  # Figure 1 boxes the off-diagonal cells above 11%


def show_figure1(matrices: Matrices, *, columns: Sequence[str], rho: float, profile: str) -> None:
    """Figure 1: LT (top) and inverse-LT (bottom) confusion matrices of each set in ``columns``."""
    fig, axes = plt.subplots(2, len(columns), figsize=(WIDTH, 2 * WIDTH / len(columns) + 0.5))
    for c, name in enumerate(columns):
        for r, inverse in enumerate((False, True)):
            kind = "inverse LT" if inverse else "LT"
            confusion_heatmap(axes[r, c], matrices[(name, float(rho), inverse)], highlight_above=HIGHLIGHT,
                              annotate=False, title=f"{name.replace('_', ' ')}, {kind}")
            if r == 0:
                axes[r, c].set_xlabel("")  # the bottom row's label serves both rows (no overlap with its titles)
    fig.suptitle(f"BNAdapt confusion matrices, rho = {rho:g} ({profile} profile; red: off-diagonal > 11%)")
    save_figure(fig, profile=profile, name="fig1_confusion")
    plt.show()


def show_lt_grids(matrices: Matrices, *, names: Sequence[str], rhos: Sequence[float],
                  profile: str, cols: int = 4) -> None:
    """One figure per rho: the LT confusion matrix of every set in ``names``."""
    rows_n = -(-len(names) // cols)
    for rho in rhos:
        fig, axes = plt.subplots(rows_n, cols, figsize=(WIDTH, WIDTH / cols * rows_n + 0.4),
                                 squeeze=False)
        for i, (ax, name) in enumerate(zip(axes.flat, names)):
            confusion_heatmap(ax, matrices[(name, float(rho), False)], highlight_above=HIGHLIGHT, annotate=False,
                              title=name.replace("_", " "))
            if i // cols < rows_n - 1:
                ax.set_xlabel("")  # x labels on the last row only, clear of the titles below them
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.suptitle(f"BNAdapt confusion matrices, LT rho = {rho:g} ({profile} profile)")
        save_figure(fig, profile=profile, name=f"confusion_lt_rho{rho:g}")
        plt.show()
