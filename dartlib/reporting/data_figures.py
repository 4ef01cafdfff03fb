"""Figures of the data layer: corruption grids, protocol histograms, Dirichlet batches (Appendix A)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations

import matplotlib.pyplot as plt
import numpy as np

from dartlib.data.corruptions import CORRUPTIONS, corrupt
from dartlib.data.protocols import batches, long_tailed_counts
from dartlib.reporting.figures import HALF_WIDTH


def plot_corruption_grid(image: np.ndarray, *, title: str, seed: int) -> plt.Figure:
    """The 15 corruptions (rows) at severities 1..5 (columns) applied to one image."""
    fig, axes = plt.subplots(len(CORRUPTIONS), 6, figsize=(HALF_WIDTH, 14))
    for r, name in enumerate(CORRUPTIONS):
        axes[r, 0].imshow(image)
        axes[r, 0].set_ylabel(name.replace("_", " "), rotation=0, ha="right", va="center")
        for s in range(1, 6):
            out = corrupt(image[None], corruption=name, severity=s, seed=seed)[0]
            axes[r, s].imshow(out)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    for s, ax in enumerate(axes[0]):
        ax.set_title("clean" if s == 0 else f"severity {s}")
    fig.suptitle(title)
    return fig


def plot_class_histograms(ax: plt.Axes, labels: np.ndarray, order: np.ndarray, *, k: int, title: str) -> None:
    """Samples per class of a protocol's stream."""
    counts = np.bincount(labels[order], minlength=k)
    ax.bar(np.arange(k), counts, color="tab:blue")
    ax.set_xticks(np.arange(k))
    ax.set_xlabel("class")
    ax.set_ylabel("samples")
    ax.set_title(f"{title} (n = {counts.sum():,})")


def _barycentric(p: np.ndarray) -> np.ndarray:
    """Points of the 3-class simplex in the plane (vertices at the corners of a triangle)."""
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
    return p @ corners


def plot_simplex_batches(
    ax: plt.Axes, labels: np.ndarray, order: np.ndarray, *, batch_size: int, title: str, rhos: Sequence[float] = (1, 2, 10)
) -> None:
    """Class distributions of consecutive batches of a 3-class stream on the simplex, with the
    long-tailed distributions of the given imbalance ratios (and their permutations) marked."""
    props = np.array([np.bincount(labels[b], minlength=3) / len(b) for b in batches(order, batch_size=batch_size, drop_last=True)])
    xy = _barycentric(props)
    ax.scatter(xy[:, 0], xy[:, 1], s=6, color="black", alpha=0.5, label="batches")
    tri = _barycentric(np.vstack([np.eye(3), np.eye(3)[:1]]))
    ax.plot(tri[:, 0], tri[:, 1], color="gray", lw=1)
    for rho, color in zip(rhos, ("tab:red", "tab:blue", "gold")):
        counts = long_tailed_counts(3, n_max=10**6, rho=rho).astype(float)
        base = counts / counts.sum()
        pts = np.unique(np.array([base[list(perm)] for perm in permutations(range(3))]), axis=0)
        pxy = _barycentric(pts)
        ax.scatter(pxy[:, 0], pxy[:, 1], s=60, color=color, edgecolor="black", zorder=5, label=f"rho = {rho:g}")
    for i, (x, y) in enumerate(_barycentric(np.eye(3))):
        ax.annotate(f"class {i}", (x, y), xytext=(0, -12 if y == 0 else 6), textcoords="offset points", ha="center")
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(title)
    ax.legend(loc="upper left")


def plot_batch_distributions(
    axes: Sequence[plt.Axes], labels: np.ndarray, order: np.ndarray, *, batch_size: int, k: int, which: Sequence[int]
) -> None:
    """Class distributions of chosen batches of a stream (Appendix A's five-batch figure)."""
    all_batches = batches(order, batch_size=batch_size, drop_last=True)
    for ax, b in zip(axes, which):
        frac = np.bincount(labels[all_batches[b]], minlength=k) / batch_size
        ax.bar(np.arange(k), frac, color="tab:orange")
        ax.set_ylim(0, 1)
        ax.set_xticks(np.arange(k))
        ax.set_title(f"batch {b}")
        ax.set_xlabel("class")
    axes[0].set_ylabel("fraction of the batch")
