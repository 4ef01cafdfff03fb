"""BNAdapt with and without a trained g_phi on long-tailed test streams (notebook 04, Section 3):
the streams' BN-adapted logits, computed once, and the accuracy of each refiner on them.

Its tables (:func:`accuracy_table`, :func:`stream_summary`) are keyed by what made them
(:mod:`dartlib.experiments.keyed_tables`): a notebook run again over current tables computes nothing.
Its figures and table: g_phi's training curves, w and b, the pseudo-label distributions
(Appendices A, D, G) and the accuracies beside Table 1 (:func:`print_beside_table1`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import nn
import torch

from dartlib.dart.refiner import batch_statistics
from dartlib.data import load, protocols
from dartlib.experiments.keyed_tables import keyed_table, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup
from dartlib.models.evaluation import evaluated_on, logits_accuracy, stream_logits
from dartlib.paths import results_dir
from dartlib.reporting.figures import WIDTH, HeatScale, confusion_heatmap, save_figure
from dartlib.reporting.paper import load_table

# g_phi's W and b on one fixed range, so that panels of different alpha and rho compare by colour
WEIGHTS = HeatScale(vmin=-1.5, vmax=1.5, cmap="vlag", center=0.0)

Stream = tuple[np.ndarray, np.ndarray, list[torch.Tensor]]  # labels, order, logits per batch


def lt_streams(frozen: nn.Module, *, dataset: str, corruptions: Sequence[str], rhos: Sequence[float], severity: int,
               batch_size: int, seed: int) -> dict[tuple[str, float], Stream]:
    """The LT stream of every (corruption, rho) and the BN-adapted logits of its batches."""
    frozen, device = evaluated_on(frozen, None)  # one device copy for every stream
    streams = {}
    for corruption in corruptions:
        ds = load(dataset, corruption=corruption, severity=severity)
        for rho in rhos:
            order = protocols.long_tailed(ds.labels, rho=rho, seed=seed)
            logits = stream_logits(frozen, ds.images, order, batch_size=batch_size, device=device)
            streams[(corruption, rho)] = (ds.labels, order, logits)
    return streams


def refiner_accuracy(streams: Mapping[tuple[str, float], Stream], refiners: Mapping[str, object], *, dataset: str,
                     severity: int, batch_size: int, seed: int) -> pd.DataFrame:
    """One results row per (stream, refiner): BNAdapt's accuracy with the refiner (None: without)."""
    return pd.DataFrame([
        {"experiment": "intermediate_training", "dataset": dataset, "shift": "lt", "shift_param": rho,
         "corruption": corruption, "severity": severity, "method": "bnadapt", "refiner": name,
         "seed": seed, "n": len(order),
         "accuracy": logits_accuracy(logits, labels, order, batch_size=batch_size, refiner=ref)}
        for (corruption, rho), (labels, order, logits) in streams.items() for name, ref in refiners.items()])


# Raised when this module's code changes what its tables hold (their stored copies go stale).
INTERMEDIATE_STUDY_REVISION = 1


def streams_once(*, settings: Settings, setup: SourceSetup) -> Callable[[], dict[tuple[str, float], Stream]]:
    """:func:`lt_streams` of the profile's ``eval_corruptions`` and ``lt_rhos``, computed at the
    first call only (a notebook whose tables are current never calls it)."""
    return functools.cache(lambda: lt_streams(setup.frozen, dataset=settings.test.corrupted_dataset,
                                              corruptions=settings.intermediate.corruptions, rhos=settings.test.lt_rhos,
                                              severity=settings.test.severity, batch_size=settings.test.batch_size,
                                              seed=settings.seed))


def _inputs(name: str, *, settings: Settings, setup: SourceSetup, refiners: Mapping[str, object],
            extra: Sequence[object] = ()) -> str:
    dataset, severity = settings.test.corrupted_dataset, settings.test.severity
    corruptions = list(settings.intermediate.corruptions)
    values = (dataset, severity, corruptions, list(settings.test.lt_rhos), settings.test.batch_size,
              settings.seed, list(refiners), *extra)
    return study_inputs(name, revision=INTERMEDIATE_STUDY_REVISION, values=values,
                        models=(setup.model, *(r for r in refiners.values() if r is not None)),
                        sets=[(dataset, c, severity) for c in corruptions])


def accuracy_table(*, settings: Settings, setup: SourceSetup, refiners: Mapping[str, object],
                   streams: Callable[[], Mapping[tuple[str, float], Stream]]) -> pd.DataFrame:
    """``results/<profile>/intermediate_training.csv``: :func:`refiner_accuracy` of ``refiners``
    (name -> refiner, None: BNAdapt alone) on ``streams()``, computed only where the stored table was
    not made from the same source model, refiners, test sets and settings."""
    inputs = _inputs("intermediate-accuracy", settings=settings, setup=setup, refiners=refiners)
    return keyed_table(results_dir(settings.profile) / "intermediate_training.csv", inputs=inputs, float_format="%.10g",
                       compute=lambda: refiner_accuracy(streams(), refiners, dataset=settings.test.corrupted_dataset,
                                                        severity=settings.test.severity,
                                                        batch_size=settings.test.batch_size, seed=settings.seed))


def stream_summary(*, settings: Settings, setup: SourceSetup, refiner, corruption: str,
                   streams: Callable[[], Mapping[tuple[str, float], Stream]]) -> pd.DataFrame:
    """``results/<profile>/intermediate_training_streams.csv``: per LT stream of ``corruption``
    (rho) and class, the true class share, BNAdapt's and BNAdapt+DART's mean softmax (``refiner``),
    and the pooled stream's (p_bar, d) that g_phi reads (Appendices D and G), computed only where
    the stored table was not made from the same inputs."""
    def compute() -> pd.DataFrame:
        rows = []
        for rho in settings.test.lt_rhos:
            labels, order, logits = streams()[(corruption, rho)]
            k = logits[0].shape[1]
            p_bar, d = batch_statistics(torch.cat(logits))
            with torch.no_grad():
                refined = torch.cat([refiner(l, l).softmax(1) for l in logits]).mean(0).numpy()
            rows.append(pd.DataFrame({
                "rho": float(rho), "class": np.arange(k), "truth": np.bincount(labels[order], minlength=k) / len(order),
                "bnadapt": torch.cat([l.softmax(1) for l in logits]).mean(0).numpy(), "dart": refined,
                "p_bar": p_bar.numpy(), "d": float(d)}))
        return pd.concat(rows, ignore_index=True)

    inputs = _inputs("intermediate-streams", settings=settings, setup=setup, refiners={"dart": refiner},
                     extra=(corruption,))
    return keyed_table(results_dir(settings.profile) / "intermediate_training_streams.csv", inputs=inputs,
                       float_format="%.10g", compute=compute)


def accuracy_by_rho(results: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy per refiner (rows) and rho (columns ``rho=...``)."""
    table = results.pivot_table(index="refiner", columns="shift_param", values="accuracy", aggfunc="mean")
    table.columns = [f"rho={c:g}" for c in table.columns]
    return table


def show_refiner_training_curves(logs: Mapping[str, list[dict]], *, epochs: int, profile: str) -> None:
    """L_imb (Eq. 1) and L_bal (Eq. 2) per step of each named training log, moving averages over
    a 50th of the first log's steps."""
    curves = {name: pd.DataFrame(log) for name, log in logs.items()}
    window = max(1, len(next(iter(curves.values()))) // 50)
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.3))
    for name, frame in curves.items():
        axes[0].plot(frame.step, frame.loss_imb.rolling(window).mean(), label=name)
        axes[1].plot(frame.step, frame.loss_bal.rolling(window).mean(), label=name)
    axes[0].set_ylabel("L_imb (Dirichlet batches)")
    axes[1].set_ylabel("L_bal (i.i.d. batches)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend()
    fig.suptitle(f"intermediate training, {epochs} epochs ({profile}; moving average over {window} steps)")
    save_figure(fig, profile=profile, name="dart_training_curves")
    plt.show()


def show_w_b(refiners: Mapping[float, object], summary: pd.DataFrame, *, profile: str) -> None:
    """Appendix D: the W and b that g_phi trained with each alpha outputs for p_bar and d of the
    whole (pooled) LT stream of Gaussian noise at each rho (``summary``: :func:`stream_summary`)."""
    rhos = list(summary.rho.unique())
    # b is a column of K values: a quarter of W's width keeps it readable beside the K x K matrix
    fig, axes = plt.subplots(len(refiners), 2 * len(rhos), figsize=(WIDTH, 0.8 * WIDTH / len(rhos) * len(refiners)),
                             gridspec_kw={"width_ratios": [10, 2.5] * len(rhos)}, squeeze=False)
    for r, (a, refiner) in enumerate(refiners.items()):
        for c, rho in enumerate(rhos):
            stream = summary[summary.rho == rho]
            p_bar = torch.tensor(stream.p_bar.to_numpy(), dtype=torch.float32)
            d = torch.tensor(float(stream.d.iloc[0]), dtype=torch.float32)
            with torch.no_grad():
                w, b = refiner.module(p_bar, d)
            confusion_heatmap(axes[r, 2 * c], w.numpy(), scale=WEIGHTS,
                              annotate=False, title=f"W, alpha={a:g}, rho={rho:g}")
            confusion_heatmap(axes[r, 2 * c + 1], b.numpy()[:, None], scale=WEIGHTS,
                              annotate=False, title="b", square=False)
            axes[r, 2 * c + 1].set_xticks([])
            axes[r, 2 * c + 1].set_yticks([])
            for ax in axes[r, 2 * c:2 * c + 2]:
                ax.set_xlabel("")
                ax.set_ylabel("")
    scale = plt.cm.ScalarMappable(norm=plt.Normalize(vmin=-1.5, vmax=1.5), cmap="vlag")
    fig.colorbar(scale, ax=axes.ravel().tolist(), shrink=0.5, label="entry of W and b")
    save_figure(fig, profile=profile, name="dart_w_b_gaussian_noise")
    plt.show()


def show_pseudo_label_distribution(summary: pd.DataFrame, *, profile: str) -> None:
    """Appendix G: the mean softmax of BNAdapt and BNAdapt+DART over each LT stream beside its
    true class distribution (:func:`stream_summary`)."""
    rhos = list(summary.rho.unique())
    fig, axes = plt.subplots(1, len(rhos), figsize=(WIDTH, 3.2), sharey=True, squeeze=False)
    for ax, rho in zip(axes[0], rhos):
        stream = summary[summary.rho == rho]
        xs = stream["class"].to_numpy()
        for shift, column, label in ((-0.27, "truth", "ground truth"), (0.0, "bnadapt", "BNAdapt"),
                                     (0.27, "dart", "BNAdapt+DART")):
            ax.bar(xs + shift, stream[column].to_numpy(), 0.27, label=label)
        ax.set_title(f"rho = {rho:g}")
        ax.set_xlabel("class")
        ax.set_xticks(xs)
    axes[0, 0].set_ylabel("mean pseudo-label probability")
    axes[0, 0].legend()
    save_figure(fig, profile=profile, name="dart_pseudo_label_distribution")
    plt.show()


def print_beside_table1(table: pd.DataFrame, *, corrupted_dataset: str) -> None:
    """BNAdapt with and without DART (rows ``none``, ``dart`` of ``table``) beside the paper's
    Table 1 on CIFAR-10-C; elsewhere a line saying the paper has no such numbers."""
    if corrupted_dataset != "cifar10c":
        print(f"the paper has no {corrupted_dataset} numbers; its CIFAR-10C-LT values appear under the cpu and paper profiles")
        return
    paper = load_table("table1_main")
    paper = paper[(paper.dataset == "cifar10c") & (paper.method == "bnadapt")]
    paper = paper.pivot_table(index="refiner", columns="shift_param", values="accuracy")
    paper.columns = [f"rho={c:g}" for c in paper.columns]
    side = pd.concat({"ours": table.loc[["none", "dart"]], "paper": paper}, axis=1)
    print("beside the paper's Table 1 (ResNet-26, official CIFAR-10-C, 4 seeds):")
    print(side.round(1).to_string())
