"""Intermediate-time training of DART's g_phi (Algorithm 1) and DART-split's g_phi1, g_phi2
(Algorithm 3): several refiners trained in one pass over their shared intermediate batches, each
as it would be trained alone, the pass's state saved after every epoch and resumed from there.

The classifier is frozen; each intermediate batch is normalised with its own statistics (the
frozen BN-adapted copy f_theta_bar); only phi receives gradients.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from dartlib.dart.refiner import (
    AdditiveRefinementModule,
    DartConfig,
    RefinementModule,
    Refiner,
    SeverityDetector,
    additive_refine,
    batch_statistics,
    config_dict,
    matched_hidden,
    refine,
)
from dartlib.dart.intermediate_batches import STREAM_FIELDS, _imbalanced_batches, _IntermediateForward, stream_signature
from dartlib.dart.refiner_probe import INTERMEDIATE_REVISION, Probe
from dartlib.data.protocols import class_balanced
from dartlib.data.dataset import Dataset
from dartlib.devices import resident
from dartlib.models.artefacts import weights_digest
from dartlib.models import states
from dartlib.models.checkpoints import save_weights
from dartlib.models.training import cosine_lr

CALIBRATION_STEPS = 10  # step pairs whose d standardises DART-split's detector


@dataclass
class _Batch:
    """One step's pair of intermediate batches through the frozen classifier (shared by every
    refiner of the pass): the Dirichlet batch's logits, labels and, for the additive variant,
    features; the i.i.d. batch's logits; both batches' (p_bar, d)."""

    l_imb: torch.Tensor
    y_imb: torch.Tensor
    f_imb: torch.Tensor | None
    l_bal: torch.Tensor
    stats_imb: tuple[torch.Tensor, torch.Tensor]
    stats_bal: tuple[torch.Tensor, torch.Tensor]


class _Learner:
    """One refiner inside a shared pass: its module(s), optimiser, cosine schedule and log.
    Initialised exactly as a refiner trained alone (the torch seed is set right before its
    modules are built), so that a pass of several gives each the result it would get alone."""

    def __init__(self, config: DartConfig, *, num_classes: int, feature_dim: int, head, total: int, device: str):
        torch.manual_seed(config.seed)
        self.config = config
        self.split = config.variant == "dart-split"
        self.additive = config.outputs == "additive"
        self.head = head if self.additive else None
        module, detector = _build(config, num_classes, feature_dim=feature_dim if self.additive else None)
        self.module = module.to(device)
        self.detector = detector.to(device) if detector else None
        params = list(self.module.parameters()) + (list(self.detector.parameters()) if self.detector else [])
        self.opt = torch.optim.Adam(params, lr=config.lr, **({"fused": True} if resident(device) else {}))
        self.total = total
        self.eye = torch.eye(num_classes, device=device)
        self.device = device
        self.step = 0
        self._log: list[dict] = []  # the loss terms as 0-d tensors: read back once, not per step

    @property
    def log(self) -> list[dict]:
        """The per-step log (epoch, step, loss terms, lr) as plain numbers."""
        self._log = [{k: float(v) if isinstance(v, torch.Tensor) else v for k, v in row.items()} for row in self._log]
        return self._log

    @property
    def done(self) -> bool:
        return self.step >= self.total

    def update(self, epoch: int, batch: _Batch) -> None:
        """One optimiser step of Eq. 1-3 (DART) or Algorithm 3 (DART-split) on ``batch``."""
        config = self.config
        p_imb, d_imb = batch.stats_imb
        p_bal, d_bal = batch.stats_bal
        out = self.module(p_imb, d_imb)
        refined = additive_refine(batch.f_imb, self.head, out) if self.additive else refine(batch.l_imb, *out)
        loss_imb = F.cross_entropy(refined, batch.y_imb)
        entry = {"epoch": epoch + 1, "step": self.step + 1, "loss_imb": loss_imb.detach()}
        if self.split:
            scores = self.detector(torch.stack([d_bal, d_imb]))
            loss_aux = F.binary_cross_entropy_with_logits(scores, torch.tensor([0.0, 1.0], device=self.device))
            entry["loss_detect"] = loss_aux.detach()
            loss = loss_imb + loss_aux  # disjoint parameters: the same as two separate updates
        elif self.additive:  # identity = all additive parameters zero
            loss_aux = sum(F.mse_loss(t, torch.zeros_like(t)) for t in self.module(p_bal, d_bal))
            entry["loss_bal"] = loss_aux.detach()
            loss = loss_imb + config.alpha * loss_aux
        else:
            w_bal, b_bal = self.module(p_bal, d_bal)
            loss_aux = F.mse_loss(w_bal, self.eye) + F.mse_loss(b_bal, torch.zeros_like(b_bal))
            entry["loss_bal"] = loss_aux.detach()
            loss = loss_imb + config.alpha * loss_aux
        lr = cosine_lr(base=config.lr, step=self.step, total=self.total)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        entry["lr"] = lr
        self._log.append(entry)
        self.step += 1

    def refiner(self) -> Refiner:
        self.module.eval()
        head = tuple(t.cpu() for t in self.head) if self.head else None
        return Refiner(module=self.module.cpu(), config=self.config,
                       detector=self.detector.cpu() if self.detector else None, head=head)


def train_refiners(
    model: nn.Module, train: Dataset, configs: list[DartConfig], *, device: str = "cpu", progress: bool = True,
    max_steps: int | None = None, resume: Path | None = None,
) -> list[tuple[Refiner, list[dict]]]:
    """Train several refiners in one pass over their shared intermediate batches.

    Every config must agree on :data:`STREAM_FIELDS` (the batches); they may differ in anything
    else (alpha, width, inputs and outputs, variant, epochs: a shorter one stops early, on its own
    cosine schedule). The frozen classifier's forward passes, the cost of intermediate training,
    are paid once for all of them. Each refiner is bit-identical to the one :func:`train_refiner`
    trains alone (same thread count). Returns (refiner, per-step log) per config, in order.

    ``resume``: a file where the pass's state is saved after every epoch; an interrupted pass
    started again with the same file continues from its last finished epoch, bit-identically (an
    epoch's batches depend on the seed and the epoch alone), so at most the epoch in progress is
    lost. A file saved by another pass (other configs, data or source model) is ignored and
    overwritten. The caller deletes it once the refiners are saved
    (:func:`dartlib.dart.intermediate.load_or_train_refiners`).
    """
    return _train_pass(model, train, configs, device=device, progress=progress, max_steps=max_steps, resume=resume)[0]


def _train_pass(
    model: nn.Module, train: Dataset, configs: list[DartConfig], *, device: str, progress: bool,
    max_steps: int | None, resume: Path | None, probe: Probe | None = None,
) -> tuple[list[tuple[Refiner, list[dict]]], float]:
    """:func:`train_refiners`, and the pass's training seconds (those of earlier, interrupted
    attempts included when it resumes; a saved pass of another ``probe`` is not resumed)."""
    if not configs:
        return [], 0.0
    start = time.perf_counter()
    signatures = {stream_signature(c) for c in configs}
    if len(signatures) > 1:
        raise ValueError(f"refiners trained in one pass must share {', '.join(STREAM_FIELDS)}; got {sorted(signatures, key=str)}")
    first = configs[0]
    d_int = class_balanced(train.labels, per_class=first.per_class, seed=first.seed)
    labels = train.labels[d_int]
    steps = len(d_int) // first.batch_size
    any_additive = any(c.outputs == "additive" for c in configs)
    forward = _IntermediateForward(model, train.images[d_int], labels, features=any_additive, device=device)
    # only the additive variant reads the model's last layer (the one naming hook: ``head``, ``features``)
    head = (forward.head.weight.detach().clone(), forward.head.bias.detach().clone()) if any_additive else None
    feature_dim = forward.head.in_features if any_additive else 0
    learners = []
    for config in configs:
        total = config.epochs * steps if max_steps is None else min(max_steps, config.epochs * steps)
        learners.append(_Learner(config, num_classes=train.num_classes, feature_dim=feature_dim, head=head, total=total,
                                 device=device))
    identity = _pass_identity(model, train, configs, max_steps=max_steps, probe=probe)
    first_epoch, earlier_seconds = (_restore_pass(resume, identity, learners, device=device, steps=steps) if resume
                                     else (0, 0.0))
    names = ", ".join(sorted({c.variant for c in configs}))
    bar = tqdm(total=max(l.total for l in learners), initial=max(l.step for l in learners),
               desc=f"intermediate training ({names}, {len(configs)} at once)",
               **({} if progress else {"disable": True}))  # TQDM_DISABLE=1 silences it

    detectors = [l.detector for l in learners if l.split]
    for epoch in range(first_epoch, max(c.epochs for c in configs)):
        if all(l.done for l in learners):
            break
        imbalanced = _imbalanced_batches(labels, first, epoch, steps)
        order = np.random.default_rng(first.seed * 100003 + epoch + 7).permutation(len(labels))
        iid = [order[i * first.batch_size : (i + 1) * first.batch_size] for i in range(steps)]
        if detectors and epoch == 0:  # standardise g_phi1's input with d on the first batches of both kinds
            outputs = forward([*imbalanced[:CALIBRATION_STEPS], *iid[:CALIBRATION_STEPS]])
            first_d = torch.stack([batch_statistics(logits)[1] for logits, _, _ in outputs])
            for detector in detectors:
                detector.calibrate(first_d)
        for s0 in range(0, steps, forward.chunk):
            if all(l.done for l in learners):
                break
            m = min(steps - s0, forward.chunk, max(l.total - l.step for l in learners))  # no forward past the last step
            outputs = forward([*imbalanced[s0 : s0 + m], *iid[s0 : s0 + m]])  # the Dirichlet batches, then the i.i.d.
            for (l_imb, y_imb, f_imb), (l_bal, _, _) in zip(outputs[:m], outputs[m:]):
                active = [l for l in learners if not l.done]
                if not active:
                    break
                batch = _Batch(l_imb=l_imb, y_imb=y_imb, f_imb=f_imb, l_bal=l_bal, stats_imb=batch_statistics(l_imb),
                               stats_bal=batch_statistics(l_bal))
                for learner in active:
                    learner.update(epoch, batch)
                bar.update(1)
                if active[0].step % 50 == 0 and not bar.disable:
                    bar.set_postfix(loss_imb=f"{float(active[0]._log[-1]['loss_imb']):.3f}")
        if resume is not None:
            _save_pass(resume, identity, learners, epochs_done=epoch + 1,
                       seconds=earlier_seconds + time.perf_counter() - start)
    bar.close()
    return [(l.refiner(), l.log) for l in learners], earlier_seconds + time.perf_counter() - start


def _pass_identity(model: nn.Module, train: Dataset, configs: list[DartConfig], *, max_steps: int | None,
                   probe: Probe | None = None) -> dict:
    """What decides a pass's result: its configs and step limit, the training data, the source model
    (and, where the caller gives one, what the model computes and the code's revision)."""
    identity = {"configs": [config_dict(c) for c in configs], "max_steps": max_steps, "train_digest": train.digest(),
                "model_digest": weights_digest(model)}
    if probe is not None:
        identity |= {"probe_digest": probe.digest, "intermediate_revision": INTERMEDIATE_REVISION}
    return identity


def _save_pass(path: Path, identity: dict, learners: list[_Learner], *, epochs_done: int, seconds: float) -> None:
    """Every learner's modules, optimiser state, step and log after ``epochs_done`` epochs, sealed
    with their digest (:func:`dartlib.models.states.sealed`)."""
    state = [{"module": l.module.state_dict(), "detector": l.detector.state_dict() if l.detector else None,
              "optimizer": l.opt.state_dict(), "step": l.step, "log": l.log} for l in learners]
    save_weights(states.sealed({"identity": identity, "epochs_done": epochs_done, "seconds": seconds, "learners": state,
                         "torch_rng": torch.get_rng_state()}), path=path)


def _check_pass(blob: dict, learners: list[_Learner], *, steps: int) -> None:
    """Raise :class:`~dartlib.models.states.StateProblem` unless ``blob`` is a state the pass of
    ``learners`` (``steps`` optimiser steps per epoch) can continue: one entry per learner, each
    learner's step count ``min(its total, epochs_done * steps)`` and its optimiser's alike, one log
    entry per step, every weight and optimiser tensor of its module's shape and finite."""
    epochs_done = states.count("its epochs_done", blob["epochs_done"], low=1,
                               high=max(l.config.epochs for l in learners))
    states.seconds(blob["seconds"])
    states.rng_state(blob.get("torch_rng"))
    saved = blob["learners"]
    if not isinstance(saved, list) or len(saved) != len(learners):
        size = len(saved) if isinstance(saved, list) else type(saved).__name__
        raise states.StateProblem(f"it holds {size} learners, the pass trains {len(learners)}")
    for i, (learner, state) in enumerate(zip(learners, saved)):
        what = f"learner {i + 1} ({learner.config.variant}, alpha {learner.config.alpha:g})"
        if not isinstance(state, dict) or not {"module", "detector", "optimizer", "step", "log"} <= set(state):
            raise states.StateProblem(f"{what} lacks its module, optimiser, step or log")
        expected = min(learner.total, epochs_done * steps)
        step = states.count(f"{what}'s step", state["step"], low=0, high=learner.total)
        if step != expected:
            raise states.StateProblem(f"{what} is at step {step}, {epochs_done} epochs of {steps} steps give {expected}")
        log = state["log"]
        last = log[-1] if isinstance(log, list) and log and isinstance(log[-1], dict) else {}
        if (not isinstance(log, list) or len(log) != step
                or (step and (last.get("step") != step or last.get("epoch") not in range(1, epochs_done + 1)))):
            raise states.StateProblem(f"{what}'s log does not record its {step} steps")
        states.same_tensors(f"{what}'s module", state["module"], learner.module.state_dict())
        if learner.detector is not None:
            states.same_tensors(f"{what}'s detector", state["detector"], learner.detector.state_dict())
        states.optimizer_state(f"{what}'s optimiser", state["optimizer"], learner.opt, steps=step)


def _restore_pass(path: Path, identity: dict, learners: list[_Learner], *, device: str,
                  steps: int) -> tuple[int, float]:
    """Load a pass saved by :func:`_save_pass` into ``learners``; returns (first epoch to run,
    seconds spent so far), or (0, 0.0) where there is no file or it belongs to another pass. A
    state that is damaged (cut short by a full disk, say), altered after it was saved (its digest)
    or not one the pass can continue (:func:`_check_pass`) is set aside with one warning naming it,
    and the pass starts over."""
    blob = states.open_state(path, what="the refiners' training", map_location=device,
                             required=("identity", "epochs_done", "seconds", "learners"),
                             check=lambda b: b["identity"] != identity or _check_pass(b, learners, steps=steps))
    if blob is None or blob["identity"] != identity:
        return 0, 0.0
    for learner, state in zip(learners, blob["learners"]):
        learner.module.load_state_dict(state["module"])
        if learner.detector is not None:
            learner.detector.load_state_dict(state["detector"])
        learner.opt.load_state_dict(state["optimizer"])
        learner.step, learner._log = state["step"], state["log"]
    torch.set_rng_state(blob["torch_rng"])
    return blob["epochs_done"], blob["seconds"]


def train_refiner(
    model: nn.Module, train: Dataset, config: DartConfig, *, device: str = "cpu", progress: bool = True,
    max_steps: int | None = None,
) -> tuple[Refiner, list[dict]]:
    """Train g_phi (or DART-split's pair) on class-balanced D_int drawn from ``train``.

    Returns the refiner and a per-step log (epoch, step, loss terms, lr).
    """
    return train_refiners(model, train, [config], device=device, progress=progress, max_steps=max_steps)[0]


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
