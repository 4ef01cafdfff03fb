"""The streams behind Figures 3 and 4: per-batch deviation statistics of BNAdapt on online-imbalance
streams, and NoAdapt / BNAdapt / BNAdapt+DART accuracy against the LT imbalance ratio.

Its figures: Figure 4 (:func:`show_figure4`) and Figure 3 (:func:`show_figure3`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
from torch import nn

from dartlib.analysis.deviation import batch_deviation_table
from dartlib.data import load, protocols
from dartlib.models.evaluation import evaluated_on, stream_accuracy, stream_logits
from dartlib.reporting.figures import HALF_WIDTH, WIDTH, row_colours, save_figure


def deviation_over_irs(frozen: nn.Module, *, dataset: str, corruption: str, severity: int, irs: Sequence[float],
                       batch_size: int, seed: int) -> pd.DataFrame:
    """Figure 4's points: per batch of the online-imbalance stream (K subsets, one majority class
    each) at every imbalance ratio in ``irs``, BNAdapt's accuracy, D(u, p_bar_B) and d_B."""
    ds = load(dataset, corruption=corruption, severity=severity)
    subset = len(ds.labels) // ds.num_classes
    frozen, device = evaluated_on(frozen, None)  # one device copy for every stream
    tables = []
    for ir in irs:
        order = protocols.online_imbalance(ds.labels, ir=ir, subset_size=subset, seed=seed)
        logits = stream_logits(frozen, ds.images, order, batch_size=batch_size, device=device)
        tables.append(batch_deviation_table(logits, ds.labels, order, batch_size=batch_size).assign(ir=ir))
    return pd.concat(tables, ignore_index=True)


def accuracy_against_rho(*, frozen: nn.Module, source: nn.Module, refiner, dataset: str, corruptions: Sequence[str],
                         severity: int, rhos: Sequence[float], batch_size: int, seed: int) -> pd.DataFrame:
    """Figure 3's curves: accuracy of NoAdapt (``source``), BNAdapt (``frozen``) and BNAdapt+DART
    on LT streams, mean over ``corruptions`` per (method, rho)."""
    frozen, device = evaluated_on(frozen, None)  # one device copy of each model for every stream
    source, _ = evaluated_on(source, device)
    rows = []
    for corruption in corruptions:
        ds = load(dataset, corruption=corruption, severity=severity)
        for rho in rhos:
            order = protocols.long_tailed(ds.labels, rho=rho, seed=seed)
            adapted = stream_logits(frozen, ds.images, order, batch_size=batch_size, device=device)
            stored = stream_logits(source, ds.images, order, batch_size=batch_size, device=device)
            for method, logits, ref in (("noadapt", stored, None), ("bnadapt", adapted, None),
                                        ("bnadapt+dart", adapted, refiner)):
                rows.append({"corruption": corruption, "rho": rho, "method": method,
                             "accuracy": stream_accuracy(logits, ds.labels, order, batch_size=batch_size, refiner=ref)})
    return pd.DataFrame(rows).groupby(["method", "rho"], as_index=False)["accuracy"].mean()


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
