"""The intermediate batches of DART's training (Algorithm 1): the label-imbalanced batches of each
epoch drawn from Dirichlet streams over D_int (or the uniform/LT cycle of Table 4's ablation), the
settings that decide them (:data:`STREAM_FIELDS`), and the frozen BN-adapted classifier's forward
over them (one batch at a time on the CPU, :data:`RESIDENT_CHUNK` steps at once on a GPU)."""

from __future__ import annotations


import numpy as np
import torch
from torch import nn

from dartlib.dart.refiner import DartConfig
from dartlib.data.protocols import apportion, batches, dirichlet_stream, long_tailed_counts
from dartlib.devices import autocast, resident
from dartlib.models.backbones import GroupedBNAdapted, frozen_bn_adapted
from dartlib.data.augmentation import images_to_float, to_tensor


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


# The settings that decide the intermediate batches: refiners that agree on them read the same
# batches and can train in one pass over them (:func:`dartlib.dart.refiner_training.train_refiners`).
STREAM_FIELDS = ("seed", "per_class", "delta", "n_dir", "batch_size", "sampling", "chunk_order", "mix_n_dir")


def stream_signature(config: DartConfig) -> tuple:
    """The values of :data:`STREAM_FIELDS` in ``config``."""
    return tuple(getattr(config, name) for name in STREAM_FIELDS)


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
