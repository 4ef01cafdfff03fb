"""The streams behind Figures 3 and 4: per-batch deviation statistics of BNAdapt on online-imbalance
streams, and NoAdapt / BNAdapt / BNAdapt+DART accuracy against the LT imbalance ratio.

Its tables (:func:`figure4_points`, :func:`figure3_curve`) are keyed by what made them
(:mod:`dartlib.experiments.keyed_tables`): a notebook run again over current tables computes
nothing. Its figures: Figure 4 (:func:`show_figure4`) and Figure 3 (:func:`show_figure3`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import nn

from dartlib.analysis.deviation import batch_deviation_table
from dartlib.data import load, protocols
from dartlib.experiments.keyed_tables import keyed_table, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup
from dartlib.models.evaluation import evaluated_on, logits_accuracy, stream_logits
from dartlib.paths import results_dir
from dartlib.reporting.figures import HALF_WIDTH, WIDTH, row_colours, save_figure

# Raised when this module's code changes what its tables hold (their stored copies go stale).
DEVIATION_REVISION = 1
FIGURE4_CORRUPTION = "gaussian_noise"  # Figure 4's stream (the paper's CIFAR-10C-imb, Gaussian noise)


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
                             "accuracy": logits_accuracy(logits, ds.labels, order, batch_size=batch_size, refiner=ref)})
    return pd.DataFrame(rows).groupby(["method", "rho"], as_index=False)["accuracy"].mean()


def figure4_points(*, settings: Settings, setup: SourceSetup) -> pd.DataFrame:
    """``results/<profile>/prediction_deviation.csv``: :func:`deviation_over_irs` of the profile's
    ``deviation_irs`` on :data:`FIGURE4_CORRUPTION`, computed only where the stored table was not
    made from the same source model, test set and settings."""
    dataset, severity = settings.test.corrupted_dataset, settings.test.severity
    values = (dataset, severity, list(settings.deviation.irs), settings.test.batch_size, settings.seed)
    inputs = study_inputs("figure4", revision=DEVIATION_REVISION, values=values, models=(setup.model,),
                          sets=((dataset, FIGURE4_CORRUPTION, severity),))
    return keyed_table(results_dir(settings.profile) / "prediction_deviation.csv", inputs=inputs, float_format="%.10g",
                       compute=lambda: deviation_over_irs(setup.frozen, dataset=dataset, corruption=FIGURE4_CORRUPTION,
                                                          severity=severity, irs=settings.deviation.irs,
                                                          batch_size=settings.test.batch_size, seed=settings.seed))


def figure3_curve(*, settings: Settings, setup: SourceSetup, refiner) -> pd.DataFrame:
    """``results/<profile>/accuracy_vs_rho.csv``: :func:`accuracy_against_rho` over the profile's
    ``fig3_corruptions`` and ``rho_grid`` with ``refiner``, computed only where the stored table was
    not made from the same source model, refiner, test sets and settings."""
    dataset, severity = settings.test.corrupted_dataset, settings.test.severity
    corruptions = list(settings.deviation.fig3_corruptions)
    values = (dataset, severity, corruptions, list(settings.deviation.rho_grid), settings.test.batch_size, settings.seed)
    inputs = study_inputs("figure3", revision=DEVIATION_REVISION, values=values, models=(setup.model, refiner),
                          sets=[(dataset, c, severity) for c in corruptions])
    return keyed_table(results_dir(settings.profile) / "accuracy_vs_rho.csv", inputs=inputs, float_format="%.10g",
                       compute=lambda: accuracy_against_rho(
                           frozen=setup.frozen, source=setup.source_statistics_model(), refiner=refiner,
                           dataset=dataset, corruptions=corruptions, severity=severity, rhos=settings.deviation.rho_grid,
                           batch_size=settings.test.batch_size, seed=settings.seed))


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


def show_figure3(curve: pd.DataFrame, *, title: str, profile: str, images_per_class: int = 1000) -> plt.Figure:
    """Accuracy of each method against rho (log scale), in the paper's colours (Figure 3's
    caption: BNAdapt orange, DART green; NoAdapt blue as in Figure 2), each point ± 2 SE, beside
    the paper's Table 1 points at rho = 1, 10 and 100 (ResNet-26, CIFAR-10-C). The SE is an upper
    bound (:mod:`dartlib.analysis.noise` without per-image outcomes: the curve keeps none):
    sqrt(p (100 - p) / n) at the mean accuracy p over the corruptions, n the long-tailed stream's
    length at that rho from ``images_per_class`` test images per class (CIFAR-10's and
    Fashion-MNIST's 1,000), which bounds the mean of the corruptions' binomial SEs."""
    from dartlib.data.protocols import long_tailed_counts
    from dartlib.reporting.paper import load_table
    from dartlib.studies.table1 import DATASET_NAMES

    colours = row_colours([FIGURE3_LABELS.get(m, m) for m in curve.method.unique()])
    paper = load_table("table1_main")
    paper = paper[(paper.dataset == "cifar10c") & (paper.corruption == "mean") & (paper["shift"] == "lt")]
    paper_rows = {"noadapt": ("noadapt", "none"), "bnadapt": ("bnadapt", "none"), "bnadapt+dart": ("bnadapt", "dart")}
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 3.8))
    for method, group in curve.groupby("method", sort=False):
        label = FIGURE3_LABELS.get(method, method)
        n = np.array([long_tailed_counts(10, n_max=images_per_class, rho=float(r)).sum() for r in group.rho])
        p = group.accuracy.to_numpy(float)
        ax.errorbar(group.rho, p, yerr=2 * np.sqrt(p * (100.0 - p) / n), marker="o", markersize=3, capsize=2,
                    label=f"{label} (ours)", color=colours[label])
        if method in paper_rows:
            m, r = paper_rows[method]
            at = paper[(paper.method == m) & (paper.refiner == r)].sort_values("shift_param")
            ax.plot(at.shift_param, at.accuracy, ls="none", marker="D", markersize=6, markerfacecolor="none",
                    color=colours[label], label=f"{label} (the paper)")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:g}")  # 1, 10, 100 rather than powers of ten
    ax.set_xlabel("imbalance ratio ρ (log scale)")
    ax.set_ylabel("accuracy (%, ± 2 SE, upper bound)")
    for name, words in DATASET_NAMES.items():
        title = title.replace(name, words)
    ax.set_title(f"Figure 3: accuracy against ρ\n{title}")
    ax.legend(ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
    save_figure(fig, profile=profile, name="fig3_accuracy_vs_rho")
    plt.show()
    return fig
