"""The training stage: every trained input a profile's cells read, made where it is absent.

Preparing a context (:func:`dartlib.experiments.engine.prepare_context`,
:func:`dartlib.experiments.source_setup.prepare_source` and each study's ``prepare_*``) only loads;
what it loads is made here, before: the source model f_theta0 (Section 4; Appendix A's recipe),
the corrupted test sets at the profile's severity, the refiner g_phi (Algorithm 1) and the methods'
trained inputs (NOTE's IABN copy). A file already saved, committed or trained before, is found and
left as it is, so the stage costs nothing when everything is there. ``python -m dartlib train
--profile P`` runs it outside a notebook (``--grids`` adds the grids' own refiners); a notebook
runs it in the cell before its first experiment; ``python -m dartlib grid NAME`` runs its grid's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from dartlib import devices, tta
from dartlib.data import load
from dartlib.data.dataset import Dataset
from dartlib.data.prepare import ensure_corrupted
from dartlib.experiments.settings import Settings
from dartlib.models.checkpoints import check_training_data, load_checkpoint
from dartlib.models.training import train_source


@dataclass(frozen=True)
class TrainedSource:
    """The source checkpoint the stage made or found, its model and its training set (the pool the
    refiners' intermediate batches are drawn from)."""

    checkpoint: Path
    model: nn.Module
    train: Dataset


def train_source_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> TrainedSource:
    """The profile's source model (trained where absent, on ``device``; default
    :func:`dartlib.devices.default_device`) and its corrupted test sets at the profile's severity
    (generated where absent), with the model and its training set loaded and checked against
    each other."""
    checkpoint = train_source(dataset=settings.source.dataset, arch=settings.source.arch,
                              recipe=settings.source.recipe, seed=settings.seed,
                              device=device or devices.default_device(), progress=progress)
    ensure_corrupted(settings.test.corrupted_dataset, severities=[settings.test.severity])
    model, meta = load_checkpoint(checkpoint)
    train = load(settings.source.dataset, split="train")
    check_training_data(checkpoint=checkpoint, meta=meta, train=train)
    return TrainedSource(checkpoint=checkpoint, model=model, train=train)


def train_profile_inputs(*, settings: Settings, method_inputs: bool = True, with_refiner: bool = True,
                         device: str | None = None, progress: bool = False) -> TrainedSource:
    """What :func:`dartlib.experiments.engine.prepare_context` loads, made where absent: the source
    model and test sets (:func:`train_source_inputs`), the profile's g_phi
    (:meth:`Settings.dart_config`; skipped with ``with_refiner=False``) and the trained inputs of the
    methods of :data:`dartlib.tta.METHODS` (:meth:`~dartlib.tta.base.Adapter.context_fields`; skipped
    with ``method_inputs=False``), all trained on ``device``."""
    from dartlib.dart.intermediate import load_or_train_refiner

    device = device or devices.default_device()
    source = train_source_inputs(settings=settings, device=device, progress=progress)
    if with_refiner:
        load_or_train_refiner(source.checkpoint, source.model, source.train, settings.dart_config(), device=device,
                              progress=progress)
    for cls in (tta.METHODS.values() if method_inputs else ()):
        cls.context_fields(settings=settings, checkpoint=source.checkpoint, model=source.model, train=source.train,
                           device=device, progress=progress)
    return source
