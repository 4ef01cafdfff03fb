"""Intermediate-time training of DART's g_phi (Algorithm 1) and DART-split's g_phi1, g_phi2
(Algorithm 3), once per source classifier.

The classifier is frozen; each intermediate batch is normalised with its own statistics (the
frozen BN-adapted copy f_theta_bar); only phi receives gradients.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from dartlib import __version__
from dartlib.dart import (
    AdditiveRefinementModule,
    DartConfig,
    RefinementModule,
    Refiner,
    SeverityDetector,
    additive_refine,
    batch_statistics,
    config_dict,
    cosine_lr,
    matched_hidden,
    refine,
)
from dartlib.data.protocols import apportion, class_balanced, dirichlet_stream, long_tailed_counts
from dartlib.data.sources import Dataset
from dartlib.devices import default_device
from dartlib.models import frozen_bn_adapted
from dartlib.training import to_tensor


def _unif_lt_batches(labels: np.ndarray, *, batch_size: int, n_batches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The LSA-style ablation of Table 4: batches cycling through uniform, LT (rho = 20) and
    inverse LT (rho = 20) class distributions."""
    k = int(labels.max()) + 1
    lt = long_tailed_counts(k, n_max=10**6, rho=20).astype(float)
    shapes = [np.full(k, 1.0 / k), lt / lt.sum(), lt[::-1] / lt.sum()]
    pools = [np.flatnonzero(labels == c) for c in range(k)]
    out = []
    for i in range(n_batches):
        counts = apportion(shapes[i % 3], batch_size, rng)
        out.append(rng.permutation(np.concatenate([rng.choice(pools[c], size=n, replace=n > len(pools[c]))
                                                   for c, n in enumerate(counts)])))
    return out


def _imbalanced_batches(labels: np.ndarray, config: DartConfig, epoch: int, n_batches: int) -> list[np.ndarray]:
    seed = config.seed * 100003 + epoch
    if config.sampling == "unif-lt":
        return _unif_lt_batches(labels, batch_size=config.batch_size, n_batches=n_batches, rng=np.random.default_rng(seed))
    order = dirichlet_stream(labels, delta=config.delta, n_chunks=config.n_dir, seed=seed)
    return [order[i * config.batch_size : (i + 1) * config.batch_size] for i in range(n_batches)]


CALIBRATION_STEPS = 10  # step pairs whose d standardises DART-split's detector


def train_refiner(
    model: nn.Module, train: Dataset, config: DartConfig, *, device: str = "cpu", progress: bool = True,
    max_steps: int | None = None,
) -> tuple[Refiner, list[dict]]:
    """Train g_phi (or DART-split's pair) on class-balanced D_int drawn from ``train``.

    Returns the refiner and a per-step log (epoch, step, loss terms, lr).
    """
    torch.manual_seed(config.seed)
    frozen = frozen_bn_adapted(model).to(device)
    d_int = class_balanced(train.labels, per_class=config.per_class, seed=config.seed)
    labels = train.labels[d_int]
    images = train.images[d_int]
    k = train.num_classes
    split = config.variant == "dart-split"
    additive = config.outputs == "additive"
    head = (frozen.head.weight.detach().clone(), frozen.head.bias.detach().clone()) if additive else None
    module, detector = _build(config, k, feature_dim=frozen.head.in_features if additive else None)
    module = module.to(device)
    detector = detector.to(device) if detector else None
    params = list(module.parameters()) + (list(detector.parameters()) if detector else [])
    opt = torch.optim.Adam(params, lr=config.lr)
    steps = len(d_int) // config.batch_size
    total = config.epochs * steps if max_steps is None else min(max_steps, config.epochs * steps)
    eye = torch.eye(k, device=device)
    log: list[dict] = []
    bar = tqdm(total=total, desc=f"intermediate training ({config.variant})", disable=not progress)
    step = 0

    def logits_of(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        with torch.no_grad():
            x, y = to_tensor(images[idx]).to(device), torch.from_numpy(labels[idx]).to(device)
            if not additive:
                return frozen(x), y, None
            feats = frozen.features(x)
            return frozen.head(feats), y, feats

    for epoch in range(config.epochs):
        if step >= total:
            break
        imbalanced = _imbalanced_batches(labels, config, epoch, steps)
        order = np.random.default_rng(config.seed * 100003 + epoch + 7).permutation(len(labels))
        iid = [order[i * config.batch_size : (i + 1) * config.batch_size] for i in range(steps)]
        if split and epoch == 0:  # standardise g_phi1's input with d on the first batches of both kinds
            first = [*imbalanced[:CALIBRATION_STEPS], *iid[:CALIBRATION_STEPS]]
            detector.calibrate(torch.stack([batch_statistics(logits_of(idx)[0])[1] for idx in first]))
        for i in range(steps):
            if step >= total:
                break
            l_imb, y_imb, f_imb = logits_of(imbalanced[i])
            l_bal, _, _ = logits_of(iid[i])
            p_imb, d_imb = batch_statistics(l_imb)
            p_bal, d_bal = batch_statistics(l_bal)
            out = module(p_imb, d_imb)
            refined = additive_refine(f_imb, head, out) if additive else refine(l_imb, *out)
            loss_imb = F.cross_entropy(refined, y_imb)
            entry = {"epoch": epoch + 1, "step": step + 1, "loss_imb": float(loss_imb.detach())}
            if split:
                scores = detector(torch.stack([d_bal, d_imb]))
                loss_aux = F.binary_cross_entropy_with_logits(scores, torch.tensor([0.0, 1.0], device=device))
                entry["loss_detect"] = float(loss_aux.detach())
                loss = loss_imb + loss_aux  # disjoint parameters: the same as two separate updates
            elif additive:  # identity = all additive parameters zero
                loss_aux = sum(F.mse_loss(t, torch.zeros_like(t)) for t in module(p_bal, d_bal))
                entry["loss_bal"] = float(loss_aux.detach())
                loss = loss_imb + config.alpha * loss_aux
            else:
                w_bal, b_bal = module(p_bal, d_bal)
                loss_aux = F.mse_loss(w_bal, eye) + F.mse_loss(b_bal, torch.zeros_like(b_bal))
                entry["loss_bal"] = float(loss_aux.detach())
                loss = loss_imb + config.alpha * loss_aux
            lr = cosine_lr(config.lr, step, total)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            entry["lr"] = lr
            log.append(entry)
            step += 1
            bar.update(1)
            if step % 50 == 0:
                bar.set_postfix(loss_imb=f"{entry['loss_imb']:.3f}")
    bar.close()
    module.eval()
    head = tuple(t.cpu() for t in head) if head else None
    return Refiner(module=module.cpu(), config=config, detector=detector.cpu() if detector else None, head=head), log


def refiner_path(checkpoint: Path, config: DartConfig, *, tag: str = "") -> Path:
    """``<checkpoint stem>.<variant>[-<tag>]-<hash of the config>.pt`` beside the source
    checkpoint; ``tag`` names a refiner trained on other data than the full training set (e.g.
    the fit part of a held-out split). The hash covers the settings that change the trained
    module only."""
    fields = config_dict(config)
    if config.variant == "dart-split":
        del fields["alpha"]  # Algorithm 3 has no L_bal: one split refiner serves every alpha
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]
    return checkpoint.with_name(f"{checkpoint.stem}.{config.variant}{'-' + tag if tag else ''}-{key}.pt")


def load_or_train_refiner(
    checkpoint: Path, model: nn.Module, train: Dataset, config: DartConfig, *, device: str | None = None,
    progress: bool = True, tag: str = "",
) -> tuple[Refiner, list[dict]]:
    """Reuse the refiner saved beside ``checkpoint`` for this config (and ``tag``, see
    :func:`refiner_path`), or train and save it (on ``device``, by default
    :func:`dartlib.devices.default_device`; the refiner returned is on the CPU)."""
    device = device or default_device()
    path = refiner_path(checkpoint, config, tag=tag)
    if path.is_file():
        blob = torch.load(path, map_location="cpu", weights_only=False)
        return _from_blob(blob), blob["log"]
    start = time.perf_counter()
    refiner, log = train_refiner(model, train, config, device=device, progress=progress)
    blob = {
        "module": refiner.module.state_dict(),
        "detector": refiner.detector.state_dict() if refiner.detector else None,
        "config": config_dict(config),
        "num_classes": train.num_classes,
        "head": refiner.head,
        "log": log,
        "meta": {"source_checkpoint": checkpoint.name, "train_digest": train.digest(), "seconds": time.perf_counter() - start,
                 "device": device, "dartlib_version": __version__},
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)
    return refiner, log


def _build(config: DartConfig, num_classes: int, *, feature_dim: int | None = None,
           ) -> tuple[RefinementModule | AdditiveRefinementModule, SeverityDetector | None]:
    """g_phi (DART-split's g_phi2 reads p_bar only) and, for DART-split, the detector g_phi1."""
    if config.outputs == "additive":
        hidden = matched_hidden(num_classes, feature_dim, hidden=config.hidden, inputs=config.inputs)
        return AdditiveRefinementModule(num_classes, feature_dim, hidden=hidden, inputs=config.inputs), None
    split = config.variant == "dart-split"
    module = RefinementModule(num_classes, hidden=config.hidden, inputs="pbar" if split else config.inputs,
                              outputs=config.outputs, parameterisation=config.parameterisation,
                              diagonal_only=config.diagonal_only)
    return module, SeverityDetector() if split else None


def _from_blob(blob: dict) -> Refiner:
    config = DartConfig(**blob["config"])
    head = blob.get("head")
    module, detector = _build(config, blob["num_classes"], feature_dim=head[0].shape[1] if head else None)
    module.load_state_dict(blob["module"])
    if detector is not None:
        detector.load_state_dict(blob["detector"])
    return Refiner(module=module.eval(), config=config, detector=detector, head=head)


@torch.no_grad()
def logit_statistics(model: nn.Module, images: np.ndarray, *, batch_size: int = 256, device: str = "cpu") -> dict:
    """Mean max-logit and mean logit sum of the pre-trained classifier f_theta0 (its stored BN
    statistics, eval mode) on training images: the training-side terms of the adaptive
    temperature of Appendix B (Eq. smax_5 and its Taylor approximation), as
    :attr:`dartlib.dart.Refiner.train_logit_stats` expects them."""
    net = copy.deepcopy(model).eval().to(device)  # the caller's model stays where and as it is
    max_sum, logit_sum, n = 0.0, 0.0, 0
    for start in range(0, len(images), batch_size):
        logits = net(to_tensor(images[start:start + batch_size]).to(device)).double()
        max_sum += float(logits.max(1).values.sum())
        logit_sum += float(logits.sum())
        n += logits.shape[0]
    return {"max": max_sum / n, "sum": logit_sum / n}
