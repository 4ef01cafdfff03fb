"""The figures of the paper's analyses: the toy Gaussian model (Section 3.1, Appendix C), the confusion
matrices (Figure 1), prediction deviation (Figures 3 and 4) and HOC (Appendix E)."""

from __future__ import annotations

from collections.abc import Sequence
from sklearn.manifold import TSNE

from matplotlib.lines import Line2D
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.analysis import toy
from dartlib.studies.confusion import ConfusionStudy
from dartlib.studies.hoc import FeatureStream
from dartlib.studies.toy_analysis import ConfusionCheck
from dartlib.data.sources import CIFAR10_CLASSES, FMNIST_CLASSES
from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import HALF_WIDTH, WIDTH, confusion_heatmap, row_colours, save_figure


CLASS_NAMES = ("1", "2", "3", "4")


def plot_illustration(
    ax: plt.Axes, p: float, *, d: float, beta: float, sigma: float, n_points: int, seed: int
) -> None:
    """Appendix C's illustration: mean-centred samples, the Bayes boundaries (the axes), the
    centred means mu'_i, and the regions where class 1 is misclassified (hatched)."""
    rng = np.random.default_rng(seed)
    prior = toy.shifted_prior(p)
    centred = toy.centred_means(p, d=d, beta=beta)
    labels = rng.choice(toy.K_TOY, size=n_points, p=prior)
    x = centred[labels] + sigma * rng.standard_normal((n_points, 2))
    lim_x = 1.15 * np.abs(x[:, 0]).max()
    lim_y = 1.15 * np.abs(x[:, 1]).max()
    # Class 1 -> 2 region (x1 < 0, x2 > 0) and class 1 -> 3 region (x1 > 0, x2 < 0).
    ax.fill_between([-lim_x, 0], 0, lim_y, facecolor="none", edgecolor="tab:red", hatch="///",
                    lw=0, label="class 1 predicted as 2")
    ax.fill_between([0, lim_x], -lim_y, 0, facecolor="none", edgecolor="tab:green", hatch="\\\\\\",
                    lw=0, label="class 1 predicted as 3")
    colors = plt.get_cmap("tab10").colors
    for i in range(toy.K_TOY):
        pts = x[labels == i]
        ax.scatter(pts[:, 0], pts[:, 1], s=4, alpha=0.35, color=colors[i],
                   label=f"class {i + 1} (q={prior[i]:.2f})")
        ax.scatter(*centred[i], marker="X", s=90, color=colors[i], edgecolor="black", zorder=5)
        ax.annotate(f"$\\mu'_{i + 1}$", centred[i], xytext=(6, 6), textcoords="offset points")
    ax.axhline(0, color="black", lw=1)
    ax.axvline(0, color="black", lw=1)
    ax.set_xlim(-lim_x, lim_x)
    ax.set_ylim(-lim_y, lim_y)
    ax.set_xlabel("$x_1$ (after mean centring)")
    ax.set_ylabel("$x_2$ (after mean centring)")
    ax.set_title(f"p = {p}, d = {d}, beta = {beta}, sigma = {sigma}")
    ax.legend(loc="lower left", markerscale=2, framealpha=0.9)


def plot_class1_curves(
    ax: plt.Axes, ps: np.ndarray, *, d: float, beta: float, sigma: float
) -> None:
    """Pr[h(Norm(x)) = j | y = 1] against p for j = 2, 3, 4."""
    matrices = np.stack([toy.confusion_matrix(float(p), d=d, beta=beta, sigma=sigma) for p in ps])
    for j, style in zip((1, 2, 3), ("-", "--", ":")):
        ax.plot(ps, matrices[:, 0, j], style, label=f"j = {j + 1}")
    ax.set_yscale("log")
    ax.set_xlabel("p (test prior of class 1)")
    ax.set_ylabel("Pr[prediction = j | y = 1]")
    ax.set_title(f"d = {d}, beta = {beta}, sigma = {sigma}")
    ax.legend()


def show_confusion_check(check: ConfusionCheck, *, p: float, d: float, beta: float, sigma: float, n: int, profile: str) -> None:
    """The analytic and simulated confusion matrices of a :class:`dartlib.studies.toy_analysis.ConfusionCheck`
    side by side."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.6))
    confusion_heatmap(axes[0], check.analytic, labels=CLASS_NAMES, fmt=".4f", title="analytic")
    confusion_heatmap(axes[1], check.simulated, labels=CLASS_NAMES, fmt=".4f", title=f"simulated, n = {n:,}")
    fig.suptitle(f"Pr[h(Norm(x)) = j | y = i], p = {p}, d = {d}, beta = {beta}, sigma = {sigma}")
    save_figure(fig, profile=profile, name="toy_confusion_analytic_vs_simulated")
    plt.show()


def show_illustration_and_curves(p: float, *, d: float, beta: float, sigma: float, seed: int, profile: str) -> None:
    """Appendix C's illustration beside the class-1 confusion curves against p."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.4))
    plot_illustration(axes[0], p, d=d, beta=beta, sigma=sigma, n_points=2000, seed=seed)
    plot_class1_curves(axes[1], np.linspace(0.25, 0.49, 97), d=d, beta=beta, sigma=sigma)
    save_figure(fig, profile=profile, name="toy_illustration_and_curves")
    plt.show()


def show_optimal_w(w_star: np.ndarray, *, profile: str) -> None:
    """Heatmap of Appendix C.2's W*."""
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 4.4))
    confusion_heatmap(ax, w_star, fmt=".2f", vmin=None, vmax=None, cmap="vlag", center=0.0,
                      title="W* (uniform training prior, long-tailed test prior, rho = 100)")
    ax.set_xlabel("column k")
    ax.set_ylabel("row j")
    save_figure(fig, profile=profile, name="toy_optimal_w")
    plt.show()


HIGHLIGHT = 0.11  # Figure 1 boxes the off-diagonal cells above 11%


def show_figure1(study: ConfusionStudy, *, columns: Sequence[str], rho: float, profile: str) -> None:
    """Figure 1: LT (top) and inverse-LT (bottom) confusion matrices of each set in ``columns``."""
    fig, axes = plt.subplots(2, len(columns), figsize=(WIDTH, 2 * WIDTH / len(columns) + 0.5))
    for c, name in enumerate(columns):
        for r, inverse in enumerate((False, True)):
            kind = "inverse LT" if inverse else "LT"
            confusion_heatmap(axes[r, c], study.matrix(name, rho, inverse=inverse), highlight_above=HIGHLIGHT,
                              annotate=False, title=f"{name.replace('_', ' ')}, {kind}")
            if r == 0:
                axes[r, c].set_xlabel("")  # the bottom row's label serves both rows (no overlap with its titles)
    fig.suptitle(f"BNAdapt confusion matrices, rho = {rho:g} ({profile} profile; red: off-diagonal > 11%)")
    save_figure(fig, profile=profile, name="fig1_confusion")
    plt.show()


def show_lt_grids(matrices: dict[tuple[float, str], np.ndarray], *, names: Sequence[str], rhos: Sequence[float],
                  profile: str, cols: int = 4) -> None:
    """One figure per rho: the LT confusion matrix of every set in ``names``."""
    rows_n = -(-len(names) // cols)
    for rho in rhos:
        fig, axes = plt.subplots(rows_n, cols, figsize=(WIDTH, WIDTH / cols * rows_n + 0.4),
                                 squeeze=False)
        for i, (ax, name) in enumerate(zip(axes.flat, names)):
            confusion_heatmap(ax, matrices[(rho, name)], highlight_above=HIGHLIGHT, annotate=False,
                              title=name.replace("_", " "))
            if i // cols < rows_n - 1:
                ax.set_xlabel("")  # x labels on the last row only, clear of the titles below them
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.suptitle(f"BNAdapt confusion matrices, LT rho = {rho:g} ({profile} profile)")
        save_figure(fig, profile=profile, name=f"confusion_lt_rho{rho:g}")
        plt.show()


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
