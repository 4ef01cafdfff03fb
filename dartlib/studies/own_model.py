"""DART on a classifier that is not one of the suite's, through the public API
(:func:`dartlib.dart.fit.fit_refiner`, :func:`dartlib.tta.wrap.wrap`).

The classifier is torchvision's ResNet-18 as torchvision builds it (its ImageNet stem: a 7 x 7
convolution of stride 2 and a max-pool, so 32 x 32 images leave 8 x 8 maps after the stem, cheap
enough for a CPU) with a 10-way (K-way) last layer and the data's normalisation in front, trained
briefly with Adam: the kind of model a user brings.

A few hundred steps of training from scratch amplify another CPU's last-bit rounding into points
(a fresh clone on an AMD EPYC gave a clean accuracy of 65.8 where the machine that stored the
reference gave 74.8). So the trained model and its g_phi are committed under
:data:`COMMITTED_DIR` (listed in ``data/checkpoints/MANIFEST.json``, :mod:`dartlib.models.artefacts`)
and read back by :func:`load_or_train_briefly` and ``fit_refiner(cache_dir=refiner_cache(...))``:
what notebook 16's stored reference compares is then inference from shared weights only. The same
holds for the small BatchNorm CNN of the alpha choice (:func:`small_bn_cnn`, ``arch="small-bn-cnn"``)
and its g_phi (:func:`chooser_cache`): the chosen alpha that nbval compares does not depend on the
CPU that runs the notebook. Other
settings (another profile, other images or epochs) train anew into the data root's cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

import hashlib
import json

from dartlib import __version__
from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data import load
from dartlib.data.dataset import Dataset
from dartlib.data.augmentation import to_tensor
from dartlib.data.protocols import TEST_BATCH_SIZE, long_tailed
from dartlib.models.artefacts import COMMITTED_DIR as _CHECKPOINTS, refused
from dartlib.models.checkpoints import load_or_train
from dartlib.models.streams import TestStream, percent_correct, stream_correct
from dartlib.paths import data_root
from dartlib.provenance import cpu_model_name
from dartlib.tta.wrap import stream_accuracy, wrap

COMMITTED_DIR: Path = _CHECKPOINTS / "own-model"


class Normalize(nn.Module):
    """(x - mean) / std per channel, for a model that receives images in [0, 1]."""

    def __init__(self, mean: list[float], std: list[float]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def torchvision_resnet18(images: np.ndarray, *, num_classes: int, seed: int) -> nn.Module:
    """torchvision's ResNet-18 with ``num_classes`` outputs, behind the per-channel normalisation
    of ``images`` (uint8 N x H x W x 3): its logits for images in [0, 1]."""
    import torchvision

    torch.manual_seed(seed)
    x = images.reshape(-1, images.shape[-1]).astype(np.float64) / 255.0
    mean, std = x.mean(0).tolist(), np.maximum(x.std(0), 1e-3).tolist()
    return nn.Sequential(Normalize(mean, std), torchvision.models.resnet18(num_classes=num_classes))


def train_briefly(model: nn.Module, images: np.ndarray, labels: np.ndarray, *, epochs: int, seed: int,
                  device: str, batch_size: int = 64, lr: float = 1e-3) -> list[float]:
    """Plain supervised training (Adam, cross-entropy, no augmentation), in place; returns the mean
    loss of each epoch."""
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        order, total = rng.permutation(len(labels)), 0.0
        for start in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[start:start + batch_size]
            loss = F.cross_entropy(model(to_tensor(images[idx]).to(device)), torch.from_numpy(labels[idx]).to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / (len(order) // batch_size * batch_size))
    return losses


def training_subset(train: Dataset, *, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The images and labels the model is trained on: the first ``count`` of ``train`` in a
    permutation drawn with ``seed`` (all of them when ``count`` is 0)."""
    pick = np.random.default_rng(seed).permutation(len(train))[:count or None]
    return train.images[pick], train.labels[pick]


def data_digest(images: np.ndarray, labels: np.ndarray) -> str:
    """sha256 over the training images' shape and bytes and the labels."""
    h = hashlib.sha256(json.dumps(list(images.shape)).encode())
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


def training_key(images: np.ndarray, labels: np.ndarray, *, num_classes: int, seed: int, epochs: int,
                 batch_size: int, lr: float, arch: str = "torchvision-resnet18") -> str:
    """12 hex digits of sha256 over what decides :func:`train_briefly`'s result for the model
    :data:`ARCHITECTURES` builds for ``arch``: the images' shape and bytes, the labels and the settings."""
    h = hashlib.sha256()
    h.update(json.dumps({"arch": arch, "shape": list(images.shape), "num_classes": num_classes,
                         "seed": seed, "epochs": epochs, "batch_size": batch_size, "lr": lr}, sort_keys=True).encode())
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()[:12]


def load_or_train_briefly(images: np.ndarray, labels: np.ndarray, *, num_classes: int, seed: int, epochs: int,
                          device: str, batch_size: int = 64, lr: float = 1e-3, arch: str = "torchvision-resnet18",
                          directory: Path | None = None) -> tuple[nn.Module, dict]:
    """The model :data:`ARCHITECTURES` builds for ``arch`` (:func:`torchvision_resnet18` by default,
    or :func:`small_bn_cnn`) trained by :func:`train_briefly`, read from
    ``<file prefix>-<training_key>.pt`` where it was saved before, else trained now and saved. The file
    is looked for in ``directory``, by default in :data:`COMMITTED_DIR` (the smoke profile's,
    committed) and then in ``<data root>/cache/own-model`` (where other settings are trained).
    Returns the model and the file's metadata (``losses``, ``cpu``: the CPU it was trained on,
    ``path``, ``reused``).

    The weights are stored in float16 and every run uses the stored copy, the training run too: a
    model trained here and one read from the committed file are the same weights, and the file is
    half the size (22 MB instead of 45 MB)."""
    if arch not in ARCHITECTURES:
        raise KeyError(f"arch {arch!r}: not one of the models notebook 16 trains ({', '.join(ARCHITECTURES)})")
    build, prefix = ARCHITECTURES[arch]
    key = training_key(images, labels, num_classes=num_classes, seed=seed, epochs=epochs, batch_size=batch_size,
                       lr=lr, arch=arch)
    name = f"{prefix}-{key}.pt"
    if directory is None:
        directory = COMMITTED_DIR if (COMMITTED_DIR / name).is_file() else data_root() / "cache" / "own-model"
    path = Path(directory) / name
    existed = path.is_file()

    def train() -> dict:
        model = build(images, num_classes=num_classes, seed=seed)
        losses = train_briefly(model, images, labels, epochs=epochs, seed=seed, device=device,
                               batch_size=batch_size, lr=lr)
        state = {k: (v.half() if v.is_floating_point() else v).cpu() for k, v in model.state_dict().items()}
        meta = {"kind": "own-model", "arch": arch, "num_classes": num_classes, "seed": seed,
                "epochs": epochs, "batch_size": batch_size, "lr": lr, "train_images": int(len(labels)),
                "losses": losses, "train_digest": data_digest(images, labels), "cpu": cpu_model_name(),
                "device": str(device), "torch_version": str(torch.__version__), "dartlib_version": __version__}
        return {"state": state, "meta": meta}

    blob = load_or_train(path, train=train, required=("state", "meta"))
    model = build(images, num_classes=num_classes, seed=seed)
    asked = {"arch": arch, "num_classes": num_classes, "seed": seed, "epochs": epochs, "batch_size": batch_size,
             "lr": lr, "train_images": int(len(labels))}
    problem = _not_as_named(blob["meta"], asked=asked, digest=data_digest(images, labels))
    if problem is None:
        try:
            model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in blob["state"].items()})
        except (RuntimeError, AttributeError) as err:  # weights of another network
            problem = f"its weights are not those of this {arch} ({str(err).strip().splitlines()[0][:160]})"
    if problem is not None:
        raise refused(path, problem, anew="run the same command again: it trains the model anew")
    return model.to(device), {**blob["meta"], "path": path, "reused": existed}


def _not_as_named(meta: object, *, asked: dict, digest: str) -> str | None:
    """Why a stored model's metadata says it is not the one its name (:func:`training_key` of
    ``asked`` and the images whose :func:`data_digest` is ``digest``) promises, or None."""
    if not isinstance(meta, dict):
        return f"its metadata is {type(meta).__name__}, not a mapping"
    differ = [f"{k} {meta.get(k)!r} where the name asks for {v!r}" for k, v in asked.items() if meta.get(k) != v]
    if meta.get("train_digest") != digest:
        differ.append("it was trained on other images")
    return f"it holds another model: {', '.join(differ)}" if differ else None


def refiner_cache(*, model: nn.Module, data: tuple[np.ndarray, np.ndarray], num_classes: int,
                  config: DartConfig | Sequence[DartConfig], tag: str = "") -> Path:
    """Where :func:`dartlib.dart.fit.fit_refiner` (or :func:`dartlib.studies.alpha_choice.select_alpha`,
    whose refiners carry ``tag``) keeps g_phi for ``model``: :data:`COMMITTED_DIR` where the committed
    g_phi of these weights, data and every config is there (the smoke profile's), else the default
    cache (:func:`dartlib.dart.fit.default_cache_dir`), so that other settings never write beside
    the committed files."""
    from dartlib.dart.fit import cache_key, default_cache_dir, labelled_images
    from dartlib.dart.intermediate import refiner_path

    train = labelled_images(data, num_classes=num_classes, every_class=False)
    anchor = COMMITTED_DIR / f"refiner-{cache_key(model, train)}.pt"
    configs = [config] if isinstance(config, DartConfig) else list(config)
    committed = all(refiner_path(anchor, c, tag=tag).is_file() for c in configs)
    return COMMITTED_DIR if committed else default_cache_dir()


def chooser_cache(*, model: nn.Module, data: tuple[np.ndarray, np.ndarray], num_classes: int,
                  config: DartConfig, search) -> Path:
    """:func:`refiner_cache` for :func:`dartlib.studies.alpha_choice.select_alpha`'s candidates
    (``search.alphas`` and ``config.alpha``, trained on the fit part of a held-out split)."""
    labels = np.asarray(data[1])
    alphas = sorted({float(a) for a in search.alphas} | {float(config.alpha)})
    tag = f"fit-heldout{search.heldout(labels, num_classes=num_classes)}"
    return refiner_cache(model=model, data=data, num_classes=num_classes, tag=tag,
                         config=[replace(config, alpha=a) for a in alphas])


@torch.no_grad()
def clean_accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray, *, device: str,
                   batch_size: int = 500) -> float:
    """Accuracy (%) of ``model`` with its stored BN statistics (NoAdapt) on clean images."""
    model.eval()
    stream = TestStream(images=images, labels=labels, batch_size=batch_size, device=device)
    return percent_correct(stream_correct(model, stream))


@dataclass(frozen=True)
class LTStreams:
    """The long-tailed test streams a model is judged on (Section 5.1's CIFAR-10C-LT protocol): every
    corruption of ``corrupted_dataset`` at ``severity``, each rho's shuffled long-tailed order
    (:func:`long_tailed` with ``seed``; its first ``stream_limit`` images when > 0), in test batches
    of ``batch_size``."""

    corrupted_dataset: str
    corruptions: Sequence[str]
    severity: int
    rhos: Sequence[float]
    stream_limit: int = 0
    batch_size: int = TEST_BATCH_SIZE
    seed: int = 0


def before_after(model: nn.Module, refiner: Refiner, *, num_classes: int, streams: LTStreams,
                 device: str) -> pd.DataFrame:
    """BNAdapt and BNAdapt+DART (:func:`wrap` with and without ``refiner``) on every stream of
    ``streams``. One row per (corruption, rho, method): accuracy (%) and the stream's length."""
    s = streams
    rows = []
    for corruption in s.corruptions:
        test = load(s.corrupted_dataset, corruption=corruption, severity=s.severity)
        for rho in s.rhos:
            order = long_tailed(test.labels, rho=rho, seed=s.seed)[:s.stream_limit or None]
            for method, used in (("BNAdapt", None), ("BNAdapt+DART", refiner)):
                adapter = wrap("bnadapt", model=model, refiner=used, device=device)
                accuracy = stream_accuracy(adapter, test, num_classes=num_classes, batch_size=s.batch_size,
                                           device=device, order=order)
                rows.append({"corruption": corruption, "rho": rho, "method": method, "accuracy": accuracy,
                             "images": len(order)})
    return pd.DataFrame(rows)


def gain_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy over corruptions per rho (rows: methods, then DART - BNAdapt)."""
    table = rows.pivot_table(index="method", columns="rho", values="accuracy", aggfunc="mean")
    table.loc["DART - BNAdapt"] = table.loc["BNAdapt+DART"] - table.loc["BNAdapt"]
    table.columns = [f"rho={rho:g}" for rho in table.columns]
    return table


def save_results(rows: pd.DataFrame, *, clean_accuracy: float, clean_images: int, path: Path) -> pd.DataFrame:
    """Notebook 16's numbers as a results file (``results/<profile>/own_model.csv``): the clean
    accuracy (NoAdapt, corruption ``clean``) and :func:`before_after`'s rows, each with its image
    count ``n``, so that the reference check (:mod:`dartlib.reporting.reference`) compares them with
    their stored copy within its stated tolerance."""
    clean = pd.DataFrame([{"corruption": "clean", "rho": 1.0, "method": "NoAdapt", "accuracy": clean_accuracy,
                           "images": clean_images}])
    table = pd.concat([clean, rows], ignore_index=True).rename(columns={"images": "n"})
    table = table[["corruption", "rho", "method", "n", "accuracy"]]
    table.to_csv(path, index=False, float_format="%.4f")
    return table


def small_bn_cnn(*, num_classes: int, seed: int) -> nn.Module:
    """The small BatchNorm CNN of docs/using-dart.md (two convolutions of 16 and 32 channels, each
    with BatchNorm, a linear head): trained for two epochs at Adam's lr 1e-2 it is over-confident,
    a model on which the paper's alpha 0.1 lets g_phi bend balanced batches (Section 3.2, Eq. 3)."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, num_classes),
    )


ARCHITECTURES: dict[str, tuple] = {
    # name -> (builder(images, num_classes=, seed=), file-name prefix); the name enters the training key
    "torchvision-resnet18": (torchvision_resnet18, "resnet18"),
    "small-bn-cnn": (lambda images, *, num_classes, seed: small_bn_cnn(num_classes=num_classes, seed=seed),
                     "small-bn-cnn"),
}


def default_against_chosen(model: nn.Module, *, data: tuple[np.ndarray, np.ndarray], num_classes: int,
                           config: DartConfig, alpha: float, streams: LTStreams, device: str) -> pd.DataFrame:
    """BNAdapt, and BNAdapt+DART with g_phi fitted at ``config``'s alpha (the paper's by default)
    and at ``alpha`` (what :func:`dartlib.studies.alpha_choice.select_alpha` picked), on ``streams``
    (:func:`before_after`): mean accuracy over corruptions per rho, then each DART's gain."""
    from dartlib.dart.fit import fit_refiner

    table = {}
    for label, value in ((f"alpha {config.alpha:g} (default)", config.alpha), (f"alpha {alpha:g} (chosen)", alpha)):
        chosen = replace(config, alpha=value)
        fitted = fit_refiner(model=model, data=data, num_classes=num_classes, device=device, config=chosen,
                             cache_dir=refiner_cache(model=model, data=data, num_classes=num_classes, config=chosen),
                             progress=False)
        gains = gain_table(before_after(model, fitted.refiner, num_classes=num_classes, streams=streams, device=device))
        table.setdefault("BNAdapt", gains.loc["BNAdapt"])
        table[f"BNAdapt+DART, {label}"] = gains.loc["BNAdapt+DART"]
        table[f"DART - BNAdapt, {label}"] = gains.loc["DART - BNAdapt"]
    return pd.DataFrame(table).T
