"""Fast paths for a GPU (they also run on the CPU, for tests): new code beside the CPU path,
which stays as it is.

- :func:`train_source_fast`: source training with the whole training set resident on the device
  as uint8, the augmentation (pad-4 crop + flip, flip, or random-resized-crop + flip) done there
  per batch, bfloat16 autocast and channels-last on a GPU, no host round trip per step; writes a
  checkpoint in :mod:`dartlib.models.training`'s format, at its path, so every loader finds it.
- :func:`train_refiners_fast`: g_phi's intermediate training (Algorithm 1; DART-split's
  Algorithm 3) on the same intermediate batches as :func:`dartlib.dart.intermediate.train_refiners`,
  with D_int resident on the device, the frozen classifier's forward passes of many steps done in
  one call (each batch of 64 still normalised with its own statistics: :class:`GroupedBNAdapt`),
  the DART refiners that differ only in alpha trained as one stacked module, and the per-step
  losses logged on the device (read once at the end).
- :func:`evaluate_cell_fast`: a test-time cell with the corrupted test set resident on the
  device, the correct predictions counted there (one host read per cell), and f_theta0_bar's
  memo keyed by the stream and the batch index (:class:`StreamSourceLogits`) instead of a
  digest of each batch's bytes.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dartlib import __version__
from dartlib.dart.refiner import DartConfig, Refiner, RefinementModule
from dartlib.data.protocols import class_balanced
from dartlib.data.sources import Dataset, load
from dartlib.models.backbones import BN_TYPES, build, frozen_bn_adapted
from dartlib.models.training import cosine_lr, save_weights
from dartlib.experiments.engine import SharedSourceLogits, TestTimeContext, cell_options, cell_stream

# --------------------------------------------------------------------------- device data


def device_images(images: np.ndarray, device: str) -> torch.Tensor:
    """uint8 NHWC images as a uint8 NHWC tensor on ``device``."""
    return torch.from_numpy(np.ascontiguousarray(images)).to(device)


def to_float(x: torch.Tensor) -> torch.Tensor:
    """uint8 NHWC (on any device) -> float NCHW in [0, 1], the values of
    :func:`dartlib.data.augmentation.to_tensor`; on a GPU the result is channels-last in memory."""
    out = x.permute(0, 3, 1, 2).float().div_(255.0)
    return out if out.is_cuda else out.contiguous()


def autocast(device: str, precision: str):
    """bfloat16 autocast on a GPU when ``precision == "bf16"``, else nothing."""
    enabled = precision == "bf16" and str(device).startswith("cuda")
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=enabled)


class _Bf16Forward:
    """Mixin: forward (and features) under bfloat16 autocast, float32 out. Everything outside the
    backbone (refiner, losses, softmax statistics) stays in float32."""

    def forward(self, x):  # noqa: D401
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = super().forward(x)
        return out.float()

    def features(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = super().features(x)
        return out.float()


_BF16_CLASSES: dict[type, type] = {}


def bf16_forward(model: nn.Module) -> nn.Module:
    """``model`` (in place) with its forward under bfloat16 autocast on a GPU; deep copies keep it."""
    cls = type(model)
    if issubclass(cls, _Bf16Forward):
        return model
    if cls not in _BF16_CLASSES:
        _BF16_CLASSES[cls] = type(f"Bf16{cls.__name__}", (_Bf16Forward, cls), {})
    model.__class__ = _BF16_CLASSES[cls]
    return model


# --------------------------------------------------------------------------- augmentation


def augment_fast(x: torch.Tensor, kind: str, gen: torch.Generator) -> torch.Tensor:
    """A batch of uint8 NHWC images -> augmented float NCHW in [0, 1], on their device.

    ``crop-flip``: zero-pad 4 pixels, random 32 x 32 crop, horizontal flip with probability 1/2
    (one gather); ``flip``: the flip only; ``rrc-flip``: RandomResizedCrop(scale=(0.2, 1),
    ratio=(3/4, 4/3)) + flip, as :func:`dartlib.data.augmentation.augment` does it."""
    n, h, w, _ = x.shape
    dev = x.device
    flip = torch.rand(n, generator=gen, device=dev) < 0.5
    ar_h, ar_w = torch.arange(h, device=dev), torch.arange(w, device=dev)
    if kind in ("flip", "crop-flip"):
        pad = 4 if kind == "crop-flip" else 0
        dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen, device=dev)
        dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen, device=dev)
        padded = F.pad(x, (0, 0, pad, pad, pad, pad)) if pad else x
        rows = dy[:, None] + ar_h
        cols = torch.where(flip[:, None], dx[:, None] + (w - 1) - ar_w, dx[:, None] + ar_w)
        out = padded[torch.arange(n, device=dev)[:, None, None], rows[:, :, None], cols[:, None, :]]
        return to_float(out)
    if kind == "rrc-flip":
        xf = to_float(x)
        xf = torch.where(flip[:, None, None, None], xf.flip(3), xf)
        area = torch.empty(n, device=dev).uniform_(0.2, 1.0, generator=gen)
        log_ratio = torch.empty(n, device=dev).uniform_(math.log(3 / 4), math.log(4 / 3), generator=gen)
        ratio = log_ratio.exp()
        sw = torch.sqrt(area * ratio).clamp(max=1.0)
        sh = torch.sqrt(area / ratio).clamp(max=1.0)
        cx = (torch.rand(n, generator=gen, device=dev) * 2 - 1) * (1 - sw)
        cy = (torch.rand(n, generator=gen, device=dev) * 2 - 1) * (1 - sh)
        theta = torch.zeros(n, 2, 3, device=dev)
        theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sw, cx, sh, cy
        grid = F.affine_grid(theta, list(xf.shape), align_corners=False)
        return F.grid_sample(xf, grid, mode="bilinear", padding_mode="border", align_corners=False)
    raise ValueError(f"unknown augmentation {kind!r}; valid: flip, crop-flip, rrc-flip")


# --------------------------------------------------------------------------- source training


@torch.no_grad()
def accuracy_fast(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, batch_size: int = 1000,
                  precision: str = "fp32") -> float:
    """Accuracy (%) over consecutive batches of device-resident uint8 images, in ``model``'s BN mode."""
    correct = torch.zeros((), dtype=torch.long, device=images.device)
    for start in range(0, len(labels), batch_size):
        with autocast(str(images.device), precision):
            logits = model(to_float(images[start : start + batch_size]))
        correct += (logits.argmax(1) == labels[start : start + batch_size]).sum()
    return 100.0 * int(correct) / len(labels)


def train_source_fast(
    *, dataset: str, arch: str, recipe: str, seed: int = 0, device: str = "cuda", precision: str = "bf16",
    time_budget: float | None = None, max_epochs: int | None = None, progress: bool = True, log=print,
) -> tuple[Path, dict]:
    """Train a source classifier with the data resident on ``device``; returns the checkpoint's path
    (:func:`dartlib.models.training.checkpoint_path`, the format of :func:`dartlib.models.training.train_source`)
    and throughput figures. ``time_budget`` (seconds): after the first epoch, the number of epochs
    is cut to what fits (the cosine schedule then spans the epochs actually run; the checkpoint's
    ``recipe_values`` and ``epochs`` say so). ``max_epochs`` caps the recipe's epochs the same way."""
    from dartlib.models.training import RECIPES, checkpoint_path, clip_gradients, lr_at, source_loss

    rec = RECIPES[recipe]
    if max_epochs is not None:
        rec = dataclasses.replace(rec, epochs=max(1, min(rec.epochs, max_epochs)))
    final = checkpoint_path(dataset=dataset, arch=arch, recipe=recipe, seed=seed)
    if final.is_file():
        return final, {"reused": True}
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.backends.cudnn.benchmark = True
    train, test = load(dataset, split="train"), load(dataset, split="test")
    x_train, y_train = device_images(train.images, device), torch.from_numpy(train.labels).to(device)
    x_test, y_test = device_images(test.images, device), torch.from_numpy(test.labels).to(device)
    torch.manual_seed(seed)
    model = build(arch, num_classes=train.num_classes).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": rec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=rec.lr, momentum=rec.momentum, nesterov=rec.nesterov)
    steps = max(1, len(train) // rec.batch_size)
    epochs = rec.epochs
    history: list[dict] = []
    elapsed, train_seconds, images_seen = 0.0, 0.0, 0
    epoch = 0
    while epoch < epochs:
        t0 = time.perf_counter()
        gen = torch.Generator(device=device).manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=gen, device=device)
        model.train()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.long, device=device)
        current = dataclasses.replace(rec, epochs=epochs)
        t_mid, mid = None, steps // 2
        for i in range(steps):
            if epoch == 0 and i == mid and mid > 0:
                if cuda:
                    torch.cuda.synchronize()
                t_mid = time.perf_counter()
            idx = order[i * rec.batch_size : (i + 1) * rec.batch_size]
            x = augment_fast(x_train[idx], rec.augmentation, gen)
            y = y_train[idx]
            for group in opt.param_groups:
                group["lr"] = lr_at(current, epoch * steps + i, steps)
            with autocast(device, precision):
                logits = model(x)
                loss = source_loss(logits, y, rec)  # the recipe's loss (cross-entropy or PolyLoss)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            clip_gradients(model, rec)  # the recipe's gradient-norm clipping, if any
            opt.step()
            loss_sum += loss.detach().float() * len(y)
            correct += (logits.detach().argmax(1) == y).sum()
        seen = steps * rec.batch_size if len(train) >= rec.batch_size else len(train)
        model.eval()
        test_acc = accuracy_fast(model, x_test, y_test, precision=precision)  # reads the device: the epoch is done
        epoch_seconds = time.perf_counter() - t0
        elapsed += epoch_seconds
        if epoch > 0 or epochs == 1:
            train_seconds += epoch_seconds
            images_seen += seen
        history.append({"epoch": epoch + 1, "train_loss": float(loss_sum) / seen, "train_acc": 100.0 * int(correct) / seen,
                        "test_acc": test_acc, "seconds": elapsed})
        if progress:
            log(f"  source epoch {epoch + 1}/{epochs}: loss {history[-1]['train_loss']:.4f} train "
                f"{history[-1]['train_acc']:.2f}% test {test_acc:.2f}% ({elapsed:.1f} s)")
        if epoch == 0 and time_budget is not None and epochs > 1:
            # the steady rate: the second half of the first epoch (the first half pays cuDNN's autotuning)
            per_epoch = epoch_seconds if t_mid is None else (time.perf_counter() - t_mid) * steps / (steps - mid)
            fit = max(1, 1 + int((time_budget - epoch_seconds) // max(per_epoch, 1e-6)))
            log(f"  source: first epoch {epoch_seconds:.1f} s, then about {per_epoch:.1f} s per epoch")
            if fit < epochs:
                log(f"  TIME GUARD: source training cut from {epochs} to {fit} epochs to fit {time_budget:.0f} s "
                    f"(cosine schedule over {fit})")
                epochs = fit
        epoch += 1
    rec_run = dataclasses.replace(rec, epochs=epochs)
    throughput = images_seen / train_seconds if train_seconds else (steps * rec.batch_size) / max(elapsed, 1e-9)
    meta = {
        "arch": arch, "num_classes": train.num_classes, "dataset": dataset, "dataset_digest": train.digest(),
        "train_split": "train", "test_split": "test",
        "recipe": recipe, "recipe_values": dataclasses.asdict(rec_run), "epochs": epochs, "seed": seed,
        "clean_test_accuracy": history[-1]["test_acc"], "history": history, "train_seconds": elapsed,
        "device": device, "dartlib_version": __version__, "torch_version": str(torch.__version__),
        "fast_path": "dartlib.experiments.gpu_fast.train_source_fast", "precision": precision if cuda else "fp32",
        "channels_last": cuda, "images_per_second": throughput,
    }
    final.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_weights({"model": state, "meta": meta}, path=final)
    return final, {"images_per_second": throughput, "epochs": epochs, "seconds": elapsed,
                   "clean_test_accuracy": history[-1]["test_acc"]}


# --------------------------------------------------------------------------- grouped BN-adapt forward


class _GroupedBN(nn.Module):
    """A BN layer in BN-adapt mode applied to ``n // group`` consecutive batches of ``group``
    images at once, each normalised with its own (biased) statistics, as F.batch_norm in
    training mode without running statistics does for one batch."""

    def __init__(self, bn: nn.modules.batchnorm._BatchNorm, holder: list) -> None:
        super().__init__()
        self.weight, self.bias, self.eps, self.holder = bn.weight, bn.bias, bn.eps, holder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = self.holder[0]
        n, c = x.shape[:2]
        if group is None or group == n:
            return F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        rest = x.shape[2:]
        xv = x.reshape(n // group, group, c, *rest)
        dims = (1, *range(3, xv.ndim))
        var, mean = torch.var_mean(xv.float(), dim=dims, correction=0, keepdim=True)
        shape = (1, 1, c) + (1,) * len(rest)
        scale = torch.rsqrt(var + self.eps)
        if self.weight is not None:
            scale = scale * self.weight.float().view(shape)
        shift = -mean * scale
        if self.bias is not None:
            shift = shift + self.bias.float().view(shape)
        return torch.addcmul(shift.to(x.dtype), xv, scale.to(x.dtype)).reshape(x.shape)


class GroupedBNAdapt(nn.Module):
    """f_theta0_bar (the frozen BN-adapted source model) that takes many batches at once:
    ``forward(x, group)`` normalises every run of ``group`` consecutive images with their own
    statistics, so it equals concatenating the frozen model's outputs batch by batch."""

    def __init__(self, model: nn.Module, *, precision: str = "fp32") -> None:
        super().__init__()
        self.net = frozen_bn_adapted(model)
        self.precision = precision
        self._holder: list = [None]
        for name, module in list(self.net.named_modules()):
            if isinstance(module, BN_TYPES):
                parent = self.net.get_submodule(name.rsplit(".", 1)[0]) if "." in name else self.net
                setattr(parent, name.rsplit(".", 1)[-1], _GroupedBN(module, self._holder))

    @torch.no_grad()
    def forward(self, x: torch.Tensor, group: int | None = None) -> torch.Tensor:
        if group is not None and x.shape[0] % group:
            raise ValueError(f"{x.shape[0]} images do not split into batches of {group}")
        self._holder[0] = group
        try:
            with autocast(str(x.device), self.precision):
                return self.net(x).float()
        finally:
            self._holder[0] = None


# --------------------------------------------------------------------------- intermediate training


def _fast_supported(config: DartConfig) -> bool:
    return (config.outputs == "wb" and config.parameterisation == "residual" and not config.diagonal_only
            and (config.variant == "dart-split" or config.inputs == "pbar-d"))


class _StackedDart:
    """The DART refiners of one pass that differ only in alpha, as one stack of L MLPs trained
    together: the loss is the sum of the L refiners' losses over disjoint parameters (so each gets
    its own gradient) and Adam is element-wise, so each refiner trains as it would alone."""

    def __init__(self, configs: list[DartConfig], *, num_classes: int, total: int, device: str) -> None:
        self.configs, self.k, self.total, self.device = configs, num_classes, total, device
        weights = []
        for config in configs:  # initialised exactly as dartlib.dart.intermediate._Learner does
            torch.manual_seed(config.seed)
            weights.append(RefinementModule(num_classes, hidden=config.hidden).state_dict())
        self.params = [torch.stack([w[name] for w in weights]).to(device).requires_grad_(True)
                       for name in ("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias")]
        self.alphas = torch.tensor([c.alpha for c in configs], device=device)
        self.opt = torch.optim.Adam(self.params, lr=configs[0].lr, **_adam_options(device))
        self.eye = torch.eye(num_classes, device=device)
        self.log_imb = torch.zeros(total, len(configs), device=device)
        self.log_bal = torch.zeros(total, len(configs), device=device)
        self.lrs: list[float] = []
        self.step = 0

    @property
    def done(self) -> bool:
        return self.step >= self.total

    def update(self, l_imb, y_imb, p_imb, d_imb, p_bal, d_bal) -> None:
        w1, b1, w2, b2 = self.params
        k, n_l = self.k, len(self.configs)
        x = torch.stack([torch.cat([p_imb, d_imb[None]]), torch.cat([p_bal, d_bal[None]])])  # (2, K+1)
        h = torch.relu(torch.einsum("ti,lhi->lth", x, w1) + b1[:, None, :])
        out = torch.einsum("lth,loh->lto", h, w2) + b2[:, None, :]  # (L, 2, K*K + K)
        w = out[..., : k * k].reshape(n_l, 2, k, k) + self.eye
        b = out[..., k * k :]
        refined = l_imb[None] @ w[:, 0] + b[:, 0, None, :]  # (L, B, K)
        loss_imb = F.cross_entropy(refined.reshape(-1, k), y_imb.repeat(n_l), reduction="none").view(n_l, -1).mean(1)
        loss_bal = ((w[:, 1] - self.eye) ** 2).mean((1, 2)) + (b[:, 1] ** 2).mean(1)
        loss = (loss_imb + self.alphas * loss_bal).sum()
        lr = cosine_lr(base=self.configs[0].lr, step=self.step, total=self.total)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.log_imb[self.step] = loss_imb.detach()
        self.log_bal[self.step] = loss_bal.detach()
        self.lrs.append(lr)
        self.step += 1

    def results(self, steps_per_epoch: int) -> list[tuple[Refiner, list[dict]]]:
        log_imb, log_bal = self.log_imb[: self.step].cpu().numpy(), self.log_bal[: self.step].cpu().numpy()
        out = []
        for i, config in enumerate(self.configs):
            module = RefinementModule(self.k, hidden=config.hidden)
            names = ("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias")
            module.load_state_dict({n: p[i].detach().cpu().clone() for n, p in zip(names, self.params)})
            log = [{"epoch": s // steps_per_epoch + 1, "step": s + 1, "loss_imb": float(log_imb[s, i]),
                    "loss_bal": float(log_bal[s, i]), "lr": self.lrs[s]} for s in range(self.step)]
            out.append((Refiner(module=module.eval(), config=config), log))
        return out


class _SplitLearner:
    """DART-split's g_phi2 (reads p_bar) and detector g_phi1 (Algorithm 3), losses logged on the device."""

    def __init__(self, config: DartConfig, *, num_classes: int, total: int, device: str) -> None:
        from dartlib.dart.intermediate import _build

        torch.manual_seed(config.seed)
        module, detector = _build(config, num_classes)
        self.config, self.total, self.device = config, total, device
        self.module, self.detector = module.to(device), detector.to(device)
        self.opt = torch.optim.Adam(list(self.module.parameters()) + list(self.detector.parameters()), lr=config.lr,
                                    **_adam_options(device))
        self.target = torch.tensor([0.0, 1.0], device=device)
        self.log_imb = torch.zeros(total, device=device)
        self.log_det = torch.zeros(total, device=device)
        self.lrs: list[float] = []
        self.step = 0

    @property
    def done(self) -> bool:
        return self.step >= self.total

    def update(self, l_imb, y_imb, p_imb, d_imb, p_bal, d_bal) -> None:
        w, b = self.module(p_imb, d_imb)
        loss_imb = F.cross_entropy(l_imb @ w + b, y_imb)
        scores = self.detector(torch.stack([d_bal, d_imb]))
        loss_det = F.binary_cross_entropy_with_logits(scores, self.target)
        lr = cosine_lr(base=self.config.lr, step=self.step, total=self.total)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        (loss_imb + loss_det).backward()
        self.opt.step()
        self.log_imb[self.step] = loss_imb.detach()
        self.log_det[self.step] = loss_det.detach()
        self.lrs.append(lr)
        self.step += 1

    def results(self, steps_per_epoch: int) -> list[tuple[Refiner, list[dict]]]:
        log_imb, log_det = self.log_imb[: self.step].cpu().numpy(), self.log_det[: self.step].cpu().numpy()
        log = [{"epoch": s // steps_per_epoch + 1, "step": s + 1, "loss_imb": float(log_imb[s]),
                "loss_detect": float(log_det[s]), "lr": self.lrs[s]} for s in range(self.step)]
        refiner = Refiner(module=self.module.eval().cpu(), config=self.config, detector=self.detector.eval().cpu())
        return [(refiner, log)]


def _adam_options(device: str) -> dict:
    return {"fused": True} if str(device).startswith("cuda") else {}


def train_refiners_fast(
    model: nn.Module, train: Dataset, configs: list[DartConfig], *, device: str = "cuda", precision: str = "bf16",
    chunk_steps: int = 16, max_steps: int | None = None, progress: bool = False, log=print,
) -> tuple[list[tuple[Refiner, list[dict]]], dict]:
    """:func:`dartlib.dart.intermediate.train_refiners` with the fast path (module docstring): the same
    intermediate batches (Dirichlet and i.i.d., per epoch), the same initialisation, the same
    cosine schedule. Every config must share the intermediate stream, the number of epochs and the
    learning rate; DART configs must be the affine residual g_phi with inputs (p_bar, d) (the
    paper's), DART-split ones likewise. Returns [(refiner on the CPU, log)] in the order of
    ``configs`` and timing figures (steps per second, forward images per second)."""
    from dartlib.dart.intermediate import CALIBRATION_STEPS, _imbalanced_batches, stream_signature

    if not configs:
        return [], {}
    first = configs[0]
    if len({stream_signature(c) for c in configs}) > 1 or len({(c.epochs, c.lr) for c in configs}) > 1:
        raise ValueError("the fast path trains refiners that share the intermediate stream, epochs and lr")
    unsupported = [c for c in configs if not _fast_supported(c)]
    if unsupported:
        raise ValueError(f"the fast path covers the affine residual g_phi only, not {unsupported[0]}")
    start = time.perf_counter()
    frozen = GroupedBNAdapt(model, precision=precision).to(device)
    if str(device).startswith("cuda"):
        frozen = frozen.to(memory_format=torch.channels_last)
    d_int = class_balanced(train.labels, per_class=first.per_class, seed=first.seed)
    labels = train.labels[d_int]
    images = device_images(train.images[d_int], device)
    labels_dev = torch.from_numpy(labels).to(device)
    bs = first.batch_size
    steps = len(d_int) // bs
    total = first.epochs * steps if max_steps is None else min(max_steps, first.epochs * steps)
    darts = [c for c in configs if c.variant == "dart"]
    stacked = [_StackedDart(darts, num_classes=train.num_classes, total=total, device=device)] if darts else []
    splits = [_SplitLearner(c, num_classes=train.num_classes, total=total, device=device)
              for c in configs if c.variant == "dart-split"]
    learners = stacked + splits

    def forward(batches: list[np.ndarray]) -> torch.Tensor:
        idx = torch.from_numpy(np.concatenate(batches)).to(device)
        return frozen(to_float(images[idx]), group=bs).view(len(batches), bs, -1)

    def stats(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_p = F.log_softmax(logits, dim=-1)  # per batch: dartlib.dart.refiner.batch_statistics
        return log_p.exp().mean(1), -log_p.mean(2).mean(1)

    forward_images = 0
    forward_seconds = 0.0
    loop_start = time.perf_counter()
    for epoch in range(first.epochs):
        if all(l.done for l in learners):
            break
        imbalanced = _imbalanced_batches(labels, first, epoch, steps)
        order = np.random.default_rng(first.seed * 100003 + epoch + 7).permutation(len(labels))
        iid = [order[i * bs : (i + 1) * bs] for i in range(steps)]
        if splits and epoch == 0:
            calib = [*imbalanced[:CALIBRATION_STEPS], *iid[:CALIBRATION_STEPS]]
            first_d = stats(forward(calib))[1]
            for learner in splits:
                learner.detector.calibrate(first_d)
        for s0 in range(0, steps, chunk_steps):
            if all(l.done for l in learners):
                break
            s1 = min(steps, s0 + chunk_steps)
            m = s1 - s0
            t0 = time.perf_counter()
            logits = forward([*imbalanced[s0:s1], *iid[s0:s1]])
            forward_seconds += time.perf_counter() - t0
            forward_images += 2 * m * bs
            p_all, d_all = stats(logits)
            y_all = labels_dev[torch.from_numpy(np.concatenate(imbalanced[s0:s1])).to(device)].view(m, bs)
            for j in range(m):
                for learner in learners:
                    if not learner.done:
                        learner.update(logits[j], y_all[j], p_all[j], d_all[j], p_all[m + j], d_all[m + j])
        if progress:
            log(f"  g_phi epoch {epoch + 1}/{first.epochs} ({time.perf_counter() - start:.1f} s)")
    results = [r for learner in learners for r in learner.results(steps)]  # reads the device once
    seconds = time.perf_counter() - start
    loop_seconds = time.perf_counter() - loop_start
    dart_results, split_results = iter(results[: len(darts)]), iter(results[len(darts) :])
    ordered = [next(dart_results) if c.variant == "dart" else next(split_results) for c in configs]
    done_steps = max(l.step for l in learners)
    timing = {"seconds": seconds, "loop_seconds": loop_seconds, "steps": done_steps,
              "steps_per_second": done_steps / loop_seconds,
              "forward_images_per_second_dispatch": forward_images / max(forward_seconds, 1e-9),
              "refiners": len(configs), "steps_per_epoch": steps, "epochs": first.epochs}
    return ordered, timing


def load_or_train_refiners_fast(
    checkpoint: Path, model: nn.Module, train: Dataset, configs: list[DartConfig], *, device: str,
    precision: str = "bf16", tag: str = "", progress: bool = False, log=print,
) -> tuple[list[tuple[Refiner, list[dict]]], dict]:
    """:func:`dartlib.dart.intermediate.load_or_train_refiners` with :func:`train_refiners_fast`: the
    refiners are saved beside ``checkpoint`` under :func:`dartlib.dart.intermediate.refiner_path`, so the
    standard loaders reuse them."""
    from dartlib.dart.intermediate import _load, _save, refiner_path

    paths = [refiner_path(checkpoint, c, tag=tag) for c in configs]
    missing = [(p, c) for p, c in zip(paths, configs) if not p.is_file()]
    fresh: dict[Path, tuple[Refiner, list[dict]]] = {}
    timing: dict = {}
    if missing:
        trained, timing = train_refiners_fast(model, train, [c for _, c in missing], device=device, precision=precision,
                                              progress=progress, log=log)
        for (path, _), (refiner, log_rows) in zip(missing, trained):
            _save(path, refiner, log_rows, checkpoint=checkpoint, train=train, device=device,
                  timing={"seconds": timing["seconds"], "trained_with": len(missing),
                          "fast_path": "dartlib.experiments.gpu_fast.train_refiners_fast", "precision": precision})
            fresh[path] = (refiner, log_rows)
    return [fresh[p] if p in fresh else _load(p) for p in paths], timing


# --------------------------------------------------------------------------- test time


class StreamSourceLogits(SharedSourceLogits):
    """:class:`dartlib.experiments.engine.SharedSourceLogits` keyed by the test stream and the batch index
    (``key``, set by the caller before each batch) instead of a digest of the batch's bytes, so no
    batch is copied to the host. With ``key`` None it hashes the bytes as its parent does."""

    def __init__(self, source: nn.Module) -> None:
        super().__init__(source)
        self.key = None

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.key is None:
            return super().__call__(x)
        key = ("stream", self.key, tuple(x.shape), str(x.device))
        if key in self._memo:
            self.hits += 1
        else:
            self._memo[key] = self.frozen(x)
        return self._memo[key]


class DeviceTestSets:
    """Corrupted test sets resident on the device (uint8 NHWC + labels), one per (dataset,
    corruption, severity), loaded on first use."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._sets: dict[tuple, tuple[torch.Tensor, torch.Tensor, np.ndarray]] = {}

    def get(self, cell) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        key = (cell.dataset, cell.corruption, cell.severity)
        if key not in self._sets:
            images, labels, _ = cell_stream(dataclasses.replace(cell, params=""))
            self._sets[key] = (device_images(images, self.device), torch.from_numpy(labels).to(self.device), labels)
        return self._sets[key]


@dataclass
class FastCounter:
    images: int = 0
    seconds: float = 0.0


def evaluate_cell_fast(cell, context: TestTimeContext, test_sets: DeviceTestSets, *, counter: FastCounter | None = None
                       ) -> dict:
    """:func:`dartlib.experiments.engine.evaluate_cell` on device-resident data: the stream's batches are
    indexed on the device, predictions counted there, one host read per cell. A context whose
    shared f_theta0_bar is a :class:`StreamSourceLogits` gets its memo keyed by (stream, batch)."""
    if "pool" in cell_options(cell):
        raise ValueError("the fast path does not cover pool= cells (mixed-domain streams)")
    start = time.perf_counter()
    torch.manual_seed(cell.seed)
    images, labels_dev, labels = test_sets.get(cell)
    from dartlib.experiments.engine import stream_order

    order = stream_order(labels, cell)
    options = cell_options(cell)
    batch_size = int(options.get("test_batch", context.batch_size))
    adapter = context.adapter(cell)
    shared = context._shared if isinstance(context._shared, StreamSourceLogits) else None
    stream = (cell.dataset, cell.corruption, cell.severity, cell.shift, cell.shift_param, cell.seed,
              options.get("subset", ""), options.get("limit", ""), batch_size)
    order_dev = torch.from_numpy(order).to(context.device)
    correct = torch.zeros((), dtype=torch.long, device=context.device)
    try:
        for i, s in enumerate(range(0, len(order), batch_size)):
            idx = order_dev[s : s + batch_size]
            if shared is not None:
                shared.key = (stream, i)
            pred = adapter(to_float(images[idx])).argmax(1)
            correct += (pred == labels_dev[idx]).sum()
    finally:
        if shared is not None:
            shared.key = None
    n = len(order)
    accuracy = 100.0 * float(int(correct) / n)
    if counter is not None:
        counter.images += n
        counter.seconds += time.perf_counter() - start
    return {"n": n, "accuracy": accuracy}


def fast_context(source: nn.Module, refiner: Refiner | None, *, device: str, precision: str, batch_size: int,
                 refiners: dict | None = None, shared: StreamSourceLogits | None = None) -> TestTimeContext:
    """A :class:`dartlib.experiments.engine.TestTimeContext` whose source model lives on ``device`` (each cell's
    copy is made there), with bfloat16 forwards when ``precision == "bf16"`` on a GPU, and a
    :class:`StreamSourceLogits` memo (``shared``, or a new one)."""
    context = TestTimeContext(source=source, refiner=refiner, batch_size=batch_size, device=device,
                            refiners=dict(refiners or {}))
    context._shared = shared if shared is not None else StreamSourceLogits(source).to(device)
    return context


def prepare_source_for_device(model: nn.Module, *, device: str, precision: str) -> nn.Module:
    """A copy of ``model`` on ``device`` (channels-last and bfloat16 forwards on a GPU with bf16)."""
    model = copy.deepcopy(model).to(device)
    if str(device).startswith("cuda"):
        model = model.to(memory_format=torch.channels_last)
        if precision == "bf16":
            bf16_forward(model)
    return model.eval()
