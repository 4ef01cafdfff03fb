"""Confusion matrices of the BN-adapted classifier under label shift (Figure 1 and the appendix
figures), and how alike they are across corruptions (the paper's claim that the class-wise
confusion patterns are shared across covariate shifts)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import torch
from torch import nn

from dartlib.models.evaluation import stream_logits


def confusion_rates(predictions: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Row-normalised confusion matrix: entry (i, j) = Pr[prediction j | true class i]; rows of
    absent classes are zero."""
    counts = np.zeros((num_classes, num_classes))
    np.add.at(counts, (labels, predictions), 1)
    totals = counts.sum(1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def bnadapt_confusion(model: nn.Module, images: np.ndarray, labels: np.ndarray, order: np.ndarray, *,
                      batch_size: int, num_classes: int, device: str = "cpu") -> np.ndarray:
    """Confusion rates of ``model`` (in its current BN mode, BN-adapt for Figure 1) over the
    stream ``order`` in batches of ``batch_size``."""
    logits = torch.cat(stream_logits(model, images, order, batch_size=batch_size, device=device))
    return confusion_rates(logits.argmax(1).numpy(), labels[order], num_classes)


def offdiagonal_similarity(matrices: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    """Mean pairwise Pearson correlation of the off-diagonal entries of the matrices, and the
    full correlation matrix (in the order of ``matrices``)."""
    names = list(matrices)
    k = next(iter(matrices.values())).shape[0]
    mask = ~np.eye(k, dtype=bool)
    flat = np.stack([matrices[n][mask] for n in names])
    corr = np.corrcoef(flat)
    pairs = [corr[i, j] for i, j in combinations(range(len(names)), 2)]
    return float(np.mean(pairs)), corr


def matrix_rows(matrix: np.ndarray, *, labels: dict[str, object], column: str = "value") -> pd.DataFrame:
    """A K x K matrix as a long table, one row per entry (``labels`` as constant columns, then
    ``true``, ``pred`` and the entry in ``column``): the form a study stores
    (:func:`matrices_from_rows` reads it back)."""
    true, pred = np.indices(matrix.shape)
    return pd.DataFrame({**labels, "true": true.ravel(), "pred": pred.ravel(), column: matrix.ravel()})


def matrices_from_rows(table: pd.DataFrame, *, by: str | list[str], column: str = "value") -> dict:
    """The matrices of a long table (:func:`matrix_rows`), one per value of the ``by`` column(s),
    keyed by that value (a tuple for a list of columns), in the table's order."""
    matrices = {}
    for key, group in table.groupby(by, sort=False):
        k = int(group.true.max()) + 1
        matrix = np.zeros((k, k))
        matrix[group.true.to_numpy(), group.pred.to_numpy()] = group[column].to_numpy()
        matrices[key[0] if isinstance(key, tuple) and isinstance(by, str) else key] = matrix
    return matrices
