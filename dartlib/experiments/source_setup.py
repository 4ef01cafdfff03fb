"""What the notebooks on the BN-adapted source model share: the source model (trained if absent),
its BN-adapted copy, the corrupted test sets (generated if absent) and the training split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from dartlib.data import load
from dartlib.data.prepare import ensure_corrupted
from dartlib.models.backbones import frozen_bn_adapted, use_source_statistics
from dartlib.models.training import load_checkpoint, train_source


@dataclass
class SourceSetup:
    """The source checkpoint, its model and metadata, and the model with test-batch BN statistics."""

    checkpoint: Path
    model: nn.Module
    meta: dict
    frozen: nn.Module

    def source_statistics_model(self) -> nn.Module:
        """A fresh copy of the source model that normalises with its training statistics (NoAdapt)."""
        return use_source_statistics(load_checkpoint(self.checkpoint)[0])


def source_setup(*, source_dataset: str, source_arch: str, source_recipe: str, seed: int,
                 corrupted_dataset: str, severity: int) -> SourceSetup:
    """Train (if absent) and load the source model, and generate (if absent) the corrupted test sets
    of ``severity``."""
    checkpoint = train_source(dataset=source_dataset, arch=source_arch, recipe=source_recipe, seed=seed, progress=False)
    model, meta = load_checkpoint(checkpoint)
    frozen = frozen_bn_adapted(model)
    ensure_corrupted(corrupted_dataset, severities=[severity])
    return SourceSetup(checkpoint=checkpoint, model=model, meta=meta, frozen=frozen)


def training_split(dataset: str):
    """The training split of ``dataset`` (D_int's pool)."""
    return load(dataset, split="train")
