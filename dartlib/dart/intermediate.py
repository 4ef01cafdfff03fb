"""DART's g_phi (Algorithm 1) and DART-split's g_phi1, g_phi2 (Algorithm 3), trained once per source
classifier and saved beside its checkpoint: each refiner's file named by its settings
(:func:`refiner_path`), read back once it is seen to be what its name says, or trained
(:mod:`dartlib.dart.refiner_training`, several in one pass) and saved with its provenance; its
training log compacted; the logit statistics of Appendix B's adaptive temperature.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dartlib import __version__
from dartlib.provenance import cpu_model_name
from dartlib.dart.intermediate_batches import stream_signature
from dartlib.dart.refiner import DartConfig, Refiner, config_dict
from dartlib.dart.refiner_probe import Probe, model_probe, reusable
from dartlib.dart.refiner_training import _build, _train_pass
from dartlib.data.dataset import Dataset
from dartlib.devices import default_device
from dartlib.data.augmentation import to_tensor
from dartlib.models.artefacts import refused
from dartlib.models import states
from dartlib.models.checkpoints import TRAINING_COMMAND, load_weights, require_trained, save_weights


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
    pass per set of shared intermediate batches (:func:`dartlib.dart.refiner_training.train_refiners`),
    which gives each the refiner it would get alone at a fraction of the cost; a pass saves its state
    after every epoch (:func:`pass_path`) and, interrupted, resumes from there when called again.
    Returns (refiner, log) per config.

    ``probe`` (:func:`dartlib.dart.refiner_probe.model_probe`; what :func:`dartlib.dart.fit.fit_refiner`
    passes): a saved refiner is reused only where it is :func:`dartlib.dart.refiner_probe.reusable`
    for it, i.e. trained for a model that computes the same logits, by the same
    :data:`dartlib.dart.refiner_probe.INTERMEDIATE_REVISION`; any other is trained anew
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


def load_refiners(checkpoint: Path, configs: list[DartConfig], *, tag: str = "",
                  command: str = TRAINING_COMMAND) -> list[tuple[Refiner, list[dict]]]:
    """The saved refiners of ``configs`` beside ``checkpoint``, loaded and checked, training none:
    (refiner, log) per config; an absent one raises
    :class:`~dartlib.models.checkpoints.TrainedInputsMissing` naming each and ``command``, the training
    stage that makes them (:func:`load_or_train_refiners` is that stage's step)."""
    paths = [refiner_path(checkpoint, config, tag=tag) for config in configs]
    require_trained(paths, command=command)
    return [_load(path, checkpoint=checkpoint, tag=tag) for path in paths]


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
    the model it was trained for computes (recorded with
    :data:`dartlib.dart.refiner_probe.INTERMEDIATE_REVISION`)."""
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
