"""BNAdapt with and without a trained g_phi on long-tailed test streams (notebook 04, Section 3):
the streams' BN-adapted logits, computed once, and the accuracy of each refiner on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from dartlib.data import load, protocols
from dartlib.models.evaluation import evaluated_on, stream_accuracy, stream_logits

Stream = tuple[np.ndarray, np.ndarray, list[torch.Tensor]]  # labels, order, logits per batch


def lt_streams(frozen: nn.Module, *, dataset: str, corruptions: Sequence[str], rhos: Sequence[float], severity: int,
               batch_size: int, seed: int) -> dict[tuple[str, float], Stream]:
    """The LT stream of every (corruption, rho) and the BN-adapted logits of its batches."""
    frozen, device = evaluated_on(frozen, None)  # one device copy for every stream
    streams = {}
    for corruption in corruptions:
        ds = load(dataset, corruption=corruption, severity=severity)
        for rho in rhos:
            order = protocols.long_tailed(ds.labels, rho=rho, seed=seed)
            logits = stream_logits(frozen, ds.images, order, batch_size=batch_size, device=device)
            streams[(corruption, rho)] = (ds.labels, order, logits)
    return streams


def refiner_accuracy(streams: Mapping[tuple[str, float], Stream], refiners: Mapping[str, object], *, dataset: str,
                     severity: int, batch_size: int, seed: int) -> pd.DataFrame:
    """One results row per (stream, refiner): BNAdapt's accuracy with the refiner (None: without)."""
    return pd.DataFrame([
        {"experiment": "intermediate_training", "dataset": dataset, "shift": "lt", "shift_param": rho,
         "corruption": corruption, "severity": severity, "method": "bnadapt", "refiner": name,
         "seed": seed, "n": len(order),
         "accuracy": stream_accuracy(logits, labels, order, batch_size=batch_size, refiner=ref)}
        for (corruption, rho), (labels, order, logits) in streams.items() for name, ref in refiners.items()])


def accuracy_by_rho(results: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy per refiner (rows) and rho (columns ``rho=...``)."""
    table = results.pivot_table(index="refiner", columns="shift_param", values="accuracy", aggfunc="mean")
    table.columns = [f"rho={c:g}" for c in table.columns]
    return table
