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

from collections.abc import Sequence
from dataclasses import dataclass, replace
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
                 seed: int = 0, device: str | None = None) -> list[dict]:
    """For each rho: BNAdapt and BNAdapt+DART accuracy on the held-out long-tailed stream (rho = 1:
    every held-out image, shuffled), and the mean ||W_B - I||_F and ||b_B||_2 over its batches.
    ``device``: where the streams are evaluated (default: the machine's)."""
    frozen, device = evaluated_on(frozen_bn_adapted(model), device)  # one device copy for every rho
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


# The candidates :func:`select_alpha` tries by default: the paper's 0.1 and stronger identity
# regularisers, a factor of about 3 apart.
DEFAULT_ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


@dataclass(frozen=True)
class AlphaSearch:
    """What the rule of this module searches and how it scores: the candidate ``alphas``,
    ``heldout_per_class`` training images of every class held out (None: a fifth of the smallest
    class, at most 500), the held-out streams' ``rhos`` (1, the i.i.d. stream the rule reads, among
    them) in test batches of ``batch_size``, and ``max_loss``, the accuracy points BNAdapt+DART may
    lose to BNAdapt on the i.i.d. stream before the rule leaves the kept alpha."""

    alphas: Sequence[float] = DEFAULT_ALPHAS
    heldout_per_class: int | None = None
    rhos: Sequence[float] = (1, 10, 100)
    batch_size: int = TEST_BATCH_SIZE
    max_loss: float = 0.5

    def heldout(self, labels: np.ndarray, *, num_classes: int) -> int:
        """Images held out per class: ``heldout_per_class``, or a fifth of the smallest class (at most 500)."""
        smallest = int(np.bincount(labels, minlength=num_classes).min())
        return min(500, smallest // 5) if self.heldout_per_class is None else self.heldout_per_class


def validate_alpha(
    *, checkpoint: Path, model: nn.Module, train: Dataset, config: DartConfig, search: AlphaSearch = AlphaSearch(),
    holdout_corruptions=(), severity: int = 5, device: str | None = None, progress: bool = True,
) -> tuple[pd.DataFrame, float]:
    """Train g_phi (``config`` with each alpha of ``search``) on the fit part of ``train`` and
    score it on the held-out part (:class:`AlphaSearch`), clean and under each of ``holdout_corruptions`` at
    ``severity``; returns the table (one row per alpha, corruption and rho) and the alpha
    :func:`choose_alpha` picks, with ``config.alpha`` as the value kept unless it loses too much
    (the paper's, or the profile's). The refiners are saved beside ``checkpoint``, tagged with
    the held-out split, and reused."""
    from dartlib.dart.intermediate import load_or_train_refiners

    alphas, held_n = search.alphas, search.heldout(train.labels, num_classes=len(train.classes))
    fit_idx, held_idx = holdout_split(train.labels, per_class=held_n, seed=config.seed)
    fit, held = _subset(train, fit_idx, "train-fit"), _subset(train, held_idx, "train-heldout")
    streams = {"clean": held, **{c: corrupted_heldout(held, corruption=c, severity=severity, seed=config.seed)
                                 for c in holdout_corruptions}}
    # the candidates differ only in alpha, so those not saved yet train together in one pass
    trained = load_or_train_refiners(checkpoint, model, fit, [replace(config, alpha=float(a)) for a in alphas],
                                     device=device, progress=progress, tag=f"fit-heldout{held_n}")
    rows = []
    for alpha, (refiner, _) in zip(alphas, trained):
        for name, data in streams.items():
            rows += [{"alpha": float(alpha), "corruption": name, **row}
                     for row in heldout_rows(model, refiner, data, rhos=search.rhos, batch_size=search.batch_size,
                                             seed=config.seed)]
    frame = pd.DataFrame(rows)
    frame["gain"] = frame["dart"] - frame["bnadapt"]
    return frame, choose_alpha(frame, paper_alpha=config.alpha, max_loss=search.max_loss)


@dataclass
class AlphaChoice:
    """What :func:`select_alpha` returns: the alpha the rule picks, the value it keeps unless that
    one loses too much (``kept``, the config's alpha: the paper's 0.1 by default), the largest
    loss allowed, and the held-out table (one row per alpha and rho: ``n`` images, ``bnadapt`` and
    ``dart`` accuracy in %, ``gain`` = dart - bnadapt, mean ||W_B - I||_F ``w_minus_i`` and
    ||b_B||_2 ``b_norm``)."""

    alpha: float
    kept: float
    max_loss: float
    table: pd.DataFrame

    def gains(self) -> pd.DataFrame:
        """DART's gain (points) on the held-out streams: rows alpha, columns rho."""
        return self.table.pivot_table(index="alpha", columns="rho", values="gain")

    def __str__(self) -> str:
        gain = self.gains()[1.0]
        kept = f"{self.kept:g} changes accuracy on held-out i.i.d. batches by {gain[self.kept]:+.2f} points"
        why = (f"{kept}, within the {self.max_loss:g} allowed" if self.alpha == self.kept else
               f"{kept}, a loss of more than {self.max_loss:g}; {self.alpha:g} ({gain[self.alpha]:+.2f}) is the "
               "smallest candidate within it" if -gain[self.alpha] <= self.max_loss else
               f"{kept}; every candidate loses more than {self.max_loss:g} and {self.alpha:g} "
               f"({gain[self.alpha]:+.2f}) loses least")
        return f"alpha = {self.alpha:g}: {why}"


def select_alpha(
    *, model: nn.Module, data, num_classes: int, device: str, config: DartConfig | None = None,
    search: AlphaSearch = AlphaSearch(), cache_dir: Path | str | None = None, progress: bool = True,
) -> AlphaChoice:
    """Choose alpha, the weight of L_bal (Eq. 3), for your own classifier from its labelled
    training data alone (no test labels), by the rule of this module: keep ``config.alpha`` (the
    paper's 0.1 by default) unless BNAdapt+DART loses more than ``search.max_loss`` points to BNAdapt
    on held-out i.i.d. batches; otherwise take the smallest candidate of ``search.alphas`` that loses
    at most that much (the one that loses least when none does).

    ``model``, ``data``, ``num_classes``, ``device``, ``config``, ``cache_dir``: as
    :func:`dartlib.dart.fit.fit_refiner` takes them (any ``nn.Module`` with BatchNorm layers
    returning logits for float N x C x H x W in [0, 1]; ``(images, labels)`` as numpy arrays or
    torch tensors, a torch Dataset, ...). ``search`` (:class:`AlphaSearch`): the candidates, the
    images held out per class, the streams' rhos and the loss allowed; g_phi is trained for every
    candidate (in one pass, Algorithm 1, with ``config``'s other settings: validate with the epochs
    you will deploy) on the rest and scored on held-out streams, i.i.d. and long-tailed at its rhos
    (:func:`heldout_rows`). The refiners are cached as :func:`fit_refiner` caches its own. Raises
    :class:`dartlib.dart.fit.SettingError` naming the fix for data, a model or a setting that
    cannot work."""
    from dartlib.dart.fit import (
        SettingError, cache_key, check_device, check_model, check_supported, default_cache_dir, labelled_images,
    )
    from dartlib.dart.intermediate import load_or_train_refiners, model_probe

    config = DartConfig() if config is None else config
    device = check_device(device)
    alphas = sorted({float(a) for a in search.alphas} | {float(config.alpha)})
    if any(a < 0 for a in alphas):
        raise SettingError(f"alphas {alphas}: the weight of L_bal is >= 0")
    if 1.0 not in {float(r) for r in search.rhos}:
        raise SettingError(f"rhos={list(search.rhos)}: the rule reads the i.i.d. stream, so rhos must include 1")
    train = labelled_images(data, num_classes=num_classes)
    smallest = int(np.bincount(train.labels, minlength=num_classes).min())
    held_n = search.heldout(train.labels, num_classes=num_classes)
    if not 1 <= held_n < smallest:
        raise SettingError(f"heldout_per_class={held_n}: hold out at least 1 and fewer than the smallest class's "
                           f"{smallest} images (default: a fifth of it)")
    fit_idx, held_idx = holdout_split(train.labels, per_class=held_n, seed=config.seed)
    fit, held = _subset(train, fit_idx, "train-fit"), _subset(train, held_idx, "train-heldout")
    check_model(model, fit, num_classes=num_classes, device=device, config=config)
    check_supported(fit.labels, config, num_classes=num_classes)
    folder = Path(default_cache_dir() if cache_dir is None else cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    anchor = folder / f"refiner-{cache_key(model, train)}.pt"
    trained = load_or_train_refiners(anchor, model, fit, [replace(config, alpha=a) for a in alphas], device=device,
                                     progress=progress, tag=f"fit-heldout{held_n}",
                                     probe=model_probe(model, fit, device=device))
    rows = []
    for alpha, (refiner, _) in zip(alphas, trained):
        rows += [{"alpha": alpha, **row} for row in heldout_rows(model, refiner, held, rhos=search.rhos,
                                                                  batch_size=search.batch_size, seed=config.seed,
                                                                  device=device)]
    frame = pd.DataFrame(rows)
    frame["gain"] = frame["dart"] - frame["bnadapt"]
    chosen = choose_alpha(frame, paper_alpha=float(config.alpha), max_loss=search.max_loss)
    return AlphaChoice(alpha=chosen, kept=float(config.alpha), max_loss=search.max_loss, table=frame)
