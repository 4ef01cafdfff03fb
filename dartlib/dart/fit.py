"""DART for a classifier of your own: fit g_phi in one call (Algorithm 1, Eqs. 1-3).

:func:`fit_refiner` takes any ``nn.Module`` with batch-norm layers that maps a float batch
N x C x H x W with values in [0, 1] to logits N x K, labelled training data, the number of classes
and the device; it checks everything it can before training (the model's output, the labels, and
whether the data can support the :class:`DartConfig`, naming the value that would work), then
trains g_phi with :func:`dartlib.dart.intermediate.load_or_train_refiners` (Algorithm 1: Dirichlet
batches drive L_imb, Eq. 1; i.i.d. batches the identity regulariser L_bal, Eq. 2; L = L_imb +
alpha L_bal, Eq. 3) and caches it under a digest of the model's weights and the data, read back
only for a model that computes the same logits on a fixed probe batch, trained by the same revision
of the code.

Data layouts (:func:`labelled_images`): a pair ``(images, labels)`` of numpy arrays or torch
tensors, where ``images`` are either uint8 N x H x W x C in 0..255 (channels last, as images are
stored) or float N x C x H x W in [0, 1] (channels first, as ``torchvision.transforms.ToTensor``
gives them), and ``labels`` integers in 0..K-1; a ``torch.utils.data.Dataset`` whose items are
``(image, label)`` with one image in either layout (C x H x W float, H x W x C uint8, or a PIL
image); or a :class:`dartlib.data.dataset.Dataset`. The model always receives float N x C x H x W
in [0, 1]: any normalisation (mean, std) belongs inside the model. Images are held as uint8, so
float images are rounded to multiples of 1/255 (exact for images read from 8-bit files).

One naming hook, needed only by the additive-parameter variant (``DartConfig(outputs="additive")``)
and by the test-time methods that read penultimate features (LAME, ODS): ``model.features(x)``
returns the penultimate features and ``model.head`` is the last ``nn.Linear``, with
``model(x) == model.head(model.features(x))``.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
import torch
from torch import nn

from dartlib.dart.intermediate import load_or_train_refiners, refiner_path
from dartlib.dart.refiner_probe import model_probe, reusable
from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data.augmentation import to_tensor
from dartlib.data.protocols import class_balanced, dirichlet_stream
from dartlib.data.dataset import Dataset
from dartlib.models.artefacts import weights_digest
from dartlib.models.backbones import bn_layers, frozen_bn_adapted
from dartlib.paths import cache_root

Images = Union[np.ndarray, torch.Tensor]
Data = Union[tuple[Images, Images], Sequence, Dataset, torch.utils.data.Dataset]

MIN_CHUNK = 10  # dirichlet_stream's least number of images per chunk
PROBE_TRIES = 100  # Dirichlet draws tried per epoch before a setting is refused
SUGGESTED_CHUNK_SIZES = (20, 40, 100, 200)  # images per chunk of the n_dir values a refusal may suggest


class SettingError(ValueError):
    """A model, data set or setting that DART cannot work with; the message says what to change."""


def default_cache_dir() -> Path:
    """``<cache root>/refiners`` (:func:`dartlib.paths.cache_root`: ``data/cache/refiners`` in a
    checkout, the user's cache folder for an installed package), where fitted refiners are kept
    unless told otherwise."""
    return cache_root() / "refiners"


@dataclass
class FittedRefiner:
    """What :func:`fit_refiner` returns: the refiner (on the device it was asked for), its
    per-step training log, the file it is cached in, and whether that file was read (``reused``)
    rather than trained now."""

    refiner: Refiner
    log: list[dict] = field(repr=False)
    path: Path
    reused: bool
    num_classes: int


def fit_refiner(
    *, model: nn.Module, data: Data, num_classes: int, device: str | torch.device, config: DartConfig | None = None,
    cache_dir: Path | str | None = None, progress: bool = True,
) -> FittedRefiner:
    """Train DART's refinement module g_phi for ``model`` on labelled ``data`` (Algorithm 1), or
    read it from the cache.

    ``model``: any ``nn.Module`` with BN layers returning logits (N, ``num_classes``) for a float
    batch N x C x H x W in [0, 1]; it is not changed (g_phi is trained against a frozen BN-adapted
    copy, f_theta0_bar of Section 3). ``data``: labelled training images, in a layout of
    :func:`labelled_images`; D_int is its class-balanced part (``config.per_class`` images per
    class, default all that every class has). ``device``: where training runs (``"cpu"``,
    ``"cuda"``, ``"cuda:1"``; :func:`dartlib.devices.default_device` picks the GPU when there is
    one). ``config``: DART's settings (default :class:`DartConfig`, the paper's CIFAR-10 values).
    ``cache_dir``: where refiners are kept (default :func:`default_cache_dir`); the file's name is a
    digest of the model's weights and buffers, the data and the config, so another model, other
    data or another setting trains anew and the same ones are read back. A saved refiner is read
    back only where it was trained for a model that computes what this one computes (the logits of
    f_theta0_bar on a fixed probe batch of the training images, :func:`model_probe`: the same
    weights behind another activation or layer order are another model) and by this revision of
    the training code (:data:`dartlib.dart.refiner_probe.INTERMEDIATE_REVISION`); otherwise it is
    trained anew and the file overwritten.

    Raises :class:`SettingError`, before any training, when the model has no BN layer, does not
    return (N, num_classes) logits, the labels do not cover 0..num_classes-1, or the data cannot
    support ``config`` (per_class, batch_size, n_dir: the message names the value that works).
    """
    config = DartConfig() if config is None else config
    device = check_device(device)
    train = labelled_images(data, num_classes=num_classes, every_class=False)
    check_model(model, train, num_classes=num_classes, device=device, config=config)  # the logits' width first
    check_every_class(train.labels, num_classes=num_classes)
    check_supported(train.labels, config, num_classes=num_classes)
    folder = Path(default_cache_dir() if cache_dir is None else cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    anchor = folder / f"refiner-{cache_key(model, train)}.pt"  # the refiner's file is named after it
    path = refiner_path(anchor, config)
    probe = model_probe(model, train, device=device)  # what the model computes, checked before a reuse
    reused = reusable(path, probe)
    [(refiner, log)] = load_or_train_refiners(anchor, model, train, [config], device=device, progress=progress,
                                              probe=probe)
    return FittedRefiner(refiner=refiner.to(device), log=log, path=path, reused=reused, num_classes=num_classes)


def cache_key(model: nn.Module, train: Dataset) -> str:
    """16 hex digits of sha256 over the model's weights and buffers (:func:`weights_digest`), the
    images' shape and bytes and the labels (:meth:`Dataset.digest`)."""
    identity = {"model": weights_digest(model), "data": train.digest(), "shape": list(train.images.shape),
                "num_classes": train.num_classes}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def check_device(device: str | torch.device) -> str:
    """``device`` as a string, refused when torch cannot use it."""
    name = str(device)
    if not (name == "cpu" or name.startswith("cuda")):
        raise SettingError(f"device={name!r}: use 'cpu', 'cuda' or 'cuda:<index>' "
                           "(dartlib.devices.default_device() picks the GPU when torch sees one)")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SettingError(f"device={name!r} but torch sees no GPU: use device='cpu' "
                           "(or dartlib.devices.default_device())")
    return name


class _Images(Dataset):
    """A :class:`Dataset` of any channel count (the suite's sets are RGB; a user's may be grey)."""

    def __post_init__(self) -> None:
        if self.images.dtype != np.uint8 or self.images.ndim != 4:
            raise ValueError(f"images must be uint8 N x H x W x C, got {self.images.dtype} {self.images.shape}")


def labelled_images(data: Data, *, num_classes: int, every_class: bool = True) -> Dataset:
    """``data`` as the uint8 N x H x W x C images and int64 labels that intermediate training reads.

    Accepted: ``(images, labels)`` with uint8 images N x H x W x C in 0..255 or float images
    N x C x H x W in [0, 1], numpy or torch; a ``torch.utils.data.Dataset`` of ``(image, label)``
    items (one image C x H x W float, H x W x C uint8, or PIL); a :class:`Dataset`. Labels must be
    integers in 0..num_classes-1, every class present (``every_class=False``: a test set, where a
    class may be absent). Raises :class:`SettingError` naming the fix.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise SettingError(f"num_classes={num_classes!r}: give the number of classes the model's logits have, "
                           "an integer >= 2")
    if isinstance(data, Dataset):
        images, labels = data.images, data.labels
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        images, labels = _images_array(data[0]), _labels_array(data[1])
    elif isinstance(data, torch.utils.data.Dataset):
        images, labels = _from_items(data)
    else:
        raise SettingError(f"data of type {type(data).__name__}: pass (images, labels), a torch.utils.data.Dataset "
                           "of (image, label) items, or a dartlib.data.dataset.Dataset")
    if len(labels) != len(images):
        raise SettingError(f"{len(images)} images but {len(labels)} labels: give one label per image")
    _check_labels(labels, num_classes, every_class=every_class)
    classes = tuple(str(c) for c in range(num_classes))
    kind = Dataset if images.shape[-1] == 3 else _Images
    return kind(name="user", split="train", images=images, labels=labels, classes=classes)


def _as_numpy(x: Images) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _images_array(images: Images) -> np.ndarray:
    """uint8 N x H x W x C from either accepted layout."""
    x = _as_numpy(images)
    if x.ndim != 4:
        raise SettingError(f"images of shape {x.shape}: give a batch N x C x H x W (float) or N x H x W x C (uint8); "
                           "add the channel axis of grey images (images[:, None] for float, images[..., None] for uint8)")
    if x.dtype == np.uint8:
        if x.shape[1] in (1, 3) and x.shape[-1] not in (1, 3):
            raise SettingError(f"uint8 images are read channels-last (N x H x W x C); these look channels-first "
                               f"{x.shape}: pass images.transpose(0, 2, 3, 1) (numpy) or images.permute(0, 2, 3, 1)")
        return np.ascontiguousarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise SettingError(f"images of dtype {x.dtype}: give uint8 in 0..255 (N x H x W x C) or float in [0, 1] "
                           "(N x C x H x W)")
    if x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
        raise SettingError(f"float images are read channels-first (N x C x H x W); these look channels-last {x.shape}: "
                           "pass images.permute(0, 3, 1, 2) (torch) or images.transpose(0, 3, 1, 2) (numpy)")
    low, high = float(x.min()), float(x.max())
    if not (np.isfinite(low) and np.isfinite(high)) or low < 0.0 or high > 1.0:
        raise SettingError(f"float images must lie in [0, 1], these span {low:.3g} to {high:.3g}: pass the unnormalised "
                           "images and put the normalisation inside the model, e.g. nn.Sequential(Normalize(mean, std), "
                           "model), since every batch reaches the model in [0, 1]")
    scaled = x.astype(np.float64) * 255.0
    rounded = np.rint(scaled)
    change = float(np.abs(scaled - rounded).max()) / 255.0
    if change > 1e-4:
        warnings.warn(f"float images are held as 8-bit values: rounded to multiples of 1/255 (largest change "
                      f"{change:.4f})", stacklevel=3)
    return np.ascontiguousarray(rounded.astype(np.uint8).transpose(0, 2, 3, 1))


def _labels_array(labels: Images) -> np.ndarray:
    y = _as_numpy(labels)
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_):
        raise SettingError(f"labels of dtype {y.dtype} and shape {y.shape}: give integer class indices, one per image "
                           "(a 1-d array; argmax(1) of one-hot labels)")
    return y.astype(np.int64)


def _from_items(dataset: torch.utils.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Stack a torch Dataset's ``(image, label)`` items."""
    try:
        n = len(dataset)
    except TypeError:
        raise SettingError("a torch Dataset without len(): pass (images, labels) instead") from None
    if n == 0:
        raise SettingError("the torch Dataset is empty")
    images, labels = [], []
    for i in range(n):
        item = dataset[i]
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise SettingError(f"item {i} of the torch Dataset is a {type(item).__name__}: items must be (image, label)")
        image = item[0] if isinstance(item[0], torch.Tensor) else np.asarray(item[0])
        images.append(image[None])
        labels.append(int(item[1]))
    stacked = torch.cat(images).numpy() if isinstance(images[0], torch.Tensor) else np.concatenate(images)
    if stacked.ndim == 3 and stacked.dtype == np.uint8:  # grey PIL images: H x W each
        stacked = stacked[..., None]
    return _images_array(stacked), np.asarray(labels, dtype=np.int64)


def check_every_class(labels: np.ndarray, *, num_classes: int) -> None:
    """Refuse training labels that leave a class of 0..num_classes-1 without an image (D_int is
    class-balanced); run after :func:`check_model`, so that a ``num_classes`` the model's logits do
    not have is named as that."""
    _check_labels(labels, num_classes, every_class=True)


def _check_labels(labels: np.ndarray, num_classes: int, *, every_class: bool) -> None:
    if labels.size == 0:
        raise SettingError("no labelled images: DART's g_phi is trained on labelled training data")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= num_classes:
        raise SettingError(f"labels span {low}..{high} but num_classes={num_classes}: labels must be class indices "
                           f"0..{num_classes - 1} (num_classes={high + 1} if the model has that many outputs)")
    missing = sorted(set(range(num_classes)) - set(np.unique(labels).tolist()))
    if missing and every_class:
        raise SettingError(f"no training image of class{'es' if len(missing) > 1 else ''} {missing[:10]}: D_int is "
                           "class-balanced, so every class 0..num_classes-1 needs labelled images")


def check_model(model: nn.Module, train: Dataset, *, num_classes: int, device: str, config: DartConfig) -> None:
    """Refuse a model DART cannot refine: no BN layer, logits of the wrong shape, or (additive
    variant) no ``features`` / ``head`` hook. One forward of two training images, on ``device``."""
    if not isinstance(model, nn.Module):
        raise SettingError(f"model is a {type(model).__name__}: pass a torch.nn.Module that returns logits")
    if not any(True for _ in bn_layers(model)):
        raise SettingError(f"{type(model).__name__} has no BatchNorm layer: DART reads the statistics of a batch from "
                           "the BN-adapted model (Section 3), which needs BatchNorm1d/2d/3d layers")
    if config.outputs == "additive":
        head = getattr(model, "head", None)
        if not callable(getattr(model, "features", None)) or not isinstance(head, nn.Linear):
            raise SettingError("DartConfig(outputs='additive') refines penultimate features: the model needs "
                               "model.features(x) -> (N, F) and model.head = nn.Linear(F, K) with model(x) == "
                               "model.head(model.features(x)); or keep outputs='wb' (the default), which needs neither")
    x = to_tensor(train.images[:2]).to(device)
    try:
        with torch.no_grad():
            out = frozen_bn_adapted(model).to(device)(x)
    except Exception as err:
        raise SettingError(f"model(x) failed on two training images as DART feeds them (float32 {tuple(x.shape)}, "
                           f"values in [0, 1], on {device}): {type(err).__name__}: {err}") from err
    if isinstance(out, torch.Tensor) and out.ndim == 2 and out.shape[0] == 2 and out.shape[1] != num_classes:
        raise SettingError(f"num_classes={num_classes} but the model returns {out.shape[1]} logits per image: pass "
                           f"num_classes={out.shape[1]} (labels 0..{out.shape[1] - 1}), or give the model "
                           f"{num_classes} outputs")
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise SettingError(f"model returned {shape} for 2 images; DART needs logits (2, {num_classes}) "
                           f"(num_classes={num_classes}): return the logits tensor alone, and pass the number "
                           "of outputs of its last layer as num_classes")


def check_supported(labels: np.ndarray, config: DartConfig, *, num_classes: int) -> None:
    """Refuse, before training, a ``config`` that ``labels`` cannot support, naming a value that works.

    D_int holds ``per_class`` images of every class; an epoch needs one intermediate batch of
    ``batch_size`` images; with Dirichlet sampling every epoch's split of D_int into ``n_dir``
    chunks must give each chunk at least 10 images (:func:`dirichlet_stream`). The split of each
    epoch is drawn as training will draw it (the same seeds, so a setting that passes here trains),
    with at most :data:`PROBE_TRIES` tries per epoch; a refused ``n_dir`` comes with a value that
    leaves 20 or more images per chunk (else 40, 100, 200) and whose splits succeed for every epoch.
    """
    counts = np.bincount(labels, minlength=num_classes)
    smallest = int(counts.min())
    per_class = smallest if config.per_class is None else config.per_class
    if per_class > smallest:
        raise SettingError(f"DartConfig(per_class={config.per_class}) but class {int(counts.argmin())} has {smallest} "
                           f"images: use per_class={smallest} or fewer (or None: {smallest}, all that every class has)")
    n_int = per_class * num_classes
    if config.batch_size > n_int:
        raise SettingError(f"DartConfig(batch_size={config.batch_size}) exceeds D_int's {n_int} images ({per_class} per "
                           f"class x {num_classes}): use batch_size={_power_of_two_below(n_int)} or more images")
    if config.sampling != "dirichlet":
        return
    picked = labels[class_balanced(labels, per_class=config.per_class, seed=config.seed)]
    if _splits(picked, config, config.n_dir):
        return
    # suggest a value with room to spare (20 images or more per chunk), checked the same way
    candidates = [n_int // per_chunk for per_chunk in SUGGESTED_CHUNK_SIZES if 1 <= n_int // per_chunk < config.n_dir]
    works = next((n for n in candidates if _splits(picked, config, n)), None)
    advice = (f"use DartConfig(n_dir={works}) ({n_int // works} images per chunk; its splits succeed for all "
              f"{config.epochs} epochs) or more images" if works else "use more images per class")
    needed = MIN_CHUNK * config.n_dir
    why = (f"that needs {needed} images" if n_int < needed
           else f"no such split was found in {PROBE_TRIES} tries (delta={config.delta:g})")
    raise SettingError(f"DartConfig(n_dir={config.n_dir}) splits D_int's {n_int} images ({per_class} per class x "
                       f"{num_classes}) into {config.n_dir} Dirichlet chunks of at least {MIN_CHUNK} images each, and "
                       f"{why}: {advice}; the paper's CIFAR-10 setting has 200 images per chunk (50,000 / 250)")


def _splits(labels: np.ndarray, config: DartConfig, n_dir: int) -> bool:
    """Whether every epoch's Dirichlet split into ``n_dir`` chunks succeeds, with the seeds that
    :func:`dartlib.dart.intermediate_batches._imbalanced_batches` uses."""
    if n_dir < 1 or len(labels) < MIN_CHUNK * n_dir:
        return False
    for epoch in range(config.epochs):
        try:
            dirichlet_stream(labels, delta=config.delta, n_chunks=n_dir, seed=config.seed * 100003 + epoch,
                             min_chunk=MIN_CHUNK, max_tries=PROBE_TRIES)
        except RuntimeError:
            return False
    return True


def _power_of_two_below(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)
