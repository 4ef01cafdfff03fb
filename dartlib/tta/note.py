"""NOTE (Gong et al., 2022) as the paper runs it, TENT+NOTE (Appendix A): instance-aware batch
normalisation (IABN, threshold k = 4) and prediction-balanced reservoir sampling (PBRS, memory of
the batch size); the entropy of the memory batch trains the BN affine parameters.

With DART, the refinement corrects the predictions under which test samples enter the memory:
"DART is used exclusively to enhance the prediction accuracy of the examples stored in memory"
(Appendix A, "NOTE"), so by default (``dart_use="memory"``) the refined predictions decide what
PBRS stores and NOTE reports its own, unrefined predictions. ``dart_use="report"`` is the other
reading, where the reported predictions are the refined ones too. Either way the adaptation loss
on the prediction-balanced memory batch is left unrefined, since W_B and b_B describe the label
distribution of the test batch, not of the memory.
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dartlib import __version__
from dartlib.dart.refiner import Refiner
from dartlib.data.files import DamagedFileError
from dartlib.models.artefacts import refused
from dartlib.data.protocols import TEST_BATCH_SIZE
from dartlib.models.backbones import bn_layers, frozen_bn_adapted, set_trainable
from dartlib.models import states
from dartlib.models.checkpoints import load_or_train, save_weights
from dartlib.tta.base import Adapter, Refinement
from dartlib.tta.basic import entropy, make_optimizer

DART_USES = ("memory", "report")
IABN_K = 4.0  # IABN's threshold k in standard errors (NOTE's default, kept in Appendix A)
IABN_AUGMENTATION = "flip"  # of the fine-tuning's training images
PAPER_IABN_EPOCHS = 30  # Appendix A: NOTE's IABN layers fine-tuned for 30 epochs on the source data


class IABN2d(nn.Module):
    """Instance-aware BN: per-sample (instance) mean and variance are pulled towards the BN
    statistics unless they deviate by more than k standard errors, by soft-shrinkage of the
    difference; the result normalises the sample. The wrapped ``bn`` keeps the affine
    parameters and running statistics, so the BN helpers of :mod:`dartlib.models.backbones` apply: in
    training or BN-adapt mode the BN statistics are the batch's, otherwise the running ones."""

    def __init__(self, bn: nn.BatchNorm2d, *, k: float = IABN_K) -> None:
        super().__init__()
        self.bn, self.k = bn, k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, c, h, w = x.shape
        var_in, mu_in = torch.var_mean(x, dim=(2, 3), keepdim=True, unbiased=True)
        if self.bn.training:
            if self.bn.track_running_stats:
                self.bn(x)  # updates the running statistics exactly as BN would
            var_b, mu_b = torch.var_mean(x, dim=(0, 2, 3), keepdim=True, unbiased=True)
        else:
            mu_b, var_b = self.bn.running_mean.view(1, c, 1, 1), self.bn.running_var.view(1, c, 1, 1)
        eps = self.bn.eps
        if h * w <= 1:  # no instance statistics on a 1x1 map
            mu, var = mu_b, var_b
        else:
            s_mu = torch.sqrt((var_b + eps) / (h * w))
            s_var = (var_b + eps) * math.sqrt(2.0 / (h * w - 1))
            mu = mu_b + _shrink(mu_in - mu_b, self.k * s_mu)
            var = F.relu(var_b + _shrink(var_in - var_b, self.k * s_var))
        out = (x - mu) * torch.rsqrt(var + eps)
        if self.bn.affine:
            out = out * self.bn.weight.view(1, c, 1, 1) + self.bn.bias.view(1, c, 1, 1)
        return out


def _shrink(x: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """Soft-shrinkage with an element-wise threshold: sign(x) max(|x| - t, 0)."""
    return F.relu(x - threshold) - F.relu(-x - threshold)


def to_iabn(model: nn.Module, *, k: float = IABN_K) -> nn.Module:
    """A deep copy of ``model`` with every BatchNorm2d wrapped in :class:`IABN2d`."""
    model = copy.deepcopy(model)
    _wrap_in_place(model, k)
    return model


def has_iabn(model: nn.Module) -> bool:
    return any(isinstance(m, IABN2d) for m in model.modules())


def finetune_iabn(
    net: nn.Module, train, *, epochs: int, batch_size: int = 128, lr: float = 0.01,
    per_class: int | None = None, seed: int = 0, device: str = "cpu", progress: bool = True,
    resume: Path | None = None,
) -> tuple[nn.Module, list[dict]]:
    """Fine-tune all weights of an IABN model (:func:`to_iabn`) on the labelled training set
    (Appendix A: :data:`PAPER_IABN_EPOCHS` epochs), SGD with momentum 0.9, weight decay 5e-4 and
    cosine annealing, random horizontal flips (:data:`IABN_AUGMENTATION`); ``per_class`` restricts it
    to a class-balanced subset (reduced profiles).

    ``resume``: a file where the state is saved after every epoch (atomically); a call that finds
    one made from the same start (initial weights, training data, settings) continues from its
    last epoch, bit for bit as if never stopped, and one made from another start is set aside with
    a warning. Each entry of the returned log has its epoch's ``seconds``."""
    from dartlib.data.protocols import class_balanced
    from dartlib.data.dataset import Dataset
    from dartlib.models.training import EpochBatches, cosine_lr, sgd_epoch

    if per_class:
        keep = np.sort(class_balanced(train.labels, per_class=per_class, seed=seed))
        train = Dataset(train.name, train.split, train.images[keep], train.labels[keep], train.classes)
    if not has_iabn(net):
        raise ValueError("finetune_iabn fine-tunes an IABN model: convert the source model with to_iabn first")
    torch.manual_seed(seed)
    net = net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    steps = len(train.labels) // batch_size
    total = max(1, epochs * steps)
    labels = torch.from_numpy(train.labels)
    log: list[dict] = []
    identity = ""
    if resume is not None:
        identity = _finetune_identity(net, train, epochs=epochs, batch_size=batch_size, lr=lr,
                                      augmentation=IABN_AUGMENTATION, seed=seed)
        log = _restore_finetune(resume, identity, net, opt, device=device, epochs=epochs)
    for epoch in range(len(log), epochs):
        start = time.perf_counter()
        gen = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(labels), generator=gen)
        loss_sum, correct, seen = sgd_epoch(
            net, opt, EpochBatches(train.images, labels, order, steps, batch_size, IABN_AUGMENTATION, gen),
            device=device, progress=progress,
            lr_of_step=lambda i: cosine_lr(base=lr, step=epoch * steps + i, total=total),
            desc=f"IABN fine-tuning epoch {epoch + 1}/{epochs}")
        log.append({"epoch": epoch + 1, "train_loss": loss_sum / max(1, seen), "train_acc": 100 * correct / max(1, seen),
                    "seconds": time.perf_counter() - start})
        if resume is not None:
            save_weights(states.sealed({"identity": identity, "model": net.state_dict(), "optimizer": opt.state_dict(),
                                        "log": log, "epochs_done": epoch + 1, "torch_rng": torch.get_rng_state()}),
                         path=resume)
    return net.eval(), log


def _finetune_identity(net: nn.Module, train, **settings) -> str:
    """What a fine-tuning run starts from: the initial weights, the training data and the settings."""
    h = hashlib.sha256(repr(sorted(settings.items())).encode())
    for name, tensor in net.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    h.update(train.digest().encode())
    return h.hexdigest()


def _restore_finetune(path: Path, identity: str, net: nn.Module, opt: torch.optim.Optimizer, *, device: str,
                      epochs: int) -> list[dict]:
    """The log of the epochs saved in ``path`` with ``net``, ``opt`` and the torch RNG restored to
    their end; [] with a warning where the file was made from another start (the fine-tuning then
    starts over and overwrites it), and [] with the file set aside where it is damaged (cut short by
    a full disk, say), altered after it was saved (its digest) or not a state this fine-tuning can
    continue: the epochs it records (``epochs_done``, where saved) must agree with its log, one
    entry per epoch numbered from 1, at most ``epochs``, and its weights and momentum buffers must
    be the model's shapes and finite."""
    def check(state: dict) -> None:
        if state["identity"] != identity:
            return
        done = states.count("its log's length", len(state["log"]) if isinstance(state["log"], list) else -1,
                            low=1, high=epochs)
        if "epochs_done" in state and state["epochs_done"] != done:
            raise states.StateProblem(f"its log has {done} entries for {state['epochs_done']!r} epochs done")
        states.epoch_log("its log", state["log"], epochs=done)
        states.same_tensors("its model", state["model"], net.state_dict())
        states.optimizer_state("its optimiser", state["optimizer"], opt, steps=None)
        states.rng_state(state["torch_rng"])

    state = states.open_state(path, what="the IABN fine-tuning", map_location=device, check=check,
                              required=("identity", "model", "optimizer", "log", "torch_rng"))
    if state is None:
        return []
    if state["identity"] != identity:
        warnings.warn(f"{path} is an interrupted IABN fine-tuning from another start (weights, data or settings); "
                      "the fine-tuning starts over", stacklevel=3)
        return []
    net.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    return list(state["log"])


def refused_because(path: Path, meta: object, *, checkpoint: Path) -> str | None:
    """Why the IABN copy ``path`` (its metadata ``meta``) is not the one its name promises, or None:
    its recorded epochs, k and subset must derive to its name (:func:`iabn_path` of ``checkpoint``),
    its log must hold those epochs and its source must be ``checkpoint`` (:func:`load_or_finetune_iabn`
    then compares a file listed in the ``MANIFEST.json`` beside it with the sha256 recorded there)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("epochs"), int) or not isinstance(meta.get("k"), (int, float)):
        return "its metadata records no epochs and k"
    named = iabn_path(checkpoint, epochs=meta["epochs"], k=meta["k"], per_class=meta.get("per_class"))
    if named != path:
        return f"it holds another IABN copy (k {meta['k']:g}, {meta['epochs']} epochs), whose name is {named.name}"
    if not isinstance(meta.get("log"), list) or len(meta["log"]) != meta["epochs"]:
        return f"its log does not hold its {meta['epochs']} epochs"
    if meta.get("source_checkpoint", checkpoint.name) != checkpoint.name:
        return f"it was fine-tuned from {meta['source_checkpoint']}, not {checkpoint.name}"
    return None


def iabn_path(checkpoint: Path, *, epochs: int, k: float = IABN_K, per_class: int | None = None) -> Path:
    subset = f"-pc{per_class}" if per_class else ""
    return checkpoint.with_name(f"{checkpoint.stem}.iabn-k{k:g}-e{epochs}{subset}.pt")


def load_or_finetune_iabn(
    checkpoint: Path, model: nn.Module, train, *, epochs: int, k: float = IABN_K, per_class: int | None = None,
    seed: int = 0, device: str | None = None, progress: bool = True, **options,
) -> tuple[nn.Module, dict]:
    """The IABN model fine-tuned from the source ``checkpoint`` (saved beside it and reused);
    fine-tuned on ``device`` (default :func:`dartlib.devices.default_device`), returned on the CPU.
    An interrupted fine-tuning resumes from its last epoch (kept in ``<name>.partial.pt`` beside it,
    removed when done), so hours of epochs can be split across runs."""
    from dartlib.devices import default_device

    device = device or default_device()
    path = iabn_path(checkpoint, epochs=epochs, k=k, per_class=per_class)
    partial = path.with_suffix(".partial.pt")

    def finetune() -> dict:
        tuned, log = finetune_iabn(to_iabn(model, k=k), train, epochs=epochs, per_class=per_class, seed=seed,
                                   device=device, progress=progress, resume=partial, **options)
        meta = {"source_checkpoint": checkpoint.name, "epochs": epochs, "k": k, "per_class": per_class, "log": log,
                "seed": seed, "seconds": sum(e["seconds"] for e in log), "device": device,
                "dartlib_version": __version__, **options}
        return {"model": {n: t.cpu() for n, t in tuned.state_dict().items()}, "meta": meta}

    blob = load_or_train(path, train=finetune, required=("model", "meta"))
    partial.unlink(missing_ok=True)
    net = to_iabn(model, k=k)
    problem = refused_because(path, blob["meta"], checkpoint=checkpoint)
    if problem is None:
        try:
            net.load_state_dict(blob["model"])
        except RuntimeError as err:  # weights of another architecture
            problem = f"its weights are not those of this model ({str(err).strip().splitlines()[0][:160]})"
    if problem is not None:
        raise refused(path, problem, anew="run the same command again: it fine-tunes the copy anew")
    return net.eval(), blob["meta"]


class PredictionBalancedMemory:
    """PBRS: a memory of ``capacity`` samples kept balanced over *predicted* classes. When full,
    a sample of a non-majority class replaces a random sample of a random majority class; a
    sample of a majority class replaces a random sample of its own class with probability
    n_c / m_c (n_c stored, m_c seen so far), reservoir sampling within the class."""

    def __init__(self, capacity: int, num_classes: int, *, seed: int = 0) -> None:
        self.capacity, self.k = capacity, num_classes
        self.items: list[list[torch.Tensor]] = [[] for _ in range(num_classes)]
        self.seen = np.zeros(num_classes, dtype=np.int64)
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return sum(len(c) for c in self.items)

    def counts(self) -> list[int]:
        return [len(c) for c in self.items]

    def add(self, x: torch.Tensor, predicted: int) -> bool:
        self.seen[predicted] += 1
        if len(self) >= self.capacity:
            counts = self.counts()
            largest = [c for c in range(self.k) if counts[c] == max(counts)]
            if predicted not in largest:
                victim = self.rng.choice(largest)
                self.items[victim].pop(self.rng.randrange(counts[victim]))
            elif self.rng.uniform(0, 1) <= counts[predicted] / self.seen[predicted]:
                self.items[predicted].pop(self.rng.randrange(counts[predicted]))
            else:
                return False
        self.items[predicted].append(x)
        return True

    def batch(self) -> torch.Tensor:
        return torch.stack([x for c in self.items for x in c])


class Note(Adapter):
    """TENT+NOTE. ``model`` should carry IABN layers (:func:`load_or_finetune_iabn`); a plain BN
    model is converted without fine-tuning. Predictions use the running statistics (IABN-corrected);
    after each test batch, one entropy step on the memory batch updates the BN affine parameters
    and, with momentum ``bn_momentum``, the running statistics. ``source``: the BN classifier that
    g_phi was trained for (f_theta0_bar is its BN-adapted copy); default ``model`` itself.
    ``dart_use``: where DART's refined predictions go, see the module docstring."""

    name = "note"
    revision = 2  # 2: by default DART refines only the predictions that fill the memory
    reads_context = ("iabn",)
    cell_options = ("dart_use",)

    @classmethod
    def context_files(cls, *, settings, checkpoint: Path) -> list[Path]:
        """The IABN fine-tuned copy of the source model (``note_finetune_epochs``, ``note_per_class``)."""
        return [iabn_path(checkpoint, epochs=settings.methods.note_finetune_epochs,
                          per_class=settings.methods.note_per_class or None)]

    @classmethod
    def context_fields(cls, *, settings, checkpoint: Path, model: nn.Module, train, device: str,
                       progress: bool) -> dict:
        """``iabn``: the source model with IABN layers, fine-tuned on ``train`` (Appendix A), loaded
        when saved beside ``checkpoint``."""
        iabn, _ = load_or_finetune_iabn(checkpoint, model, train, epochs=settings.methods.note_finetune_epochs,
                                        per_class=settings.methods.note_per_class or None, seed=settings.seed,
                                        device=device, progress=progress)
        return {"iabn": iabn}

    @classmethod
    def from_context(cls, context) -> tuple[nn.Module, dict]:
        """NOTE adapts a copy of the IABN fine-tuned model, keeps a memory of the test batch size,
        and reads f_theta0_bar from the plain source model."""
        if context.trained.get("iabn") is None:
            raise ValueError("NOTE needs the IABN fine-tuned model in the context's `trained` "
                             "(dartlib.tta.note.load_or_finetune_iabn)")
        return copy.deepcopy(context.trained["iabn"]), {"source": context.source, "memory": context.batch_size}

    def __init__(self, model: nn.Module, *, refiner: Refiner | None = None, source: nn.Module | None = None,
                 memory: int = TEST_BATCH_SIZE, bn_momentum: float = 0.01, optimizer: str = "adam",
                 lr: float | None = None, entropy_normalisation: str = "sum", dart_use: str = "memory",
                 seed: int = 0) -> None:
        if dart_use not in DART_USES:
            raise ValueError(f"unknown dart_use {dart_use!r}; valid: {', '.join(DART_USES)}")
        if not has_iabn(model):
            _wrap_in_place(model, IABN_K)
        super().__init__(model, refiner=refiner)
        if refiner is not None:
            device = next(model.parameters()).device
            self.source = frozen_bn_adapted(source if source is not None else _plain_bn(model)).to(device)
        entropy(torch.zeros(1, 2), normalisation=entropy_normalisation)
        if memory < 1:
            raise ValueError(f"memory must be positive, got {memory}")
        self.capacity, self.bn_momentum, self.seed, self.dart_use = memory, bn_momentum, seed, dart_use
        self.entropy_normalisation = entropy_normalisation
        self.optimizer_name, self.lr = optimizer, lr
        for bn in bn_layers(self.model):
            bn.momentum = bn_momentum
            bn.track_running_stats = True
        self.params = set_trainable(self.model, "bn-affine")
        self.optimizer = make_optimizer(self.params, optimizer=optimizer, lr=lr)
        self.memory: PredictionBalancedMemory | None = None

    def reset(self) -> None:
        super().reset()
        self.optimizer = make_optimizer(self.params, optimizer=self.optimizer_name, lr=self.lr)
        self.memory = None

    def adapt(self, x: torch.Tensor, refine: Refinement) -> torch.Tensor:
        self.model.eval()
        with torch.no_grad():
            logits = self.model(x)
            refined = refine(logits)
        if self.memory is None:
            self.memory = PredictionBalancedMemory(self.capacity, logits.shape[1], seed=self.seed)
        for sample, label in zip(x, refined.argmax(1).tolist()):
            self.memory.add(sample, label)
        self.model.train()  # IABN with the memory batch's statistics, running statistics updated
        loss = entropy(self.model(self.memory.batch()), normalisation=self.entropy_normalisation)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.model.eval()
        return refined if self.dart_use == "report" else logits


def _wrap_in_place(model: nn.Module, k: float) -> None:
    for name, child in model.named_children():
        if isinstance(child, nn.BatchNorm2d):
            setattr(model, name, IABN2d(child, k=k))
        elif not isinstance(child, IABN2d):
            _wrap_in_place(child, k)


def _plain_bn(model: nn.Module) -> nn.Module:
    """A copy of an IABN model with its IABN layers unwrapped back to the BN layers they hold."""
    model = copy.deepcopy(model)

    def unwrap(module: nn.Module) -> None:
        for name, child in module.named_children():
            if isinstance(child, IABN2d):
                setattr(module, name, child.bn)
            else:
                unwrap(child)

    unwrap(model)
    return model
