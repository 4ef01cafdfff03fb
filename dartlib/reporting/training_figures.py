"""What training shows: the source model's curves and NoAdapt accuracies, and g_phi's intermediate
training (curves, w and b, pseudo-label distributions; Appendices A, D, G)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from dartlib.dart.refiner import batch_statistics
from dartlib.studies.intermediate_training import Stream
from dartlib.reporting.figures import WIDTH, confusion_heatmap, save_figure
from dartlib.reporting.paper import load_table


def show_source_training_curves(history: pd.DataFrame, *, title: str, profile: str) -> None:
    """Training loss, and training and clean test accuracy, per epoch."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.2))
    axes[0].plot(history.epoch, history.train_loss, marker="o")
    axes[0].set_xlabel("epoch")
    axes[0].set_ylabel("training loss")
    axes[1].plot(history.epoch, history.train_acc, marker="o", label="train (augmented)")
    axes[1].plot(history.epoch, history.test_acc, marker="s", label="clean test")
    axes[1].set_xlabel("epoch")
    axes[1].set_ylabel("accuracy (%)")
    axes[1].legend()
    fig.suptitle(title)
    save_figure(fig, profile=profile, name="source_training_curves")
    plt.show()


def noadapt_beside_paper(noadapt: pd.DataFrame, *, corrupted_dataset: str) -> pd.DataFrame:
    """Our NoAdapt accuracy per corruption (``ours``); on CIFAR-10-C also the paper's NoAdapt row
    of the full CIFAR-10C-LT rho = 1 table (``paper``) and ``delta`` = ours - paper."""
    compare = noadapt[["corruption", "accuracy"]].rename(columns={"accuracy": "ours"})
    if corrupted_dataset == "cifar10c":
        paper = load_table("full_cifar10c_lt_rho1")
        paper = paper[(paper.method == "noadapt") & (paper.refiner == "none")][["corruption", "accuracy"]]
        compare = compare.merge(paper.rename(columns={"accuracy": "paper"}), on="corruption", how="left")
        compare["delta"] = compare.ours - compare.paper
    return compare


def show_noadapt_bars(compare: pd.DataFrame, *, corrupted_dataset: str, severity: int, profile: str) -> None:
    """Bars of :func:`noadapt_beside_paper`'s table: ours, and the paper's beside them when present."""
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4))
    with_paper = "paper" in compare
    width = 0.4 if with_paper else 0.8
    x = range(len(compare))
    ax.bar([i - (width / 2 if with_paper else 0) for i in x], compare.ours, width, label=f"ours ({profile})")
    if with_paper:
        ax.bar([i + width / 2 for i in x], compare.paper, width, label="paper (ResNet-26, CIFAR-10-C)")
    ax.set_xticks(list(x))
    ax.set_xticklabels([c.replace("_", " ") for c in compare.corruption], rotation=45, ha="right")
    ax.set_ylabel("NoAdapt accuracy (%)")
    ax.set_title(f"NoAdapt on {corrupted_dataset}, severity {severity}")
    ax.legend()
    save_figure(fig, profile=profile, name="source_noadapt_corruptions")
    plt.show()


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
            confusion_heatmap(axes[r, 2 * c], w.numpy(), vmin=-1.5, vmax=1.5, cmap="vlag", center=0.0,
                              annotate=False, title=f"W, alpha={a:g}, rho={rho:g}")
            confusion_heatmap(axes[r, 2 * c + 1], b.numpy()[:, None], vmin=-1.5, vmax=1.5, cmap="vlag", center=0.0,
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
