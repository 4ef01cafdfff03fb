"""Choosing alpha, the weight of the identity regulariser L_bal (Eq. 3), for a backbone the paper
does not cover, from held-out source training data only, never from test data.

A small, over-confident source model can make the paper's alpha = 0.1 too weak: g_phi then bends
the predictions of balanced batches and costs accuracy at rho = 1. The check holds out a
class-balanced part of the training set, trains g_phi on the rest for each candidate alpha, and on
held-out streams (i.i.d., and long-tailed at larger rho) compares BNAdapt with BNAdapt+DART and
measures how far W_B is from I and b_B from 0 on the i.i.d. batches.

The rule, fixed before any result: keep the paper's alpha unless BNAdapt+DART loses more than
``max_loss`` points to BNAdapt on the held-out i.i.d. stream; otherwise take the smallest candidate
that loses at most that much (the one that loses least when none does).

Clean held-out images cannot show what a corruption does to the backbone's batch statistics, and
the loss at rho = 1 grows where the backbone is weak. With ``holdout_corruptions`` (CIFAR-10-C's
extra corruptions, which no test set here uses) every held-out stream is also scored corrupted,
and the rule then reads the i.i.d. loss averaged over those corrupted streams.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data.corruptions import corrupt
from dartlib.data.protocols import TEST_BATCH_SIZE, class_balanced, long_tailed
from dartlib.data.sources import Dataset
from dartlib.models.evaluation import evaluated_on, stream_accuracy, stream_logits
from dartlib.models.backbones import frozen_bn_adapted


def holdout_split(labels: np.ndarray, *, per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, held-out) indices: ``per_class`` random images of every class held out, the rest fit."""
    held = class_balanced(labels, per_class=per_class, seed=seed)
    keep = np.ones(len(labels), dtype=bool)
    keep[held] = False
    return np.flatnonzero(keep), np.sort(held)


def _subset(data: Dataset, idx: np.ndarray, split: str) -> Dataset:
    return Dataset(data.name, split, data.images[idx], data.labels[idx], data.classes, dict(data.info))


@torch.no_grad()
def heldout_rows(model: nn.Module, refiner: Refiner, held: Dataset, *, rhos=(1, 10, 100), batch_size: int = TEST_BATCH_SIZE,
                 seed: int = 0) -> list[dict]:
    """For each rho: BNAdapt and BNAdapt+DART accuracy on the held-out long-tailed stream (rho = 1:
    every held-out image, shuffled), and the mean ||W_B - I||_F and ||b_B||_2 over its batches."""
    frozen, device = evaluated_on(frozen_bn_adapted(model), None)  # one device copy for every rho
    eye = torch.eye(held.num_classes)
    rows = []
    for rho in rhos:
        order = long_tailed(held.labels, rho=float(rho), seed=seed)
        logits = stream_logits(frozen, held.images, order, batch_size=batch_size, device=device)
        refiner.reset()
        dart = stream_accuracy(logits, held.labels, order, batch_size=batch_size, refiner=refiner)
        refiner.reset()
        w_dev, b_dev = [], []
        for batch in logits:
            wb = refiner.transform(batch)
            w, b = wb if wb is not None else (eye, torch.zeros(held.num_classes))
            w_dev.append(float(torch.linalg.matrix_norm(w - eye)))
            b_dev.append(float(torch.linalg.vector_norm(b)))
        rows.append({"rho": float(rho), "n": len(order),
                     "bnadapt": stream_accuracy(logits, held.labels, order, batch_size=batch_size), "dart": dart,
                     "w_minus_i": float(np.mean(w_dev)), "b_norm": float(np.mean(b_dev))})
    return rows


def corrupted_heldout(held: Dataset, *, corruption: str, severity: int, seed: int) -> Dataset:
    """The held-out images under one (held-out) corruption, labels unchanged."""
    images = corrupt(held.images, corruption=corruption, severity=severity, seed=seed)
    return Dataset(held.name, f"{held.split}-{corruption}", images, held.labels, held.classes, dict(held.info))


def choose_alpha(frame: pd.DataFrame, *, paper_alpha: float, max_loss: float = 0.5) -> float:
    """The rule of the module docstring, on :func:`validate_alpha`'s table (its i.i.d. loss is
    averaged over the corrupted streams where the table has any)."""
    iid = frame[frame.rho == 1.0]
    if "corruption" in iid and (iid.corruption != "clean").any():
        iid = iid[iid.corruption != "clean"]
    iid = iid.groupby("alpha")[["bnadapt", "dart"]].mean()
    loss = (iid["bnadapt"] - iid["dart"]).sort_index()
    if loss.get(paper_alpha, np.inf) <= max_loss:
        return paper_alpha
    within = loss[loss <= max_loss]
    return float(within.index[0]) if len(within) else float(loss.idxmin())


def validate_alpha(
    *, checkpoint: Path, model: nn.Module, train: Dataset, config: DartConfig, alphas, heldout_per_class: int = 500,
    rhos=(1, 10, 100), batch_size: int = TEST_BATCH_SIZE, max_loss: float = 0.5, holdout_corruptions=(), severity: int = 5,
    device: str | None = None, progress: bool = True,
) -> tuple[pd.DataFrame, float]:
    """Train g_phi (``config`` with each alpha in ``alphas``) on the fit part of ``train`` and
    score it on the held-out part, clean and under each of ``holdout_corruptions`` at
    ``severity``; returns the table (one row per alpha, corruption and rho) and the alpha
    :func:`choose_alpha` picks, with ``config.alpha`` as the value kept unless it loses too much
    (the paper's, or the profile's). The refiners are saved beside ``checkpoint``, tagged with
    the held-out split, and reused."""
    from dartlib.dart.intermediate import load_or_train_refiners

    fit_idx, held_idx = holdout_split(train.labels, per_class=heldout_per_class, seed=config.seed)
    fit, held = _subset(train, fit_idx, "train-fit"), _subset(train, held_idx, "train-heldout")
    streams = {"clean": held, **{c: corrupted_heldout(held, corruption=c, severity=severity, seed=config.seed)
                                 for c in holdout_corruptions}}
    # the candidates differ only in alpha, so those not saved yet train together in one pass
    trained = load_or_train_refiners(checkpoint, model, fit, [replace(config, alpha=float(a)) for a in alphas],
                                     device=device, progress=progress, tag=f"fit-heldout{heldout_per_class}")
    rows = []
    for alpha, (refiner, _) in zip(alphas, trained):
        for name, data in streams.items():
            rows += [{"alpha": float(alpha), "corruption": name, **row}
                     for row in heldout_rows(model, refiner, data, rhos=rhos, batch_size=batch_size, seed=config.seed)]
    frame = pd.DataFrame(rows)
    frame["gain"] = frame["dart"] - frame["bnadapt"]
    return frame, choose_alpha(frame, paper_alpha=config.alpha, max_loss=max_loss)
