"""Notebook 13's figures (Appendix E): t-SNE maps of the BN-adapted features coloured by true and
predicted class, and HOC's transition matrix beside the true one."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
import numpy as np
from sklearn.manifold import TSNE

from dartlib.analysis.hoc_study import FeatureStream
from dartlib.data.sources import CIFAR10_CLASSES, FMNIST_CLASSES
from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import WIDTH, confusion_heatmap, save_figure


def plot_tsne(*, stream: FeatureStream, settings: Settings) -> plt.Figure:
    """Two t-SNE maps of ``tsne_points`` random samples (0: all), coloured by the true class and by
    BNAdapt's prediction, one legend of the class colours; saved as ``figures/<profile>/hoc_tsne``."""
    seed, points = settings["seed"], settings["tsne_points"]
    true, predicted = stream.true, stream.predicted
    rng = np.random.default_rng(seed)
    shown = np.sort(rng.permutation(len(true))[:points]) if points else np.arange(len(true))
    emb = TSNE(n_components=2, init="pca", perplexity=30, random_state=seed).fit_transform(
        stream.features[shown].numpy())
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.4))
    colours = plt.get_cmap("tab10" if stream.k <= 10 else "tab20")
    for ax, labels, name in ((axes[0], true, "true class"), (axes[1], predicted, "BNAdapt prediction")):
        ax.scatter(emb[:, 0], emb[:, 1], c=labels[shown], cmap=colours, s=6, vmin=0, vmax=colours.N - 1)
        ax.set_title(f"coloured by {name}")
        ax.set_xticks([])
        ax.set_yticks([])
    known = {"cifar10": CIFAR10_CLASSES, "fmnist": FMNIST_CLASSES}.get(settings.get("source_dataset"))
    names = list(known) if known and len(known) == stream.k else [str(c) for c in range(stream.k)]
    handles = [Line2D([], [], ls="none", marker="o", color=colours(c), label=names[c]) for c in range(stream.k)]
    fig.legend(handles=handles, title="class", loc="outside right center")
    fig.suptitle(f"BN-adapted features, {settings['hoc_corruption']}, LT rho={settings['hoc_rho']:g} "
                 f"({settings.profile} profile, {len(shown)} points)")
    save_figure(fig, profile=settings.profile, name="hoc_tsne")
    return fig


def plot_transitions(*, t_true: np.ndarray, t_hoc: np.ndarray, settings: Settings) -> plt.Figure:
    """The true T beside HOC's; saved as ``figures/<profile>/hoc_transition``."""
    k = t_true.shape[0]
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.2))
    confusion_heatmap(axes[0], t_true, vmin=0, vmax=1, title="true T (BNAdapt confusion)", annotate=k <= 10)
    confusion_heatmap(axes[1], t_hoc, vmin=0, vmax=1, title="T estimated by HOC", annotate=k <= 10)
    save_figure(fig, profile=settings.profile, name="hoc_transition")
    return fig
