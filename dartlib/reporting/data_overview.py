"""The figures and listings of notebook 00: datasets present, corruption grids, protocol
histograms, Dirichlet batches and per-domain class distributions (Section 5, Appendix A)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.data import load, protocols
from dartlib.data.sources import DOMAINS, DataMissingError, status
from dartlib.reporting.data_figures import (plot_batch_distributions, plot_class_histograms, plot_corruption_grid,
                                            plot_simplex_batches)
from dartlib.reporting.figures import WIDTH, save_figure


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
