"""Labelled images of the user's own, as ``python -m dartlib choose-alpha --data`` (and ``--validation``)
names them (docs/using-dart.md): an ``.npz`` file of images and labels, or one of dartlib's data sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dartlib.data.sources import load


class LabelledDataError(ValueError):
    """A labelled-data file that cannot be read as images and labels; the message names the option,
    the file and what it needs."""


def load_labelled(spec: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images, labels)`` of ``spec``: an ``.npz`` file with arrays ``images`` and ``labels`` (uint8
    N x H x W x C, or float N x C x H x W in [0, 1]), or the name of one of dartlib's data sets (its
    training split)."""
    if spec.endswith(".npz"):
        if not Path(spec).is_file():
            raise LabelledDataError(f"--data {spec}: no such file")
        with np.load(spec) as arrays:
            missing = [k for k in ("images", "labels") if k not in arrays]
            if missing:
                raise LabelledDataError(f"--data {spec} has arrays {sorted(arrays)}; it needs 'images' and 'labels' "
                                        "(np.savez(path, images=images, labels=labels))")
            return arrays["images"], arrays["labels"]
    train = load(spec, split="train")
    return train.images, train.labels
