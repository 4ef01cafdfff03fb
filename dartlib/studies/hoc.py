"""Appendix E's analysis: HOC (Zhu et al., 2021) run on the BN-adapted features of
one long-tailed stream, its transition matrix T beside the true one (the BNAdapt confusion matrix).

Its tables (:func:`hoc_analysis`: the summary, the t-SNE points, both T) are keyed by what made
them (:mod:`dartlib.experiments.keyed_tables`): a notebook run again over current tables computes
nothing. Its figures: the t-SNE of the features (:func:`plot_tsne`) and T beside the true one
(:func:`plot_transitions`). :func:`run` makes the analysis (the training stage first), :func:`report`
its summary and figures."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from matplotlib.lines import Line2D
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.manifold import TSNE
import torch

from dartlib.analysis.confusion import matrices_from_rows, matrix_rows
from dartlib.analysis.hoc import hoc_estimate, nearest_neighbours, transition_matrix
from dartlib.data.dataset import CIFAR10_CLASSES, FMNIST_CLASSES
from dartlib.experiments.keyed_tables import keyed_table, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup, prepare_source
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


def bnadapt_feature_stream(settings: Settings, *, setup: SourceSetup | None = None) -> FeatureStream:
    """The BN-adapted source model (``setup``'s, else the profile's) on the ``hoc_corruption``
    stream under LT ``hoc_rho``."""
    setup = setup or prepare_source(settings=settings, with_train=False)
    (stream,) = bnadapt_streams(setup.model, dataset=settings.test.corrupted_dataset,
                                corruptions=[settings.hoc.corruption], shifts={"lt": [settings.hoc.rho]},
                                severity=settings.test.severity, seed=settings.seed,
                                batch_size=settings.test.batch_size)
    logits = torch.cat(stream.logits)
    return FeatureStream(features=torch.cat(stream.features), predicted=logits.argmax(1).numpy(), true=stream.labels,
                         k=int(logits.shape[1]))


def hoc_versus_true(*, stream: FeatureStream, settings: Settings) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """How often a sample's nearest neighbour (cosine similarity) shares its true class and its
    prediction, and how far HOC's T and the true T are from the identity (over the classes present);
    returns that summary (one ``value`` per statistic), the true T and HOC's T."""
    true, predicted, k = stream.true, stream.predicted, stream.k
    nn = nearest_neighbours(stream.features, k=1)[:, 0].numpy()
    t_true = transition_matrix(true, predicted, k)
    t_hoc, _ = hoc_estimate(stream.features, predicted, k, steps=settings.hoc.steps, seed=settings.seed)
    present = np.bincount(true, minlength=k) > 0
    summary = pd.DataFrame({
        "nearest neighbour shares the true class (%)": [100 * (true[nn] == true).mean()],
        "nearest neighbour shares the prediction (%)": [100 * (predicted[nn] == predicted).mean()],
        "mean diagonal, true T": [t_true.diagonal()[present].mean()],
        "mean diagonal, HOC's T": [t_hoc.diagonal()[present].mean()],
        "max |T - I|, true T": [np.abs(t_true - np.eye(k))[present].max()],
        "max |T - I|, HOC's T": [np.abs(t_hoc - np.eye(k))[present].max()],
    }).T.rename(columns={0: "value"})
    return summary, t_true, t_hoc


def tsne_points(*, stream: FeatureStream, settings: Settings) -> pd.DataFrame:
    """A 2-D t-SNE of ``tsne_points`` random samples of the stream (0: all): x, y, true class and
    BNAdapt's prediction per point."""
    seed, points = settings.seed, settings.hoc.tsne_points
    rng = np.random.default_rng(seed)
    shown = np.sort(rng.permutation(len(stream.true))[:points]) if points else np.arange(len(stream.true))
    emb = TSNE(n_components=2, init="pca", perplexity=30, random_state=seed).fit_transform(
        stream.features[shown].numpy())
    return pd.DataFrame({"x": emb[:, 0], "y": emb[:, 1], "true": stream.true[shown], "predicted": stream.predicted[shown]})


# Raised when this module's code changes what its tables hold (their stored copies go stale).
HOC_REVISION = 1


@dataclass(frozen=True)
class HocAnalysis:
    """Appendix E's numbers for one stream: the summary of :func:`hoc_versus_true`, the t-SNE
    points, the true and HOC's T, the stream's length and BNAdapt's accuracy on it."""

    summary: pd.DataFrame
    tsne: pd.DataFrame
    t_true: np.ndarray
    t_hoc: np.ndarray
    images: int
    accuracy: float

    def describe(self, settings: Settings) -> str:
        """The stream and BNAdapt's accuracy on it."""
        s = settings
        return (f"profile={s.profile}: {s.source.arch}, {s.test.corrupted_dataset}/{s.hoc.corruption} LT "
                f"rho={s.hoc.rho:g}: {self.images} images, BNAdapt accuracy {self.accuracy:.1f}%")


def hoc_analysis(*, settings: Settings) -> HocAnalysis:
    """:func:`hoc_versus_true` and :func:`tsne_points` of :func:`bnadapt_feature_stream`, kept in
    ``results/<profile>/hoc.csv``, ``hoc_tsne.csv`` and ``hoc_transitions.csv`` and computed only
    where they were not made from the same source model, test set and settings."""
    import sklearn

    setup = prepare_source(settings=settings, with_train=False)
    dataset, corruption, severity = settings.test.corrupted_dataset, settings.hoc.corruption, settings.test.severity
    values = (dataset, corruption, severity, settings.hoc.rho, settings.test.batch_size, settings.seed,
              settings.hoc.steps, settings.hoc.tsne_points, f"sklearn {sklearn.__version__}")
    inputs = study_inputs("hoc", revision=HOC_REVISION, values=values, models=(setup.model,),
                          sets=((dataset, corruption, severity),))

    @functools.cache
    def computed() -> dict[str, pd.DataFrame]:
        stream = bnadapt_feature_stream(settings, setup=setup)
        summary, t_true, t_hoc = hoc_versus_true(stream=stream, settings=settings)
        stats = pd.concat([summary, pd.DataFrame({"value": [len(stream.true), 100 * (stream.predicted == stream.true).mean()]},
                                                 index=["images", "BNAdapt accuracy (%)"])])
        transitions = pd.concat([matrix_rows(t, labels={"matrix": name}) for name, t in (("true", t_true), ("hoc", t_hoc))],
                                ignore_index=True)
        return {"hoc": stats.rename_axis("statistic").reset_index(), "hoc_tsne": tsne_points(stream=stream, settings=settings),
                "hoc_transitions": transitions}

    tables = {name: keyed_table(results_dir(settings.profile) / f"{name}.csv", inputs=inputs, float_format="%.10g",
                                compute=lambda name=name: computed()[name])
              for name in ("hoc", "hoc_tsne", "hoc_transitions")}
    stats = tables["hoc"].set_index("statistic")
    stats.index.name = None
    matrices = matrices_from_rows(tables["hoc_transitions"], by="matrix")
    return HocAnalysis(summary=stats.drop(index=["images", "BNAdapt accuracy (%)"]), tsne=tables["hoc_tsne"],
                       t_true=matrices["true"], t_hoc=matrices["hoc"], images=int(stats.value["images"]),
                       accuracy=float(stats.value["BNAdapt accuracy (%)"]))


def plot_tsne(*, analysis: HocAnalysis, settings: Settings) -> plt.Figure:
    """Two t-SNE maps (:func:`tsne_points`), coloured by the true class and by BNAdapt's
    prediction, one legend of the class colours; saved as ``figures/<profile>/hoc_tsne``."""
    points, k = analysis.tsne, len(analysis.t_true)
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.4))
    colours = plt.get_cmap("tab10" if k <= 10 else "tab20")
    for ax, column, name in ((axes[0], "true", "true class"), (axes[1], "predicted", "BNAdapt prediction")):
        ax.scatter(points.x, points.y, c=points[column], cmap=colours, s=6, vmin=0, vmax=colours.N - 1)
        ax.set_title(f"coloured by {name}")
        ax.set_xticks([])
        ax.set_yticks([])
    known = {"cifar10": CIFAR10_CLASSES, "fmnist": FMNIST_CLASSES}.get(settings.source.dataset)
    names = list(known) if known and len(known) == k else [str(c) for c in range(k)]
    handles = [Line2D([], [], ls="none", marker="o", color=colours(c), label=names[c]) for c in range(k)]
    fig.legend(handles=handles, title="class", loc="outside right center")
    fig.suptitle(f"BN-adapted features, {settings.hoc.corruption}, LT rho={settings.hoc.rho:g} "
                 f"({settings.profile} profile, {len(points)} points)")
    save_figure(fig, profile=settings.profile, name="hoc_tsne")
    return fig


def plot_transitions(*, analysis: HocAnalysis, settings: Settings) -> plt.Figure:
    """The true T beside HOC's; saved as ``figures/<profile>/hoc_transition``."""
    t_true, t_hoc = analysis.t_true, analysis.t_hoc
    k = t_true.shape[0]
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.2))
    confusion_heatmap(axes[0], t_true, title="true T (BNAdapt confusion)", annotate=k <= 10)
    confusion_heatmap(axes[1], t_hoc, title="T estimated by HOC", annotate=k <= 10)
    save_figure(fig, profile=settings.profile, name="hoc_transition")
    return fig


def run(*, settings: Settings) -> HocAnalysis:
    """The training stage (the source model and test sets, made where absent), then :func:`hoc_analysis`."""
    from dartlib.experiments.training_stage import train_source_inputs

    train_source_inputs(settings=settings)
    return hoc_analysis(settings=settings)


@dataclass(frozen=True)
class HocReport:
    """Appendix E's summary and figures from one analysis (:func:`report`)."""

    settings: Settings
    analysis: HocAnalysis

    def summary(self) -> pd.DataFrame:
        """HOC's estimate against the true T (:func:`hoc_versus_true`'s summary)."""
        return self.analysis.summary

    def tsne_figure(self) -> plt.Figure:
        """:func:`plot_tsne` of the analysis."""
        return plot_tsne(analysis=self.analysis, settings=self.settings)

    def transitions_figure(self) -> plt.Figure:
        """:func:`plot_transitions` of the analysis."""
        return plot_transitions(analysis=self.analysis, settings=self.settings)


def report(*, settings: Settings, analysis: HocAnalysis) -> HocReport:
    """Notebook 13's summary and figures from ``analysis`` (:func:`run`)."""
    return HocReport(settings=settings, analysis=analysis)
