"""BNAdapt's confusion matrices on LT and inverse-LT streams of the clean and corrupted test sets
(Figure 1 and the appendix figures), and how alike they are across corruptions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from torch import nn

from dartlib.analysis.confusion import bnadapt_confusion, offdiagonal_similarity
from dartlib.data import load, protocols


class ConfusionStudy:
    """The clean test split of ``source_dataset`` and the named corruptions of ``corrupted_dataset``,
    classified by the BN-adapted model ``frozen``."""

    def __init__(self, frozen: nn.Module, *, source_dataset: str, corrupted_dataset: str, corruptions: Sequence[str],
                 severity: int, batch_size: int, seed: int) -> None:
        clean = load(source_dataset, split="test")
        self.k = clean.num_classes
        self.sets = {"clean": clean}
        for name in dict.fromkeys(corruptions):
            self.sets[name] = load(corrupted_dataset, corruption=name, severity=severity)
        self.frozen, self.batch_size, self.seed = frozen, batch_size, seed

    def matrix(self, name: str, rho: float, *, inverse: bool = False) -> np.ndarray:
        """Row-normalised confusion matrix of BNAdapt on the (inverse) LT stream of set ``name``."""
        ds = self.sets[name]
        order = protocols.long_tailed(ds.labels, rho=rho, inverse=inverse, seed=self.seed)
        return bnadapt_confusion(self.frozen, ds.images, ds.labels, order, batch_size=self.batch_size,
                                 num_classes=self.k)

    def lt_matrices(self, names: Sequence[str], rhos: Sequence[float]) -> dict[tuple[float, str], np.ndarray]:
        """:meth:`matrix` of every (rho, name)."""
        return {(rho, name): self.matrix(name, rho) for rho in rhos for name in names}


def similarity_table(matrices: dict[tuple[float, str], np.ndarray], *, corruptions: Sequence[str],
                     rhos: Sequence[float], k: int) -> pd.DataFrame:
    """Per rho: the mean pairwise correlation of the off-diagonal entries across ``corruptions``
    and their mean off-diagonal error rate."""
    rows = []
    for rho in rhos:
        mean_corr, _ = offdiagonal_similarity({n: matrices[(rho, n)] for n in corruptions})
        rows.append({"rho": rho, "mean_pairwise_offdiag_correlation": mean_corr,
                     "mean_offdiag_error_rate": float(np.mean([matrices[(rho, n)][~np.eye(k, dtype=bool)].sum() / k
                                                              for n in corruptions]))})
    return pd.DataFrame(rows)
