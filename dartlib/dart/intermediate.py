"""Intermediate-time training of DART's g_phi (Algorithm 1) and DART-split's g_phi1, g_phi2
(Algorithm 3), once per source classifier.

The classifier is frozen; each intermediate batch is normalised with its own statistics (the
frozen BN-adapted copy f_theta_bar); only phi receives gradients.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from dartlib import __version__
from dartlib.provenance import cpu_model_name
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
from dartlib.data.protocols import apportion, batches, class_balanced, dirichlet_stream, long_tailed_counts
from dartlib.data.files import DamagedFileError
from dartlib.data.dataset import Dataset
from dartlib.devices import autocast, default_device, resident
from dartlib.models.backbones import GroupedBNAdapted, frozen_bn_adapted
from dartlib.data.augmentation import images_to_float, to_tensor
from dartlib.models.artefacts import refused, weights_digest
from dartlib.models import states
from dartlib.models.checkpoints import load_weights, save_weights
from dartlib.models.training import cosine_lr


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
    def batches_of(n_chunks: int, stream_seed: int) -> list[np.ndarray]:
        order = dirichlet_stream(labels, delta=config.delta, n_chunks=n_chunks, seed=stream_seed,
                                 shuffle_chunks=config.chunk_order == "shuffled")
        return batches(order, batch_size=config.batch_size)[:n_batches]

    out = batches_of(config.n_dir, seed)
    if config.mix_n_dir:  # every other batch from a stream of mix_n_dir chunks (a variant, not the paper's)
        out[1::2] = batches_of(config.mix_n_dir, seed + 50021)[1::2]
    return out


CALIBRATION_STEPS = 10  # step pairs whose d standardises DART-split's detector

# The revision of the intermediate-training code (Algorithm 1, Algorithm 3): bumped whenever this
# module trains a different g_phi from the same model, data and DartConfig, so that a refiner saved
# by the older code is not reused for the newer (:func:`reusable`). Saved in every refiner's
# metadata; it is not part of a refiner's file name (:func:`refiner_path`), which stays a digest of
# the settings.
INTERMEDIATE_REVISION = "1"
PROBE_IMAGES = 16  # training images of the probe batch (:func:`model_probe`)
PROBE_SEED = 0  # which ones
# Two probes agree when every logit is within this fraction of the probe's largest |logit| (float
# noise of another device or kernel stays far below it; a changed layer or activation does not).
PROBE_TOLERANCE = 1e-3


# The settings that decide the intermediate batches: refiners that agree on them read the same
# batches and can train in one pass over them (:func:`train_refiners`).
STREAM_FIELDS = ("seed", "per_class", "delta", "n_dir", "batch_size", "sampling", "chunk_order", "mix_n_dir")


def stream_signature(config: DartConfig) -> tuple:
    """The values of :data:`STREAM_FIELDS` in ``config``."""
    return tuple(getattr(config, name) for name in STREAM_FIELDS)


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
    overwritten. The caller deletes it once the refiners are saved (:func:`load_or_train_refiners`).
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


# Intermediate steps whose batches go through the frozen classifier in one forward on a GPU.
RESIDENT_CHUNK = 16


class _IntermediateForward:
    """The frozen BN-adapted classifier f_theta_bar on intermediate batches of D_int: ``self(batches)``
    gives (logits, labels, features or None) per batch, each batch normalised with its own
    statistics. On the CPU one batch at a time from host images (bit-identical to a forward of
    that batch alone); on a GPU (:func:`dartlib.devices.resident`) D_int lives there as uint8 and
    :attr:`chunk` steps' batches go through one grouped forward
    (:class:`dartlib.models.backbones.GroupedBNAdapted`), in the device's precision."""

    def __init__(self, model: nn.Module, images: np.ndarray, labels: np.ndarray, *, features: bool, device: str) -> None:
        self.device, self.features = device, features
        self.on_device = resident(device)
        self.chunk = RESIDENT_CHUNK if self.on_device else 1
        self.labels = torch.from_numpy(labels).to(device)
        if self.on_device:
            self.frozen = GroupedBNAdapted(model).to(device, memory_format=torch.channels_last)
            self.images = torch.from_numpy(np.ascontiguousarray(images)).to(device)
        else:
            self.frozen = frozen_bn_adapted(model).to(device)
            self.images = images
        self.head = self.frozen.head if features else None  # a user's model need not name its last layer

    def __call__(self, batches: list[np.ndarray]) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
        if self.on_device and len({len(b) for b in batches}) == 1:
            return self._forward(np.concatenate(batches), group=len(batches[0]))
        return [out for b in batches for out in self._forward(b, group=None)]

    @torch.no_grad()
    def _forward(self, idx: np.ndarray, *, group: int | None) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
        """(logits, labels, features or None) of each run of ``group`` images of ``idx`` (None: all of
        them, one batch)."""
        if self.on_device:
            x = images_to_float(self.images[torch.from_numpy(idx).to(self.device)])
        else:
            x = to_tensor(self.images[idx]).to(self.device)
        y = self.labels[torch.from_numpy(idx).to(self.device)]
        grouped = {"group": group} if self.on_device else {}
        with autocast(self.device):
            out = (self.frozen.features if self.features else self.frozen)(x, **grouped).float()
        # frozen(x) is head(features(x)): the same logits
        feats, logits = (out, self.frozen.head(out)) if self.features else (None, out)
        size = group or len(idx)
        return [(logits[i : i + size], y[i : i + size], None if feats is None else feats[i : i + size])
                for i in range(0, len(idx), size)]


@dataclass(frozen=True)
class Probe:
    """What a classifier computes, as DART sees it: the logits of its frozen BN-adapted copy
    f_theta0_bar (Section 3) on a fixed probe batch of :data:`PROBE_IMAGES` training images drawn
    with :data:`PROBE_SEED`, and their digest. Two models with the same weights and buffers but
    another forward (an activation, a layer's order) give other logits: a refiner trained for one
    is not reused for the other (:func:`reusable`)."""

    logits: torch.Tensor  # float32, on the CPU
    digest: str

    def agrees(self, logits: torch.Tensor) -> bool:
        """Whether ``logits`` (a saved probe's) are this probe's, within :data:`PROBE_TOLERANCE`."""
        if not isinstance(logits, torch.Tensor) or logits.shape != self.logits.shape:
            return False
        scale = float(self.logits.abs().max()) or 1.0
        return bool(torch.allclose(logits.float(), self.logits, rtol=0.0, atol=PROBE_TOLERANCE * scale))

    def meta(self) -> dict:
        """The entries a saved refiner's metadata holds for it (with the code revision)."""
        return {"probe_digest": self.digest, "probe_logits": self.logits, "probe_images": PROBE_IMAGES,
                "probe_seed": PROBE_SEED, "intermediate_revision": INTERMEDIATE_REVISION}


@torch.no_grad()
def model_probe(model: nn.Module, train: Dataset, *, device: str = "cpu") -> Probe:
    """The :class:`Probe` of ``model``: f_theta0_bar's logits on :data:`PROBE_IMAGES` images of
    ``train`` (chosen with :data:`PROBE_SEED`), computed on ``device`` in float32. The digest is
    sha256 over the logits rounded to 3 significant digits (an identifier; :meth:`Probe.agrees`
    decides with a tolerance)."""
    rng = np.random.default_rng(PROBE_SEED)
    idx = np.sort(rng.choice(len(train.labels), size=min(PROBE_IMAGES, len(train.labels)), replace=False))
    logits = frozen_bn_adapted(model).to(device)(to_tensor(train.images[idx]).to(device)).float().cpu()
    rounded = np.array([float(f"{v:.3g}") for v in logits.double().flatten().tolist()])
    digest = hashlib.sha256(json.dumps({"shape": list(logits.shape), "logits": rounded.tolist()}).encode()).hexdigest()
    return Probe(logits=logits, digest=digest[:16])


def saved_meta(path: Path) -> dict:
    """The metadata of the refiner saved at ``path`` (empty where it has none)."""
    return dict(load_weights(path, required=("module", "config")).get("meta") or {})


def reusable(path: Path, probe: Probe) -> bool:
    """Whether the refiner saved at ``path`` was trained for the model that ``probe`` describes, by
    this revision of the code (:data:`INTERMEDIATE_REVISION`): its file exists, its metadata holds
    the same revision and its probe logits agree with ``probe``'s. A refiner saved before the probe
    was recorded is not reusable (it is trained anew)."""
    if not path.is_file():
        return False
    try:
        meta = saved_meta(path)
    except DamagedFileError:
        return False
    return meta.get("intermediate_revision") == INTERMEDIATE_REVISION and probe.agrees(meta.get("probe_logits"))


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


def pass_path(checkpoint: Path, refiners: list[Path]) -> Path:
    """Where a pass training the refiners saved at ``refiners`` keeps its state between epochs:
    ``<checkpoint stem>.pass-<hash of their names>.partial.pt``, beside them (never committed:
    :func:`dartlib.models.artefacts.committed_files` skips ``*.partial.pt``)."""
    key = hashlib.sha256("\n".join(sorted(p.name for p in refiners)).encode()).hexdigest()[:12]
    return checkpoint.with_name(f"{checkpoint.stem}.pass-{key}.partial.pt")


def load_or_train_refiner(
    checkpoint: Path, model: nn.Module, train: Dataset, config: DartConfig, *, device: str | None = None,
    progress: bool = True, tag: str = "",
) -> tuple[Refiner, list[dict]]:
    """Reuse the refiner saved beside ``checkpoint`` for this config (and ``tag``, see
    :func:`refiner_path`), or train and save it (on ``device``, by default
    :func:`dartlib.devices.default_device`; the refiner returned is on the CPU)."""
    return load_or_train_refiners(checkpoint, model, train, [config], device=device, progress=progress, tag=tag)[0]


def load_or_train_refiners(
    checkpoint: Path, model: nn.Module, train: Dataset, configs: list[DartConfig], *, device: str | None = None,
    progress: bool = True, tag: str = "", probe: Probe | None = None,
) -> list[tuple[Refiner, list[dict]]]:
    """:func:`load_or_train_refiner` for several configs: those not saved yet are trained in one
    pass per set of shared intermediate batches (:func:`train_refiners`), which gives each the
    refiner it would get alone at a fraction of the cost; a pass saves its state after every epoch
    (:func:`pass_path`) and, interrupted, resumes from there when called again. Returns (refiner,
    log) per config.

    ``probe`` (:func:`model_probe`; what :func:`dartlib.dart.fit.fit_refiner` passes): a saved
    refiner is reused only where it is :func:`reusable` for it, i.e. trained for a model that
    computes the same logits, by the same :data:`INTERMEDIATE_REVISION`; any other is trained anew
    and its file overwritten. Without it a saved file is reused as it is (the suite's refiners,
    which sit beside the one checkpoint they were trained for). Every refiner saved records the
    probe and the revision in its metadata."""
    device = device or default_device()
    paths = [refiner_path(checkpoint, config, tag=tag) for config in configs]
    missing: dict[tuple, dict[Path, DartConfig]] = {}
    for path, config in zip(paths, configs):
        if not (path.is_file() if probe is None else reusable(path, probe)):
            missing.setdefault(stream_signature(config), {})[path] = config
    fresh: dict[Path, tuple[Refiner, list[dict]]] = {}
    if missing and probe is None:
        probe = model_probe(model, train, device=device)  # recorded in the files' metadata
        resume_probe = None  # the suite's passes resume as before
    else:
        resume_probe = probe
    for group in missing.values():
        in_progress = pass_path(checkpoint, list(group))
        trained, seconds = _train_pass(model, train, list(group.values()), device=device, progress=progress,
                                       max_steps=None, resume=in_progress, probe=resume_probe)
        for path, (refiner, log) in zip(group, trained):
            _save(path, refiner, log, checkpoint=checkpoint, train=train, device=device,
                  timing={"seconds": seconds, "trained_with": len(group)}, probe=probe)
            fresh[path] = (refiner, log)
        in_progress.unlink(missing_ok=True)
    return [fresh[path] if path in fresh else _load(path, checkpoint=checkpoint, tag=tag) for path in paths]


def _load(path: Path, *, checkpoint: Path, tag: str = "") -> tuple[Refiner, list[dict]]:
    """The refiner saved at ``path`` for the source ``checkpoint``, once it is seen to be what its
    name says (:func:`refused_because`). One that is not is set aside
    (:func:`dartlib.data.files.set_aside`) and :class:`~dartlib.data.files.DamagedFileError` names
    it: a refiner of another configuration copied under this name would otherwise be applied as
    this one, and every row computed with it would be wrong without a sign."""
    blob = load_weights(path, required=("module", "config", "num_classes", "log"))
    problem = refused_because(path, blob, checkpoint=checkpoint, tag=tag)
    if problem is None and states.DIGEST in blob and states.state_digest(blob) != blob[states.DIGEST]:
        problem = "its contents do not match the digest stored with them (altered after it was saved)"
    if problem is None:
        try:
            refiner = _from_blob(blob)
        except (RuntimeError, TypeError, KeyError, IndexError) as err:  # a size mismatch, a setting it lacks
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            problem = f"its weights or settings do not make a refiner ({first[:160]})"
    if problem is not None:
        raise refused(path, problem, anew="run the same command again: it trains the refiner anew") from None
    return refiner, blob["log"]


def refused_because(path: Path, blob: dict, *, checkpoint: Path, tag: str = "") -> str | None:
    """Why the refiner file ``path`` (its contents ``blob``) is not the one its name promises, or
    None: its stored config must derive to its name (:func:`refiner_path` of ``checkpoint`` and
    ``tag``) and the source it records must be ``checkpoint``. (:func:`_load` then checks the digest
    a refiner is saved with, :func:`dartlib.models.states.sealed`, where it has one: refiners saved
    before it was added have none; and compares a file listed in the ``MANIFEST.json`` beside it with
    the sha256 recorded there.)"""
    try:
        config = DartConfig(**blob["config"])
    except (TypeError, ValueError) as err:
        return f"its config is not a DART configuration ({str(err)[:120]})"
    named = refiner_path(checkpoint, config, tag=tag)
    if named != path:
        return (f"it holds another refiner ({config.variant}, alpha {config.alpha:g}, {config.epochs} epochs, "
                f"hidden {config.hidden}, N_dir {config.n_dir}), whose name is {named.name}")
    source = (blob.get("meta") or {}).get("source_checkpoint")
    if source is not None and source != checkpoint.name:
        return f"it was trained for the source model {source}, not {checkpoint.name}"
    return None


LOG_EVERY = 50  # steps between the entries a compacted training log keeps


def compact_log(log: list[dict], *, every: int = LOG_EVERY) -> list[dict]:
    """A refiner's per-step training log kept every ``every`` steps (and its last step), each value a
    plain float: what the training-curve figures read, at a fraction of the size (a 50-epoch refiner's
    full log is most of its file)."""
    keep = [e for i, e in enumerate(log) if i % every == 0 or i == len(log) - 1]
    return [{k: float(v) if isinstance(v, torch.Tensor) else v for k, v in e.items()} for e in keep]


def compact_refiner_file(path: Path, *, every: int = LOG_EVERY) -> bool:
    """Rewrite the refiner file ``path`` with :func:`compact_log` of its log (module and config
    untouched; ``meta.log`` records the step interval, the full log's length and the sha256 of the
    file before). False where its log is compact already."""
    from dartlib.provenance import sha256_file

    blob = load_weights(path, required=("module", "config", "log"))
    meta = blob.get("meta", {})
    if "log" in meta:
        return False
    before = sha256_file(path)
    steps = len(blob["log"])
    blob["log"] = compact_log(blob["log"], every=every)
    blob["meta"] = {**meta, "log": {"every": every, "steps": steps, "full_file_sha256": before}}
    save_weights(states.sealed(blob) if states.DIGEST in blob else blob, path=path)
    return True


def _save(path: Path, refiner: Refiner, log: list[dict], *, checkpoint: Path, train: Dataset, device: str,
          timing: dict, probe: Probe | None = None) -> None:
    """The refiner, its config, log and provenance, written atomically to ``path``. ``timing``:
    the seconds of the pass that trained it and how many refiners shared that pass; ``probe``: what
    the model it was trained for computes (recorded with :data:`INTERMEDIATE_REVISION`)."""
    blob = {
        "module": refiner.module.state_dict(),
        "detector": refiner.detector.state_dict() if refiner.detector else None,
        "config": config_dict(refiner.config),
        "num_classes": train.num_classes,
        "head": refiner.head,
        "log": log,
        "meta": {"source_checkpoint": checkpoint.name, "train_digest": train.digest(), **timing,
                 "device": device, "cpu": cpu_model_name(), "dartlib_version": __version__,
                 **(probe.meta() if probe else {})},
    }
    save_weights(states.sealed(blob), path=path)  # checked when read: a refiner in a cache has no MANIFEST entry


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
    :attr:`dartlib.dart.refiner.Refiner.train_logit_stats` expects them."""
    net = copy.deepcopy(model).eval().to(device)  # the caller's model stays where and as it is
    max_sum, logit_sum, n = 0.0, 0.0, 0
    for start in range(0, len(images), batch_size):
        logits = net(to_tensor(images[start:start + batch_size]).to(device)).double()
        max_sum += float(logits.max(1).values.sum())
        logit_sum += float(logits.sum())
        n += logits.shape[0]
    return {"max": max_sum / n, "sum": logit_sum / n}
