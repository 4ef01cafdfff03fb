"""What every dataset source returns: a :class:`Dataset` (uint8 NHWC images, int64 labels, class
names), the :class:`DataMissingError` raised where a dataset is absent, the class names the
sources share, and where a source looks (:func:`location`, overridable by an environment
variable)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FMNIST_CLASSES = (
    "t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot",
)


class DataMissingError(FileNotFoundError):
    """A dataset is not where the suite looks for it; the message says where and how to get it."""

    def __init__(self, dataset: str, path: Path | str, remedy: str) -> None:
        self.dataset, self.path, self.remedy = dataset, Path(path), remedy
        super().__init__(f"dataset {dataset!r} not found: expected {path}. To obtain it: {remedy}")


@dataclass(frozen=True)
class Dataset:
    """Images (uint8, N x H x W x 3), labels (int64) and class names of one split."""

    name: str
    split: str
    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.images.dtype != np.uint8 or self.images.ndim != 4 or self.images.shape[-1] != 3:
            raise ValueError(f"{self.name}: images must be uint8 NHWC RGB, got {self.images.dtype} {self.images.shape}")
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(f"{self.name}: {self.labels.shape[0]} labels for {self.images.shape[0]} images")

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def digest(self) -> str:
        """sha256 over images and labels: identifies the exact data a model saw."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.images).data)
        h.update(self.labels.astype("<i8").tobytes())
        return h.hexdigest()


def location(variable: str, default: Path) -> Path:
    """``$variable`` when set (stripped and checked, :func:`dartlib.environment.setting`), else ``default``."""
    from dartlib.environment import setting

    value = setting(variable)
    return Path(value).expanduser() if value else default


def _check_split(split: str, valid: tuple[str, ...]) -> str:
    if split not in valid:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(valid)}")
    return split
