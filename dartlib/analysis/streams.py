"""What the label-shift protocols of Section 5 and Appendix A produce on a labelled set: the class
counts of the LT, inverse-LT and online-imbalance streams, and how unbalanced the batches of a
Dirichlet stream are next to i.i.d. ones."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dartlib.data import protocols


def protocol_streams(labels: np.ndarray, *, rho: float, ir: float, seed: int) -> dict[str, np.ndarray]:
    """The test streams of notebook 00, by title: LT and inverse LT with imbalance ratio ``rho``,
    and the first 1,000-sample subset of the online-imbalance stream with ratio ``ir``."""
    return {
        f"LT, rho = {rho:g}": protocols.long_tailed(labels, rho=rho, seed=seed),
        f"inverse LT, rho = {rho:g}": protocols.long_tailed(labels, rho=rho, inverse=True, seed=seed),
        f"online imbalance, IR = {ir:g}, first subset": protocols.online_imbalance(
            labels, ir=ir, subset_size=1000, seed=seed)[:1000],
    }


def protocol_counts(labels: np.ndarray, streams: dict[str, np.ndarray], *, dataset: str, k: int) -> pd.DataFrame:
    """One row per (stream, class): how many samples of the class the stream holds."""
    return pd.DataFrame([{"dataset": dataset, "stream": title, "class": c, "count": int(n)}
                         for title, order in streams.items()
                         for c, n in enumerate(np.bincount(labels[order], minlength=k))])


def max_class_share(order: np.ndarray, labels: np.ndarray, *, batch_size: int) -> float:
    """Mean share of the largest class in the full batches of ``order``."""
    counts = protocols.batch_class_counts(protocols.batches(order, batch_size=batch_size, drop_last=True), labels,
                                          k=int(labels.max()) + 1)
    return float(np.mean(counts.max(1) / counts.sum(1)))


def batch_balance(labels: np.ndarray, *, delta: float, n_chunks: int, batch_size: int, seed: int) -> dict[str, float]:
    """:func:`max_class_share` of an i.i.d. stream and of the Dirichlet stream (Appendix A) of
    ``labels``: the Dirichlet batches must be far less balanced."""
    stream = protocols.dirichlet_stream(labels, delta=delta, n_chunks=n_chunks, seed=seed)
    return {"iid": max_class_share(protocols.iid_order(labels, seed=seed), labels, batch_size=batch_size),
            "dirichlet": max_class_share(stream, labels, batch_size=batch_size)}
