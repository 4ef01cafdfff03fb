"""Shared test settings."""

import os

# Progress bars would only add noise to captured output and notebook cells.
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np
import pytest


@pytest.fixture()
def tiny_corrupted(tmp_path, monkeypatch):
    """A 10-class corrupted test set in the CIFAR-C layout under a temporary data root:
    ``FMNIST-C/gaussian_noise.npy`` (5 severities x 120 random images) + ``labels.npy``."""
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    from dartlib.data import corrupted_sets

    folder = corrupted_sets.corrupted_dir("fmnistc")
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 12).astype(np.int64)
    np.save(folder / "gaussian_noise.npy", rng.integers(0, 255, size=(5 * len(labels), 32, 32, 3), dtype=np.uint8))
    np.save(folder / "labels.npy", np.tile(labels, 5))
    return folder
