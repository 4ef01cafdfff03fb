"""What the notebooks share before their first experiment: the profile's source model f_theta0
(trained if absent), its BN-adapted copy, its training set (D_int is drawn from it) and the
corrupted test sets on disk (generated if absent)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from dartlib.data import load
from dartlib.data.prepare import ensure_corrupted
from dartlib.data.dataset import Dataset
from dartlib.experiments.settings import Settings
from dartlib.models.backbones import frozen_bn_adapted, use_source_statistics
from dartlib.models.checkpoints import load_checkpoint
from dartlib.models.training import train_source


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
    """Train (if absent) and load the profile's source model, load its training set unless
    ``with_train`` is false, and generate (if absent) the corrupted test sets of its severity."""
    checkpoint = train_source(dataset=settings.source.dataset, arch=settings.source.arch,
                              recipe=settings.source.recipe, seed=settings.seed, progress=False)
    model, meta = load_checkpoint(checkpoint)
    train = load(settings.source.dataset, split="train") if with_train else None
    ensure_corrupted(settings.test.corrupted_dataset, severities=[settings.test.severity])
    return SourceSetup(checkpoint=checkpoint, model=model, meta=meta, frozen=frozen_bn_adapted(model), train=train)
