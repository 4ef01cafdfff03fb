"""What the analysis notebooks (07, 08, 10, 13) share before their first experiment: the profile's
source model f_theta0 (trained if absent), its training set (D_int is drawn from it) and the
corrupted test sets on disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from dartlib.data import load
from dartlib.data.prepare import ensure_corrupted
from dartlib.data.sources import Dataset
from dartlib.experiments.settings import Settings
from dartlib.models.training import load_checkpoint, train_source


@dataclass(frozen=True)
class SourceSetup:
    """The source checkpoint's path, its model and metadata, and the clean training set."""

    checkpoint: Path
    model: nn.Module
    meta: dict
    train: Dataset | None

    def describe(self, settings: Settings) -> str:
        """One line naming the source model and its clean test accuracy."""
        return (f"{settings['source_arch']} on {settings['source_dataset']} "
                f"({self.meta['clean_test_accuracy']:.2f}% clean)")


def prepare_source(*, settings: Settings, with_train: bool = True) -> SourceSetup:
    """The profile's source model (trained if absent), its training set (unless ``with_train`` is
    false) and the corrupted test sets at the profile's severity."""
    checkpoint = train_source(dataset=settings["source_dataset"], arch=settings["source_arch"],
                              recipe=settings["source_recipe"], seed=settings["seed"], progress=False)
    model, meta = load_checkpoint(checkpoint)
    train = load(settings["source_dataset"], split="train") if with_train else None
    ensure_corrupted(settings["corrupted_dataset"], severities=[settings["severity"]])
    return SourceSetup(checkpoint=checkpoint, model=model, meta=meta, train=train)
