"""Label-shift detection statistics per test batch (Section 3, Figure 4) and accuracy against the
imbalance ratio (Figure 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from dartlib.dart.refiner import batch_statistics
from dartlib.data.protocols import batches


def batch_deviation_table(logits: list[torch.Tensor], labels: np.ndarray, order: np.ndarray, *,
                          batch_size: int) -> pd.DataFrame:
    """One row per batch: accuracy (%), D(u, p_bar) = CE(u, p_bar) of the batch-mean softmax, and
    the prediction deviation d_B = mean CE(u, softmax) (both in nats)."""
    rows = []
    for batch_logits, idx in zip(logits, batches(order, batch_size=batch_size)):
        p_bar, d = batch_statistics(batch_logits)
        rows.append({
            "accuracy": 100.0 * float((batch_logits.argmax(1).numpy() == labels[idx]).mean()),
            "ce_u_pbar": float(-torch.log(p_bar.clamp_min(1e-30)).mean()),
            "d": float(d),
            "n": len(idx),
        })
    return pd.DataFrame(rows)

