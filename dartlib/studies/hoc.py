"""Appendix E's analysis: HOC (Zhu et al., 2021) run on the BN-adapted features of
one long-tailed stream, its transition matrix T beside the true one (the BNAdapt confusion matrix).

Its figures: the t-SNE of the features (:func:`plot_tsne`) and T beside the true one
(:func:`plot_transitions`)."""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.lines import Line2D
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.manifold import TSNE
import torch

from dartlib.analysis.hoc import hoc_estimate, nearest_neighbours, transition_matrix
from dartlib.data.sources import CIFAR10_CLASSES, FMNIST_CLASSES
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import prepare_source
from dartlib.paths import results_dir
from dartlib.reporting.figures import WIDTH, confusion_heatmap, save_figure
from dartlib.studies.ablations import bnadapt_streams


@dataclass(frozen=True)
class FeatureStream:
    """f_theta0_bar's features, its predictions and the true labels over one stream, K classes."""

    features: torch.Tensor
    predicted: np.ndarray
    true: np.ndarray
    k: int

    def describe(self, settings: Settings) -> str:
        """The stream and BNAdapt's accuracy on it."""
        s = settings
        return (f"profile={s.profile}: {s['source_arch']}, {s['corrupted_dataset']}/{s['hoc_corruption']} LT "
                f"rho={s['hoc_rho']:g}: {len(self.true)} images, "
                f"BNAdapt accuracy {100 * (self.predicted == self.true).mean():.1f}%")


def bnadapt_feature_stream(settings: Settings) -> FeatureStream:
    """The BN-adapted source model on the ``hoc_corruption`` stream under LT ``hoc_rho``."""
    setup = prepare_source(settings=settings, with_train=False)
    (stream,) = bnadapt_streams(setup.model, dataset=settings["corrupted_dataset"],
                                corruptions=[settings["hoc_corruption"]], shifts={"lt": [settings["hoc_rho"]]},
                                severity=settings["severity"], seed=settings["seed"],
                                batch_size=settings["test_batch_size"])
    logits = torch.cat(stream.logits)
    return FeatureStream(features=torch.cat(stream.features), predicted=logits.argmax(1).numpy(), true=stream.labels,
                         k=int(logits.shape[1]))


def hoc_versus_true(*, stream: FeatureStream, settings: Settings) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """How often a sample's nearest neighbour (cosine similarity) shares its true class and its
    prediction, and how far HOC's T and the true T are from the identity (over the classes present),
    written to ``results/<profile>/hoc.csv``; returns that summary, the true T and HOC's T."""
    true, predicted, k = stream.true, stream.predicted, stream.k
    nn = nearest_neighbours(stream.features, k=1)[:, 0].numpy()
    t_true = transition_matrix(true, predicted, k)
    t_hoc, _ = hoc_estimate(stream.features, predicted, k, steps=settings["hoc_steps"], seed=settings["seed"])
    present = np.bincount(true, minlength=k) > 0
    summary = pd.DataFrame({
        "nearest neighbour shares the true class (%)": [100 * (true[nn] == true).mean()],
        "nearest neighbour shares the prediction (%)": [100 * (predicted[nn] == predicted).mean()],
        "mean diagonal, true T": [t_true.diagonal()[present].mean()],
        "mean diagonal, HOC's T": [t_hoc.diagonal()[present].mean()],
        "max |T - I|, true T": [np.abs(t_true - np.eye(k))[present].max()],
        "max |T - I|, HOC's T": [np.abs(t_hoc - np.eye(k))[present].max()],
    }).T.rename(columns={0: "value"})
    summary.to_csv(results_dir(settings.profile) / "hoc.csv", float_format="%.4f")
    return summary, t_true, t_hoc


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
    confusion_heatmap(axes[0], t_true, title="true T (BNAdapt confusion)", annotate=k <= 10)
    confusion_heatmap(axes[1], t_hoc, title="T estimated by HOC", annotate=k <= 10)
    save_figure(fig, profile=settings.profile, name="hoc_transition")
    return fig
