"""The identifiability bound of notebook 15 on synthetic batches whose class is, or is not, visible
in DART's inputs."""

from __future__ import annotations

import numpy as np
import torch

from dartlib.studies.identifiability import identifiability, single_class_batches


def _data(n_per_class: int = 400, k: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(k), n_per_class)
    images = rng.integers(0, 40, size=(len(labels), 4, 4, 3), dtype=np.uint8)
    images[..., 0] += (labels * 50).astype(np.uint8)[:, None, None]  # the class shows in channel 0
    return images, labels


def _visible(x: torch.Tensor) -> torch.Tensor:
    """Logits that point at the class shown in channel 0 (what a good BN-adapted model gives)."""
    level = x[:, 0].mean(dim=(1, 2)) * 255 / 50
    return -(level[:, None] - torch.arange(4.0)[None]) ** 2


def _blind(x: torch.Tensor) -> torch.Tensor:
    """Logits that say nothing about the batch (the same for every input)."""
    return torch.zeros(x.shape[0], 4) + torch.tensor([0.3, 0.1, 0.0, -0.2])


def test_single_class_batches_hold_one_class_each():
    _, labels = _data()
    out = single_class_batches(labels, batch_size=50, per_class=3, seed=0)
    assert len(out) == 12 and all(len(set(labels[b])) == 1 and len(b) == 50 for b in out)


def test_a_visible_class_is_identified_and_a_hidden_one_is_not():
    images, labels = _data()
    test_images, test_labels = _data(seed=1)
    order = np.argsort(test_labels, kind="stable")  # single-class test batches, as at IR 5000
    streams = {"s": (test_images, test_labels, order)}
    seen = identifiability(forward=_visible, train_images=images, train_labels=labels, streams=streams,
                           batch_size=50, per_class=5)
    blind = identifiability(forward=_blind, train_images=images, train_labels=labels, streams=streams,
                            batch_size=50, per_class=5)
    assert seen.batches.iloc[0] == 32 and seen.majority_share.iloc[0] == 100.0
    assert seen.classifier.iloc[0] == 100.0 and seen.whole_batch_accuracy.iloc[0] == 100.0
    assert blind.classifier.iloc[0] == 25.0  # one class guessed for every batch: chance with 4 classes
