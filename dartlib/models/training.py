"""Source training: the classifiers every test-time method starts from (Appendix A).

The paper's recipe (200 epochs, batch 200, SGD lr 0.1, momentum 0.9, weight decay 5e-4, cosine,
the Conjugate-PL augmentation RandomResizedCrop(32, scale=(0.2, 1)) + horizontal flip) is the
``paper`` recipe; ``paper-poly`` is the same with what the reference code (locuslab/tta_conjugate,
``cfgs/source_train.yaml``) adds: PolyLoss CE + 6 (1 - p_y) and gradient-norm clipping at 1.0.
``cpu`` and ``smoke`` are reduced recipes for 2 CPU cores (pad-4 random crop + flip, which
converges faster in few epochs). Training resumes from the last finished epoch;
the finished checkpoint carries its metadata (architecture, dataset and digest, recipe, epochs,
clean test accuracy, library version).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from dartlib import __version__
from dartlib.data.augmentation import augment, augment_resident, to_tensor
from dartlib.data.files import REGENERATE, DamagedFileError, atomic_path, committed_remedy
from dartlib.data.sources import Dataset, load
from dartlib.devices import autocast, default_device, precision, resident
from dartlib.models.backbones import build
from dartlib.models.evaluation import batch_accuracy, resident_accuracy
from dartlib.paths import data_root
from dartlib.registry import Registry


@dataclass(frozen=True)
class Recipe:
    epochs: int
    batch_size: int
    lr: float
    momentum: float
    weight_decay: float
    nesterov: bool
    warmup_epochs: int
    augmentation: str  # "rrc-flip" (the reference's), "crop-flip" (pad 4, random crop, flip) or "flip"
    loss: str = "ce"  # "ce" (cross-entropy) or "poly" (PolyLoss, :func:`source_loss`)
    poly_epsilon: float = 0.0  # PolyLoss's epsilon (the reference code: 6)
    grad_clip: float = 0.0  # clip the gradients' global L2 norm to this before each step; 0: no clipping


RECIPES: Registry[Recipe] = Registry(
    "recipe",
    {
        "paper": Recipe(200, 200, 0.1, 0.9, 5e-4, False, 0, "rrc-flip"),
        # The paper's recipe with the reference code's loss and clipping (locuslab/tta_conjugate
        # cfgs/source_train.yaml: PolyLoss epsilon 6, clip_grad_norm_ 1.0; its released checkpoint is
        # cifar10_train_aug_res26_poly_eps6.pth); batch 200 as the paper states (the code's default is 256).
        "paper-poly": Recipe(200, 200, 0.1, 0.9, 5e-4, False, 0, "rrc-flip", loss="poly", poly_epsilon=6.0, grad_clip=1.0),
        # The paper's recipe cut to one epoch: CPU dry runs of the paper-c10 profile on a few hundred
        # images (dartlib.data.travel, docs/gpu.md); never used for a reported number.
        "paper-dry": Recipe(1, 200, 0.1, 0.9, 5e-4, False, 0, "rrc-flip"),
        "cpu": Recipe(15, 128, 0.1, 0.9, 5e-4, True, 1, "crop-flip"),
        "smoke": Recipe(2, 128, 0.1, 0.9, 5e-4, True, 0, "flip"),
        # Fine-tuning an ImageNet-pretrained ResNet-50 on one source domain (PACS, OfficeHome,
        # DomainNet-126) where no released source checkpoint is given; our recipe, not the paper's.
        "domain": Recipe(30, 64, 0.01, 0.9, 5e-4, False, 0, "rrc-flip"),
        # The gpu profile's ResNet-26 (width 64) in a short GPU slot (train_source on a GPU: data resident
        # there, bf16 autocast, channels-last); our recipe, not the paper's: 18 epochs
        # of batch 512, lr 0.4 (0.1 per 128 images, linearly scaled), Nesterov, 1 warm-up epoch, cosine.
        "gpu": Recipe(18, 512, 0.4, 0.9, 5e-4, True, 1, "crop-flip"),
    },
)


def lr_at(recipe: Recipe, step: int, steps_per_epoch: int) -> float:
    """Linear warm-up, then cosine annealing to 0 over the remaining steps."""
    warm = recipe.warmup_epochs * steps_per_epoch
    total = recipe.epochs * steps_per_epoch
    if step < warm:
        return recipe.lr * (step + 1) / warm
    return cosine_lr(base=recipe.lr, step=step - warm, total=total - warm)


def cosine_lr(*, base: float, step: int, total: int) -> float:
    """Cosine annealing from ``base`` at step 0 to 0 at step ``total``: the schedule of source
    training, IABN fine-tuning and g_phi's intermediate training (Appendix A)."""
    return 0.5 * base * (1.0 + math.cos(math.pi * step / max(1, total)))


def source_loss(logits: torch.Tensor, labels: torch.Tensor, recipe: Recipe) -> torch.Tensor:
    """The recipe's training loss, a batch mean: cross-entropy, or PolyLoss (Leng et al. 2022, the
    Poly-1 form the reference code trains with) CE + epsilon (1 - p_y), p_y the softmax probability
    of the label."""
    ce = F.cross_entropy(logits, labels, reduction="none")
    if recipe.loss == "ce":
        return ce.mean()
    if recipe.loss == "poly":
        p_y = torch.softmax(logits.float(), dim=1).gather(1, labels[:, None]).squeeze(1)
        return (ce + recipe.poly_epsilon * (1.0 - p_y)).mean()
    raise ValueError(f"recipe loss {recipe.loss!r}: expected 'ce' or 'poly'")


def clip_gradients(model: nn.Module, recipe: Recipe) -> None:
    """Clip the gradients' global L2 norm to ``recipe.grad_clip`` (as torch.nn.utils.clip_grad_norm_
    in the reference code); nothing when it is 0."""
    if recipe.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)


def evaluate(model: nn.Module, images: np.ndarray, labels: np.ndarray, *, batch_size: int = 500,
             device: str = "cpu") -> float:
    """Accuracy (%) in eval mode (source BN statistics)."""
    model.eval()
    return batch_accuracy(model, images, labels, batch_size=batch_size, device=device)


def sgd_epoch(
    model: nn.Module, opt: torch.optim.Optimizer, *, images: np.ndarray | torch.Tensor, labels: torch.Tensor,
    order: torch.Tensor, steps: int, batch_size: int, augmentation: str, gen: torch.Generator, lr_of_step, device: str,
    desc: str, progress: bool, recipe: Recipe | None = None,
) -> tuple[float, int, int]:
    """One epoch of SGD steps over ``order`` with ``recipe``'s loss and gradient clipping
    (:func:`source_loss`; cross-entropy without clipping when no recipe is given); returns (loss
    sum, correct, seen). ``images``: uint8 NHWC on the host, or resident on ``device`` with
    ``labels``, ``order`` and ``gen`` there too (:func:`dartlib.devices.resident`: augmented on the
    device, bfloat16 autocast where :func:`dartlib.devices.precision` says so, channels-last, the
    device read once at the end)."""
    on_device = isinstance(images, torch.Tensor)
    # Sums kept where the steps run (float64: the same values as Python floats), read once.
    loss_sum = torch.zeros((), dtype=torch.float64, device=labels.device)
    correct = torch.zeros((), dtype=torch.long, device=labels.device)
    seen = 0
    # progress=False forces the bar off; otherwise tqdm decides (TQDM_DISABLE=1 silences it)
    bar = tqdm(range(steps), desc=desc, leave=False, **({} if progress else {"disable": True}))
    for i in bar:
        idx = order[i * batch_size : (i + 1) * batch_size]
        if on_device:
            x, y = augment_resident(images[idx], kind=augmentation, generator=gen), labels[idx]
        else:
            x = augment(to_tensor(images[idx.numpy()]), kind=augmentation, generator=gen).to(device)
            y = labels[idx].to(device)
        if resident(device):
            x = x.contiguous(memory_format=torch.channels_last)
        for group in opt.param_groups:
            group["lr"] = lr_of_step(i)
        with autocast(device):
            logits = model(x)
            loss = F.cross_entropy(logits, y) if recipe is None else source_loss(logits, y, recipe)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if recipe is not None:
            clip_gradients(model, recipe)
        opt.step()
        loss_sum += loss.detach().double() * len(y)
        correct += (logits.detach().argmax(1) == y).sum()
        seen += len(y)
        if i % 20 == 0 and not on_device and not bar.disable:
            bar.set_postfix(loss=f"{float(loss_sum) / seen:.3f}", acc=f"{100 * int(correct) / seen:.1f}")
    return float(loss_sum), int(correct), seen


def load_weights(path: Path | str, *, map_location: str = "cpu", required: tuple[str, ...] = ()) -> dict:
    """``torch.load`` with ``weights_only=True``: tensors and plain values only, so a shared or
    downloaded checkpoint cannot run code. Metadata saved by earlier versions holds
    ``torch.__version__`` as a ``TorchVersion`` (a ``str`` subclass), allowed here by name.
    A truncated or foreign file, or one without the entries ``required``, raises
    :class:`~dartlib.data.files.DamagedFileError` naming it."""
    import pickle
    import zipfile

    from torch.torch_version import TorchVersion

    path = Path(path)
    remedy = _damaged_remedy(path)
    try:
        with torch.serialization.safe_globals([TorchVersion]):
            blob = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as err:
        if not path.is_file():
            raise
        raise DamagedFileError(path, f"not a readable checkpoint ({type(err).__name__}: {str(err)[:120]})", remedy) from None
    missing = [k for k in required if not isinstance(blob, dict) or k not in blob]
    if missing:
        raise DamagedFileError(path, f"lacks the entries {missing}", remedy)
    return blob


def _damaged_remedy(path: Path) -> str:
    """Committed checkpoints are restored from git; any other is retrained when deleted."""
    import subprocess

    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent,
                                 capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        tracked = False
    return committed_remedy(path) if tracked else REGENERATE


def check_training_data(*, checkpoint: Path, meta: dict, train: Dataset) -> None:
    """Raise ``ValueError`` when ``train`` is not the data the source model in ``checkpoint`` was
    trained on (g_phi and NOTE's IABN copy are trained on the source's training set, Section 4).
    A checkpoint that records no digest (a released model) is not checked."""
    recorded = meta.get("dataset_digest")
    if recorded and recorded != train.digest():
        raise ValueError(f"{checkpoint} was trained on {meta.get('dataset', '?')} with digest {recorded[:16]}, but the "
                         f"{train.name}/{train.split} data in use have digest {train.digest()[:16]}: the data changed "
                         "since the model was trained; restore the original data, or delete the checkpoint (and the "
                         "refiners and IABN copies beside it) to retrain on the data in use")


def checkpoint_path(*, dataset: str, arch: str, recipe: str, seed: int, split: str = "train",
                    directory: Path | None = None) -> Path:
    """Where a source checkpoint lives (in ``directory``, by default ``<data root>/checkpoints``,
    where the committed ones are: :mod:`dartlib.models.artefacts`); ``split`` names the training split
    when it is not ``train`` (a domain of PACS, OfficeHome or DomainNet-126)."""
    name = dataset if split == "train" else f"{dataset}-{split}"
    return (directory or data_root() / "checkpoints") / f"{name}-{arch}-{recipe}-seed{seed}.pt"


def save_weights(obj: object, *, path: Path) -> None:
    """``torch.save`` to ``path`` atomically (:func:`dartlib.data.files.atomic_path`: a unique
    temporary name beside it, then a rename), so that a reader or a second writer never finds half
    a file."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load_or_train(path: Path, *, train: Callable[[], dict], required: tuple[str, ...] = ()) -> dict:
    """The blob saved at ``path`` (:func:`load_weights`, which names a damaged file or one that lacks
    a ``required`` entry), or the one ``train()`` returns, saved there first (:func:`save_weights`):
    what is trained once per source model is reused after."""
    if not path.is_file():
        save_weights(train(), path=path)
    return load_weights(path, required=required)


def train_source(
    *, dataset: str, arch: str, recipe: str, seed: int = 0, device: str | None = None,
    max_epochs: int | None = None, progress: bool = True, train_split: str = "train", test_split: str = "test",
    load_options: dict | None = None, directory: Path | None = None,
) -> Path:
    """Train (or resume training) a source classifier; returns the finished checkpoint's path.

    ``max_epochs`` stops after that many epochs in this call (the partial state is kept, and the
    next call resumes), for budgets split across sessions. ``train_split`` / ``test_split`` and
    ``load_options`` (e.g. ``image_size``) select the data of a domain benchmark, whose source
    model trains on one domain (its "clean accuracy" is then measured on ``test_split``).
    ``directory``: train into another folder than the data root's ``checkpoints/`` (e.g. to
    retrain a committed model and compare, :func:`dartlib.models.artefacts.retrained_within_tolerance`).
    On a GPU (:func:`dartlib.devices.resident`) the training and test sets are resident there as
    uint8 and each batch is augmented there (:func:`sgd_epoch`); the checkpoint then records the
    precision and the steady rate in images per second (epochs after the first).
    """
    rec = RECIPES[recipe]
    final = checkpoint_path(dataset=dataset, arch=arch, recipe=recipe, seed=seed, split=train_split, directory=directory)
    if final.is_file():
        return final
    device = device or default_device()
    options = load_options or {}
    train, test = load(dataset, split=train_split, **options), load(dataset, split=test_split, **options)
    torch.manual_seed(seed)
    model = build(arch, num_classes=train.num_classes).to(device)
    on_device = resident(device)
    if on_device:
        torch.backends.cudnn.benchmark = True
        model = model.to(memory_format=torch.channels_last)
    opt = _optimizer(model, rec)
    partial = final.with_suffix(".partial.pt")
    history: list[dict] = []
    start_epoch, elapsed = 0, 0.0
    if partial.is_file():
        state = load_weights(partial, map_location=device, required=("model", "optimizer", "epoch", "history", "seconds"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start_epoch, history, elapsed = state["epoch"], state["history"], state["seconds"]
    final.parent.mkdir(parents=True, exist_ok=True)
    steps = max(1, len(train) // rec.batch_size)  # a training set smaller than one batch is one step
    x_all, y_all, test_accuracy = _training_data(train, test, device=device)
    stop = rec.epochs if max_epochs is None else min(rec.epochs, start_epoch + max_epochs)
    for epoch in range(start_epoch, stop):
        t0 = time.perf_counter()
        # per-epoch stream: resuming is exact
        gen = torch.Generator(device=device if on_device else "cpu").manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=gen, device=gen.device)
        model.train()
        loss_sum, correct, seen = sgd_epoch(
            model, opt, images=x_all, labels=y_all, order=order, steps=steps, batch_size=rec.batch_size,
            augmentation=rec.augmentation, gen=gen, lr_of_step=lambda i: lr_at(rec, epoch * steps + i, steps), device=device,
            desc=f"{arch} {dataset} epoch {epoch + 1}/{rec.epochs}", progress=progress, recipe=rec)
        test_acc = test_accuracy(model)
        elapsed += time.perf_counter() - t0
        history.append({"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_acc": 100 * correct / seen,
                        "test_acc": test_acc, "seconds": elapsed})
        if progress:
            print(f"epoch {epoch + 1}/{rec.epochs}: loss {loss_sum / seen:.4f} train {100 * correct / seen:.2f}% "
                  f"test {test_acc:.2f}% ({elapsed / 60:.1f} min)", flush=True)
        save_weights({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch + 1,
                      "history": history, "seconds": elapsed}, path=partial)
    if len(history) < rec.epochs:
        return partial
    meta = {
        "arch": arch, "num_classes": train.num_classes, "dataset": dataset, "dataset_digest": train.digest(),
        "train_split": train_split, "test_split": test_split,
        "recipe": recipe, "recipe_values": dataclasses.asdict(rec), "epochs": rec.epochs, "seed": seed,
        "clean_test_accuracy": history[-1]["test_acc"], "history": history, "train_seconds": elapsed,
        "device": device, "dartlib_version": __version__, "torch_version": str(torch.__version__),
    }
    if on_device:
        meta.update(precision=precision(device), channels_last=True,
                    images_per_second=_steady_rate(history, images_per_epoch=steps * rec.batch_size))
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_weights({"model": state, "meta": meta}, path=final)
    partial.unlink(missing_ok=True)
    return final


def _optimizer(model: nn.Module, rec: Recipe) -> torch.optim.SGD:
    """SGD with the recipe's momentum and Nesterov flag, weight decay on the weights of rank 2 and
    more only (not on biases and BN affine parameters)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    return torch.optim.SGD([{"params": decay, "weight_decay": rec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=rec.lr, momentum=rec.momentum, nesterov=rec.nesterov)


def _training_data(train: Dataset, test: Dataset, *, device: str) -> tuple:
    """(training images, labels, test accuracy of a model) as :func:`sgd_epoch` takes them: on the
    host, or resident on a GPU (:func:`dartlib.devices.resident`) with the test set there too."""
    if not resident(device):
        return train.images, torch.from_numpy(train.labels), lambda model: evaluate(model, test.images, test.labels,
                                                                                    device=device)
    x_test, y_test = torch.from_numpy(test.images).to(device), torch.from_numpy(test.labels).to(device)
    return (torch.from_numpy(train.images).to(device), torch.from_numpy(train.labels).to(device),
            lambda model: resident_accuracy(model.eval(), x_test, y_test))  # reads the device: the epoch is done


def _steady_rate(history: list[dict], *, images_per_epoch: int) -> float:
    """Training images per second over the epochs after the first (which pays the kernels'
    autotuning), from the cumulative ``seconds`` of ``history``."""
    if len(history) < 2:
        return images_per_epoch / max(history[-1]["seconds"], 1e-9)
    return (len(history) - 1) * images_per_epoch / max(history[-1]["seconds"] - history[0]["seconds"], 1e-9)


def save_source(model: nn.Module, meta: dict, path: Path) -> Path:
    """Write a source checkpoint in this library's format (weights + metadata with at least
    ``arch`` and ``num_classes``), e.g. for a released or pretrained model."""
    missing = {"arch", "num_classes"} - set(meta)
    if missing:
        raise ValueError(f"source metadata needs {sorted(missing)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights({"model": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "meta": meta}, path=path)
    return path


class CheckpointMismatchError(DamagedFileError):
    """A readable checkpoint that is not what its metadata, its name or the caller asks for (another
    architecture, other weight shapes, another number of classes); the message names the file and
    what differs."""

    def __init__(self, path: Path | str, problem: str, remedy: str = REGENERATE) -> None:
        super().__init__(path, problem, remedy)
        self.args = (f"{path} does not match: {problem}. Remedy: {remedy}",)


_NAME_KEYS = ("dataset", "arch", "recipe", "seed")


def check_source_meta(path: Path, meta: object, *, expect: dict | None = None) -> None:
    """Raise :class:`CheckpointMismatchError` when a source checkpoint's metadata names no known
    architecture or number of classes, disagrees with the file's name
    (:func:`checkpoint_path`: ``<dataset>-<arch>-<recipe>-seed<seed>.pt``), or with ``expect``
    (what the caller, e.g. a profile, asks for: ``arch``, ``num_classes``, ``dataset``...)."""
    from dartlib.models.backbones import ARCHITECTURES

    path = Path(path)
    remedy = _damaged_remedy(path)
    if not isinstance(meta, dict):
        raise DamagedFileError(path, f"its metadata is {type(meta).__name__}, not a mapping", remedy)
    arch, classes = meta.get("arch"), meta.get("num_classes")
    if not isinstance(arch, str) or arch.removesuffix("-imagenet") not in ARCHITECTURES:
        raise CheckpointMismatchError(path, f"its metadata names architecture {arch!r}, not one of "
                                            f"{', '.join(ARCHITECTURES)}", remedy)
    if not isinstance(classes, int) or isinstance(classes, bool) or classes < 1:
        raise CheckpointMismatchError(path, f"its metadata gives num_classes {classes!r}, not a positive integer", remedy)
    if all(k in meta for k in _NAME_KEYS) and re.search(r"-seed\d+(\.partial)?\.pt$", path.name):
        named = checkpoint_path(dataset=meta["dataset"], arch=arch, recipe=meta["recipe"], seed=meta["seed"],
                                split=meta.get("train_split", "train"), directory=path.parent)
        if named.name != path.name:
            raise CheckpointMismatchError(path, f"it holds {arch} trained on {meta['dataset']} (recipe {meta['recipe']}, "
                                                f"seed {meta['seed']}), which would be named {named.name}", remedy)
    differ = [f"{key} {meta.get(key)!r} where {value!r} is asked for" for key, value in (expect or {}).items()
              if meta.get(key) != value]
    if differ:
        raise CheckpointMismatchError(path, "its metadata has " + ", ".join(differ), remedy)


def check_state_shapes(path: Path, meta: dict, wanted: dict, saved: object) -> None:
    """Raise :class:`CheckpointMismatchError` unless ``saved`` holds exactly the entries of
    ``wanted`` (a freshly built model's state), each of the same shape."""
    remedy = _damaged_remedy(Path(path))
    what = f"{meta['arch']} with {meta['num_classes']} classes (as its metadata says)"
    if not isinstance(saved, dict) or not all(isinstance(v, torch.Tensor) for v in saved.values()):
        raise DamagedFileError(path, "its 'model' entry is not a mapping of tensors", remedy)
    missing = [k for k in wanted if k not in saved]
    unexpected = [k for k in saved if k not in wanted]
    if missing or unexpected:
        raise CheckpointMismatchError(path, f"its weights are not those of {what}: {len(missing)} entries missing"
                                            f"{f' (first {missing[0]})' if missing else ''}, {len(unexpected)} unexpected"
                                            f"{f' (first {unexpected[0]})' if unexpected else ''}", remedy)
    shapes = [(k, list(saved[k].shape), list(v.shape)) for k, v in wanted.items() if saved[k].shape != v.shape]
    if shapes:
        name, got, need = shapes[0]
        more = f" ({len(shapes)} entries differ)" if len(shapes) > 1 else ""
        raise CheckpointMismatchError(path, f"weight {name} has shape {got}, {what} needs {need}{more}", remedy)


def load_checkpoint(path: Path | str, *, device: str = "cpu", expect: dict | None = None) -> tuple[nn.Module, dict]:
    """A trained source model (eval mode) and its metadata. The metadata (architecture, number of
    classes, the file's name, ``expect``: :func:`check_source_meta`) and every weight's shape
    (:func:`check_state_shapes`) are checked before any weight is used."""
    path = Path(path)
    blob = load_weights(path, map_location=device, required=("model", "meta"))
    meta = blob["meta"]
    check_source_meta(path, meta, expect=expect)
    # An "-imagenet" suffix names the initialisation of a fine-tuned model, not its architecture;
    # the saved weights replace it, so loading needs no pretrained download.
    model = build(meta["arch"].removesuffix("-imagenet"), num_classes=meta["num_classes"]).to(device)
    check_state_shapes(path, meta, model.state_dict(), blob["model"])
    model.load_state_dict(blob["model"])
    return model.eval(), meta
