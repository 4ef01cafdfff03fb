"""What the notebooks share before their first experiment: the profile's source model f_theta0,
its BN-adapted copy and its training set (D_int is drawn from it), loaded; the training stage
(:mod:`dartlib.experiments.training_stage`) makes them, and the corrupted test sets, before."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from dartlib.data import load
from dartlib.data.dataset import Dataset
from dartlib.experiments.settings import Settings
from dartlib.models.backbones import frozen_bn_adapted, use_source_statistics
from dartlib.models.checkpoints import load_checkpoint, require_trained


@dataclass(frozen=True)
class SourceSetup:
    """The source checkpoint's path, its model and metadata, the model with test-batch BN
    statistics (``frozen``), and the clean training set when it was asked for."""

    checkpoint: Path
    model: nn.Module
    meta: dict
    frozen: nn.Module
    train: Dataset | None = None

    def describe(self, settings: Settings) -> str:
        """One line naming the source model and its clean test accuracy."""
        return (f"{settings.source.arch} on {settings.source.dataset} "
                f"({self.meta['clean_test_accuracy']:.2f}% clean)")

    def source_statistics_model(self) -> nn.Module:
        """A fresh copy of the source model that normalises with its training statistics (NoAdapt)."""
        return use_source_statistics(load_checkpoint(self.checkpoint)[0])


def prepare_source(*, settings: Settings, with_train: bool = True) -> SourceSetup:
    """Load the profile's source model (made by the training stage,
    :func:`dartlib.experiments.training_stage.train_source_inputs`; absent, the error names its
    command) and its training set unless ``with_train`` is false."""
    checkpoint = settings.checkpoint()
    require_trained([checkpoint], command=settings.training_command())
    model, meta = load_checkpoint(checkpoint)
    train = load(settings.source.dataset, split="train") if with_train else None
    return SourceSetup(checkpoint=checkpoint, model=model, meta=meta, frozen=frozen_bn_adapted(model), train=train)
