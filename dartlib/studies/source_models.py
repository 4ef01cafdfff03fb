"""The source models (Section 5.1, Appendix A): their training curves, and NoAdapt's accuracy per
corruption beside the paper's (Table 1's NoAdapt row). Training itself is
:func:`dartlib.models.training.train_source`, the models' files :mod:`dartlib.models.checkpoints`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from torch import nn

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.prepare import ensure_corrupted
from dartlib.experiments.keyed_tables import keyed_table, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.models.evaluation import corruption_accuracy
from dartlib.paths import results_dir
from dartlib.reporting.figures import WIDTH, save_figure
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


# Raised when this module's code changes what its table holds (the stored copy goes stale).
SOURCE_MODELS_REVISION = 1


def noadapt_results(*, settings: Settings, model: nn.Module) -> pd.DataFrame:
    """``results/<profile>/source_models.csv``: NoAdapt's accuracy on every corruption of the
    profile's ``corrupted_dataset`` (generated if absent) at its ``severity``, the first
    ``eval_limit`` images (0: all), computed only where the stored table was not made from the same
    model, test sets and settings (:mod:`dartlib.experiments.keyed_tables`)."""
    dataset, severity, limit = settings.test.corrupted_dataset, settings.test.severity, settings.source.eval_limit
    ensure_corrupted(dataset, severities=[severity])
    inputs = study_inputs("noadapt", revision=SOURCE_MODELS_REVISION, values=(dataset, severity, limit, settings.seed),
                          models=(model,), sets=[(dataset, c, severity) for c in CORRUPTIONS])
    return keyed_table(results_dir(settings.profile) / "source_models.csv", inputs=inputs, float_format="%.10g",
                       compute=lambda: corruption_accuracy(model, dataset=dataset, experiment="source_models",
                                                           severity=severity, seed=settings.seed,
                                                           limit=limit or None, progress=False))


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
