"""BNAdapt with and without a trained g_phi on long-tailed test streams (notebook 04, Section 3):
the streams' BN-adapted logits, computed once, and the accuracy of each refiner on them.

Its figures and table: g_phi's training curves, w and b, the pseudo-label distributions
(Appendices A, D, G) and the accuracies beside Table 1 (:func:`print_beside_table1`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import nn
import torch

from dartlib.dart.refiner import batch_statistics
from dartlib.data import load, protocols
from dartlib.models.evaluation import evaluated_on, stream_accuracy, stream_logits
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
         "accuracy": stream_accuracy(logits, labels, order, batch_size=batch_size, refiner=ref)}
        for (corruption, rho), (labels, order, logits) in streams.items() for name, ref in refiners.items()])


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


def show_w_b(refiners: Mapping[float, object], streams: Mapping[tuple[str, float], Stream], *, rhos: Sequence[float],
             corruption: str, profile: str) -> None:
    """Appendix D: the W and b that g_phi trained with each alpha outputs for p_bar and d of the
    whole (pooled) LT stream of ``corruption`` at each rho."""
    # b is a column of K values: a quarter of W's width keeps it readable beside the K x K matrix
    fig, axes = plt.subplots(len(refiners), 2 * len(rhos), figsize=(WIDTH, 0.8 * WIDTH / len(rhos) * len(refiners)),
                             gridspec_kw={"width_ratios": [10, 2.5] * len(rhos)}, squeeze=False)
    for r, (a, refiner) in enumerate(refiners.items()):
        for c, rho in enumerate(rhos):
            p_bar, d = batch_statistics(torch.cat(streams[(corruption, rho)][2]))
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


def show_pseudo_label_distribution(refiner, streams: Mapping[tuple[str, float], Stream], *, rhos: Sequence[float],
                                   corruption: str, k: int, profile: str) -> None:
    """Appendix G: the mean softmax of BNAdapt and BNAdapt+DART over each LT stream of
    ``corruption`` beside its true class distribution."""
    fig, axes = plt.subplots(1, len(rhos), figsize=(WIDTH, 3.2), sharey=True, squeeze=False)
    for ax, rho in zip(axes[0], rhos):
        labels, order, logits = streams[(corruption, rho)]
        truth = np.bincount(labels[order], minlength=k) / len(order)
        bn = torch.cat([l.softmax(1) for l in logits]).mean(0).numpy()
        refined = torch.cat([refiner(l, l).softmax(1) for l in logits]).mean(0).numpy()
        xs = np.arange(k)
        for shift, values, label in ((-0.27, truth, "ground truth"), (0.0, bn, "BNAdapt"), (0.27, refined, "BNAdapt+DART")):
            ax.bar(xs + shift, values, 0.27, label=label)
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
