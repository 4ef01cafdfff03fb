"""The data a reader should see first (notebook 00): the data sets on disk, corruption grids, the
Dirichlet intermediate batches and the test protocols' class histograms."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.data import load, protocols
from dartlib.data.corruptions import CORRUPTIONS, corrupt
from dartlib.data.protocols import batches, long_tailed_counts
from dartlib.data.sources import DOMAINS, status
from dartlib.data.dataset import DataMissingError
from dartlib.reporting.figures import HALF_WIDTH, WIDTH, save_figure


def print_data_status() -> None:
    """Which datasets are present, and how to get the absent ones."""
    table = pd.DataFrame(status())
    print(table[["dataset", "present", "path"]].to_string(index=False))
    missing = table[~table.present]
    if len(missing):
        print("\nhow to get the absent ones:")
        for row in missing.itertuples():
            print(f"  {row.dataset}: {getattr(row, '_4')}")


def show_corruption_grids(*, profile: str, seed: int, names: tuple[str, ...] = ("fmnist", "cifar10")) -> None:
    """The 15 corruptions at 5 severities on test image 0 of each dataset present."""
    for name in names:
        try:
            ds = load(name, split="test")
        except DataMissingError as err:
            print(f"NOT RUN for {name}: {err}")
            continue
        fig = plot_corruption_grid(ds.images[0], title=f"{name} test image 0 ({ds.classes[ds.labels[0]]})", seed=seed)
        save_figure(fig, profile=profile, name=f"data_corruptions_{name}")
        plt.show()


def show_protocol_histograms(labels: np.ndarray, streams: dict[str, np.ndarray], *, k: int, profile: str) -> None:
    """The class histograms of the test streams, one panel each."""
    fig, axes = plt.subplots(1, len(streams), figsize=(WIDTH, 3.0))
    for ax, (title, order) in zip(axes, streams.items()):
        plot_class_histograms(ax, labels, order, k=k, title=title)
    save_figure(fig, profile=profile, name="data_protocol_histograms")
    plt.show()


def show_dirichlet_figures(labels: np.ndarray, *, dataset: str, delta: float, n_chunks: int, batch_size: int,
                           k: int, seed: int, profile: str) -> None:
    """Appendix A's two Dirichlet figures: batches of a 3-class subset on the simplex (i.i.d. vs
    Dirichlet, the chunk count scaled to the subset), and the class distributions of five
    Dirichlet batches of the whole set."""
    labels3 = labels[np.flatnonzero(labels < 3)]
    iid = protocols.iid_order(labels3, seed=seed)
    chunks3 = max(1, round(n_chunks * len(labels3) / len(labels)))
    dirichlet = protocols.dirichlet_stream(labels3, delta=delta, n_chunks=chunks3, seed=seed)
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.4))
    plot_simplex_batches(axes[0], labels3, iid, batch_size=batch_size, title="i.i.d. sampling")
    plot_simplex_batches(axes[1], labels3, dirichlet, batch_size=batch_size,
                         title=f"Dirichlet sampling (delta = {delta:g}, {chunks3} chunks)")
    save_figure(fig, profile=profile, name="data_dirichlet_simplex")
    plt.show()

    stream = protocols.dirichlet_stream(labels, delta=delta, n_chunks=n_chunks, seed=seed)
    fig, axes = plt.subplots(1, 5, figsize=(WIDTH, 2.6), sharey=True)
    n_batches = len(stream) // batch_size
    plot_batch_distributions(axes, labels, stream, batch_size=batch_size, k=k,
                             which=np.linspace(0, n_batches - 1, 5).astype(int))
    fig.suptitle(f"{dataset} training set, Dirichlet stream (delta = {delta:g}, N_dir = {n_chunks}), batch {batch_size}")
    save_figure(fig, profile=profile, name="data_dirichlet_batches")
    plt.show()


def show_domain_class_distributions(*, profile: str, names: tuple[str, ...] = ("pacs", "officehome")) -> None:
    """The class distribution of every domain of PACS and OfficeHome (Appendix A), when present."""
    for name in names:
        try:
            per_domain = {d: np.bincount(load(name, split=d, image_size=32).labels) for d in DOMAINS[name]}
        except DataMissingError as err:
            print(f"NOT RUN: {err}")
            continue
        fig, ax = plt.subplots(figsize=(WIDTH, 3.0))
        for d, c in per_domain.items():
            ax.plot(np.arange(len(c)), c / c.sum(), marker="o", ms=3, label=d)
        ax.set_xlabel("class")
        ax.set_ylabel("fraction of the domain")
        ax.set_title(f"{name}: class distribution per domain")
        ax.legend()
        save_figure(fig, profile=profile, name=f"data_class_distribution_{name}")
        plt.show()


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
