"""Accuracy of a source model on clean and corrupted test sets, in the results schema, and the
logits and features of a test stream; each stream is walked by the one loop,
:func:`dartlib.models.streams.run_stream`."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.protocols import TEST_BATCH_SIZE, batches
from dartlib.data.sources import load
from dartlib.models.backbones import use_batch_statistics, use_source_statistics
from dartlib.models.streams import TestStream, percent_correct, run_stream, stream_correct

RESULT_COLUMNS = ["experiment", "dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner",
                  "seed", "n", "accuracy"]


def corruption_accuracy(
    model: nn.Module, *, dataset: str, experiment: str, method: str = "noadapt", severity: int = 5,
    corruptions: Sequence[str] = CORRUPTIONS, seed: int = 0, batch_size: int = TEST_BATCH_SIZE,
    limit: int | None = None, progress: bool = True,
) -> pd.DataFrame:
    """NoAdapt (source statistics) or BNAdapt (test-batch statistics) accuracy on each corruption
    of an i.i.d. (balanced) test stream in the test-set order; ``limit`` keeps the first images.
    Evaluated on the machine's device (:func:`evaluated_on`; ``$DART_DEVICE`` chooses another)."""
    if method not in ("noadapt", "bnadapt"):
        raise ValueError(f"unknown method {method!r}; valid: noadapt, bnadapt")
    (use_source_statistics if method == "noadapt" else use_batch_statistics)(model)
    here, device = evaluated_on(model, None)  # one device copy for every corruption
    rows = []
    # progress=False forces the bar off; otherwise tqdm decides (TQDM_DISABLE=1 silences it)
    for corruption in tqdm(corruptions, desc=f"{method} on {dataset}", **({} if progress else {"disable": True})):
        ds = load(dataset, corruption=corruption, severity=severity)
        images, labels = ds.images[:limit], ds.labels[:limit]
        acc = batch_accuracy(here, images, labels, batch_size=batch_size, device=device)
        rows.append({"experiment": experiment, "dataset": dataset, "shift": "none", "shift_param": None,
                     "corruption": corruption, "severity": severity, "method": method, "refiner": "none",
                     "seed": seed, "n": len(labels), "accuracy": acc})
    use_source_statistics(model)
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def evaluated_on(model: nn.Module, device: str | None) -> tuple[nn.Module, str]:
    """Where a test stream is evaluated and by which copy: ``device`` (None: the machine's device,
    :func:`dartlib.devices.default_device`, so that the notebooks' stream evaluations run on a GPU
    where there is one), and ``model`` itself when its parameters are there, else a copy moved there
    (the caller's model stays where it is, in its BN mode)."""
    from dartlib.devices import default_device

    device = device or default_device()
    param = next(model.parameters(), None)
    if param is None or param.device == torch.device(device) or (device == "cuda" and param.device.type == "cuda"):
        return model, device
    return copy.deepcopy(model).to(device), device


@torch.no_grad()
def stream_logits(model: nn.Module, images, order, *, batch_size: int, device: str | None = None) -> list[torch.Tensor]:
    """Logits of consecutive batches of a test stream (``order`` indexes ``images``), computed by
    ``model`` in its current BN mode (:func:`dartlib.models.streams.run_stream`); BN-adapt mode
    normalises each batch with its own statistics. ``device``: where (:func:`evaluated_on`); the
    logits come back on the CPU."""
    model, device = evaluated_on(model, device)
    stream = TestStream(images=images, order=order, batch_size=batch_size, device=device)
    return [logits.cpu() for logits, _ in run_stream(model, stream)]


@torch.no_grad()
def stream_features(model: nn.Module, images, order, *, batch_size: int, device: str | None = None) -> list[torch.Tensor]:
    """Penultimate features of consecutive batches of a test stream (the logits are
    ``model.head`` of them), for the additive-parameter variant of DART; ``device`` as in
    :func:`stream_logits`."""
    model, device = evaluated_on(model, device)
    stream = TestStream(images=images, order=order, batch_size=batch_size, device=device)
    return [features.cpu() for features, _ in run_stream(model.features, stream)]


def correct_predictions(logits: Iterable[torch.Tensor], labels: np.ndarray, order: np.ndarray, *,
                        batch_size: int) -> int:
    """How many argmax predictions of the logits of consecutive batches of a test stream (batch
    i holds the images ``order[i * batch_size:(i + 1) * batch_size]``) match ``labels``."""
    return sum(int((batch_logits.argmax(1).cpu().numpy() == labels[idx]).sum())
               for batch_logits, idx in zip(logits, batches(order, batch_size=batch_size)))


def logits_accuracy(logits: Iterable[torch.Tensor], labels: np.ndarray, order: np.ndarray, *, batch_size: int,
                    refiner=None, features: list[torch.Tensor] | None = None) -> float:
    """Accuracy (%) of per-batch logits a stream gave before (:func:`stream_logits`), optionally
    refined per batch (BNAdapt+DART: the refiner reads the same BN-adapted logits it refines;
    the additive variant also needs ``features``)."""
    if refiner is not None:
        per_batch = features if features is not None else itertools.repeat(None)
        logits = (refiner(batch_logits, batch_logits, features=feats) for batch_logits, feats in zip(logits, per_batch))
    return 100.0 * correct_predictions(logits, labels, order, batch_size=batch_size) / len(order)


@torch.no_grad()
def batch_accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray, *, batch_size: int = TEST_BATCH_SIZE,
                   device: str | None = None) -> float:
    """Accuracy (%) over consecutive batches, in whatever BN mode ``model`` is in; ``device`` as in
    :func:`stream_logits`."""
    model, device = evaluated_on(model, device)
    stream = TestStream(images=images, labels=labels, order=np.arange(len(labels)), batch_size=batch_size,
                        device=device)
    return percent_correct(stream_correct(model, stream))


@torch.no_grad()
def resident_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, batch_size: int = 1000) -> float:
    """:func:`batch_accuracy` of uint8 NHWC ``images`` and ``labels`` resident on a device: the
    predictions are counted there and read back once (:mod:`dartlib.devices`: the backbone's
    precision applies)."""
    from dartlib.devices import autocast

    def predictor(x: torch.Tensor) -> torch.Tensor:
        with autocast(images.device):
            return model(x)

    return percent_correct(stream_correct(predictor, TestStream(images=images, labels=labels, batch_size=batch_size)))
