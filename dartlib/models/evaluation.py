"""Accuracy of a source model on clean and corrupted test sets, in the results schema."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.protocols import batches
from dartlib.data.sources import load
from dartlib.models.backbones import use_batch_statistics, use_source_statistics
from dartlib.data.augmentation import to_tensor
from dartlib.models.training import batch_accuracy

RESULT_COLUMNS = ["experiment", "dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner",
                  "seed", "n", "accuracy"]


def corruption_accuracy(
    model: nn.Module, *, dataset: str, experiment: str, method: str = "noadapt", severity: int = 5,
    corruptions: Sequence[str] = CORRUPTIONS, seed: int = 0, batch_size: int = 200, device: str = "cpu",
    limit: int | None = None, progress: bool = True,
) -> pd.DataFrame:
    """NoAdapt (source statistics) or BNAdapt (test-batch statistics) accuracy on each corruption
    of an i.i.d. (balanced) test stream in the test-set order; ``limit`` keeps the first images."""
    if method not in ("noadapt", "bnadapt"):
        raise ValueError(f"unknown method {method!r}; valid: noadapt, bnadapt")
    (use_source_statistics if method == "noadapt" else use_batch_statistics)(model)
    rows = []
    for corruption in tqdm(corruptions, desc=f"{method} on {dataset}", disable=not progress):
        ds = load(dataset, corruption=corruption, severity=severity)
        images, labels = ds.images[:limit], ds.labels[:limit]
        acc = batch_accuracy(model, images, labels, batch_size=batch_size, device=device)
        rows.append({"experiment": experiment, "dataset": dataset, "shift": "none", "shift_param": None,
                     "corruption": corruption, "severity": severity, "method": method, "refiner": "none",
                     "seed": seed, "n": len(labels), "accuracy": acc})
    use_source_statistics(model)
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


@torch.no_grad()
def stream_logits(model: nn.Module, images, order, *, batch_size: int, device: str = "cpu") -> list[torch.Tensor]:
    """Logits of consecutive batches of a test stream (``order`` indexes ``images``), computed by
    ``model`` in its current BN mode; BN-adapt mode normalises each batch with its own statistics."""
    return [model(to_tensor(images[idx]).to(device)).cpu() for idx in batches(order, batch_size=batch_size)]


@torch.no_grad()
def stream_features(model: nn.Module, images, order, *, batch_size: int, device: str = "cpu") -> list[torch.Tensor]:
    """Penultimate features of consecutive batches of a test stream (the logits are
    ``model.head`` of them), for the additive-parameter variant of DART."""
    return [model.features(to_tensor(images[idx]).to(device)).cpu() for idx in batches(order, batch_size=batch_size)]


def stream_accuracy(logits: list[torch.Tensor], labels, order, *, batch_size: int, refiner=None,
                    features: list[torch.Tensor] | None = None) -> float:
    """Accuracy (%) of per-batch logits, optionally refined per batch (BNAdapt+DART: the refiner
    reads the same BN-adapted logits it refines; the additive variant also needs ``features``)."""
    correct = 0
    for i, (batch_logits, idx) in enumerate(zip(logits, batches(order, batch_size=batch_size))):
        feats = None if features is None else features[i]
        out = batch_logits if refiner is None else refiner(batch_logits, batch_logits, features=feats)
        correct += int((out.argmax(1).numpy() == labels[idx]).sum())
    return 100.0 * correct / len(order)
