"""The streams behind Figures 3 and 4: per-batch deviation statistics of BNAdapt on online-imbalance
streams, and NoAdapt / BNAdapt / BNAdapt+DART accuracy against the LT imbalance ratio."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from torch import nn

from dartlib.analysis.deviation import batch_deviation_table
from dartlib.data import load, protocols
from dartlib.models.evaluation import evaluated_on, stream_accuracy, stream_logits


def deviation_over_irs(frozen: nn.Module, *, dataset: str, corruption: str, severity: int, irs: Sequence[float],
                       batch_size: int, seed: int) -> pd.DataFrame:
    """Figure 4's points: per batch of the online-imbalance stream (K subsets, one majority class
    each) at every imbalance ratio in ``irs``, BNAdapt's accuracy, D(u, p_bar_B) and d_B."""
    ds = load(dataset, corruption=corruption, severity=severity)
    subset = len(ds.labels) // ds.num_classes
    frozen, device = evaluated_on(frozen, None)  # one device copy for every stream
    tables = []
    for ir in irs:
        order = protocols.online_imbalance(ds.labels, ir=ir, subset_size=subset, seed=seed)
        logits = stream_logits(frozen, ds.images, order, batch_size=batch_size, device=device)
        tables.append(batch_deviation_table(logits, ds.labels, order, batch_size=batch_size).assign(ir=ir))
    return pd.concat(tables, ignore_index=True)


def accuracy_against_rho(*, frozen: nn.Module, source: nn.Module, refiner, dataset: str, corruptions: Sequence[str],
                         severity: int, rhos: Sequence[float], batch_size: int, seed: int) -> pd.DataFrame:
    """Figure 3's curves: accuracy of NoAdapt (``source``), BNAdapt (``frozen``) and BNAdapt+DART
    on LT streams, mean over ``corruptions`` per (method, rho)."""
    frozen, device = evaluated_on(frozen, None)  # one device copy of each model for every stream
    source, _ = evaluated_on(source, device)
    rows = []
    for corruption in corruptions:
        ds = load(dataset, corruption=corruption, severity=severity)
        for rho in rhos:
            order = protocols.long_tailed(ds.labels, rho=rho, seed=seed)
            adapted = stream_logits(frozen, ds.images, order, batch_size=batch_size, device=device)
            stored = stream_logits(source, ds.images, order, batch_size=batch_size, device=device)
            for method, logits, ref in (("noadapt", stored, None), ("bnadapt", adapted, None),
                                        ("bnadapt+dart", adapted, refiner)):
                rows.append({"corruption": corruption, "rho": rho, "method": method,
                             "accuracy": stream_accuracy(logits, ds.labels, order, batch_size=batch_size, refiner=ref)})
    return pd.DataFrame(rows).groupby(["method", "rho"], as_index=False)["accuracy"].mean()
