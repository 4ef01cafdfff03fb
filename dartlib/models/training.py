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
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from tqdm import tqdm

from dartlib import __version__
from dartlib.data.augmentation import augment, augment_resident, to_tensor
from dartlib.data.sources import load
from dartlib.data.dataset import Dataset
from dartlib.devices import autocast, default_device, precision, resident
from dartlib.models.backbones import build
from dartlib.models import states
from dartlib.models.artefacts import retrained_within_tolerance
from dartlib.models.checkpoints import checkpoint_path, save_weights
from dartlib.models.evaluation import batch_accuracy, resident_accuracy
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


@dataclass(frozen=True)
class EpochBatches:
    """What one epoch draws: ``steps`` batches of ``batch_size`` taken in ``order`` from ``images``
    and ``labels``, augmented with ``augmentation`` drawn from ``gen``. ``images``: uint8 NHWC on
    the host, or resident on the device with ``labels``, ``order`` and ``gen`` there too."""

    images: np.ndarray | torch.Tensor
    labels: torch.Tensor
    order: torch.Tensor
    steps: int
    batch_size: int
    augmentation: str
    gen: torch.Generator


def sgd_epoch(model: nn.Module, opt: torch.optim.Optimizer, batches: EpochBatches, *, lr_of_step, device: str,
              desc: str = "", progress: bool = False, recipe: Recipe | None = None) -> tuple[float, int, int]:
    """One epoch of SGD steps over ``batches`` with ``recipe``'s loss and gradient clipping
    (:func:`source_loss`; cross-entropy without clipping when no recipe is given); returns (loss
    sum, correct, seen). Images resident on ``device`` (:func:`dartlib.devices.resident`) are
    augmented there, under bfloat16 autocast where :func:`dartlib.devices.precision` says so,
    channels-last, the device read once at the end."""
    images, labels, order, gen = batches.images, batches.labels, batches.order, batches.gen
    steps, batch_size, augmentation = batches.steps, batches.batch_size, batches.augmentation
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


@dataclass(frozen=True)
class Splits:
    """Which data a source model trains and is tested on: the data set's splits and the options
    its loader takes (e.g. ``image_size``). A domain benchmark trains on one domain's folder."""

    train: str = "train"
    test: str = "test"
    load_options: tuple[tuple[str, object], ...] = ()


def train_source(
    *, dataset: str, arch: str, recipe: str, seed: int = 0, device: str | None = None,
    max_epochs: int | None = None, progress: bool = True, splits: Splits = Splits(), directory: Path | None = None,
) -> Path:
    """Train (or resume training) a source classifier; returns the finished checkpoint's path.

    ``max_epochs`` stops after that many epochs in this call (the partial state is kept, and the
    next call resumes), for budgets split across sessions. ``splits`` selects the data of a domain
    benchmark, whose source model trains on one domain (its "clean accuracy" is then measured on
    ``splits.test``).
    ``directory``: train into another folder than the data root's ``checkpoints/`` (e.g. to
    retrain a committed model and compare, :func:`dartlib.models.artefacts.retrained_within_tolerance`).
    On a GPU (:func:`dartlib.devices.resident`) the training and test sets are resident there as
    uint8 and each batch is augmented there (:func:`sgd_epoch`); the checkpoint then records the
    precision and the steady rate in images per second (epochs after the first).
    """
    rec = RECIPES[recipe]
    train_split, test_split = splits.train, splits.test
    final = checkpoint_path(dataset=dataset, arch=arch, recipe=recipe, seed=seed, split=train_split, directory=directory)
    if final.is_file():
        return final
    device = device or default_device()
    options = dict(splits.load_options)
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
    state = states.open_state(partial, what="the source model's training", map_location=device,
                              required=("model", "optimizer", "epoch", "history", "seconds"),
                              check=lambda state: _check_partial(state, model, opt, epochs=rec.epochs))
    if state is not None:
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
        batches = EpochBatches(x_all, y_all, order, steps, rec.batch_size, rec.augmentation, gen)
        loss_sum, correct, seen = sgd_epoch(
            model, opt, batches, lr_of_step=lambda i: lr_at(rec, epoch * steps + i, steps), device=device,
            desc=f"{arch} {dataset} epoch {epoch + 1}/{rec.epochs}", progress=progress, recipe=rec)
        test_acc = test_accuracy(model)
        elapsed += time.perf_counter() - t0
        history.append({"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_acc": 100 * correct / seen,
                        "test_acc": test_acc, "seconds": elapsed})
        if progress:
            print(f"epoch {epoch + 1}/{rec.epochs}: loss {loss_sum / seen:.4f} train {100 * correct / seen:.2f}% "
                  f"test {test_acc:.2f}% ({elapsed / 60:.1f} min)", flush=True)
        save_weights(states.sealed({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch + 1,
                                    "history": history, "seconds": elapsed}), path=partial)
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


def _check_partial(state: dict, model: nn.Module, opt: torch.optim.Optimizer, *, epochs: int) -> None:
    """Raise :class:`~dartlib.models.states.StateProblem` unless ``state`` is a source training that
    can be continued: its epoch count from 1 to ``epochs`` (the last: finished, not yet saved as the
    checkpoint), its history one entry per epoch, its weights and momentum buffers the
    model's shapes and finite."""
    done = states.count("its epoch", state["epoch"], low=1, high=epochs)
    states.epoch_log("its history", state["history"], epochs=done)
    states.seconds(state["seconds"])
    states.same_tensors("its model", state["model"], model.state_dict())
    states.optimizer_state("its optimiser", state["optimizer"], opt, steps=None)


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


def retrain_and_compare(*, dataset: str, arch: str, recipe: str, seed: int, committed: Path) -> dict:
    """Train the recipe anew in a scratch folder (the committed checkpoint is left alone) and
    compare its clean test accuracy with the committed model's
    (:func:`dartlib.models.artefacts.retrained_within_tolerance`).
    Returns the two accuracies, the tolerance, the test-set size and the verdict."""
    import tempfile

    from dartlib.models.checkpoints import load_checkpoint

    with tempfile.TemporaryDirectory(prefix="dart-retrain-") as scratch:
        fresh = train_source(dataset=dataset, arch=arch, recipe=recipe, seed=seed, progress=False,
                             directory=Path(scratch))
        _, meta = load_checkpoint(fresh)
    _, reference = load_checkpoint(committed)
    n = len(load(dataset, split="test").labels)
    ok, tol = retrained_within_tolerance(committed=reference["clean_test_accuracy"],
                                         retrained=meta["clean_test_accuracy"], n=n)
    return {"committed": reference["clean_test_accuracy"], "retrained": meta["clean_test_accuracy"],
            "tolerance": tol, "n": n, "within_tolerance": ok}
