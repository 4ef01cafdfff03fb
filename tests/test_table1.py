"""Table 1 cells on a tiny model and a tiny corrupted set in the CIFAR-C layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dartlib.dart import DartConfig, RefinementModule, Refiner
from dartlib.experiments import run_grid
from dartlib.models import small_cnn
from dartlib.table1 import TABLE1_METHODS, Table1Context, evaluate_cell, table1_cells
from dartlib.tta.note import to_iabn


@pytest.fixture()
def tiny_corrupted(tmp_path, monkeypatch):
    """A 3-class corrupted test set written as <root>/FMNIST-C/<corruption>.npy + labels.npy."""
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    from dartlib.data import sources

    folder = sources.corrupted_dir("fmnistc")
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 12).astype(np.int64)
    images = rng.integers(0, 255, size=(5 * len(labels), 32, 32, 3), dtype=np.uint8)
    np.save(folder / "gaussian_noise.npy", images)
    np.save(folder / "labels.npy", np.tile(labels, 5))
    return folder


def test_cells_cover_every_method_with_and_without_dart():
    cells = table1_cells(dataset="cifar10c", corruptions=["fog"], rhos=[1, 100])
    assert len(cells) == 2 * (2 * len(TABLE1_METHODS) - 1)
    assert not [c for c in cells if c.method == "noadapt" and c.refiner == "dart"]


def test_every_table1_method_runs_with_and_without_dart(tiny_corrupted, tmp_path):
    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    refiner = Refiner(module=RefinementModule(10, hidden=8), config=DartConfig())
    context = Table1Context(source=source, refiner=refiner, iabn=to_iabn(source), batch_size=40,
                            options={"memo": {"n_augmentations": 2}})
    cells = table1_cells(dataset="fmnistc", corruptions=["gaussian_noise"], rhos=[10])
    path = tmp_path / "table1.csv"
    results = run_grid(cells, lambda c: evaluate_cell(c, context), path=path, experiment="table1", progress=False)
    assert len(results) == len(cells) and results.accuracy.between(0, 100).all()
    # the untrained residual refiner is the identity: every method scores exactly as without DART
    pivot = results.pivot_table(index="method", columns="refiner", values="accuracy")
    with_dart = pivot.dropna()
    assert (with_dart["dart"] == with_dart["none"]).all()
    n = results.n.unique()
    assert len(n) == 1 and n[0] < 10 * 60  # an LT subset of the stream


def test_stream_limit_keeps_the_first_images_of_the_lt_order():
    from dartlib.table1 import stream_order

    labels = np.repeat(np.arange(10), 100)
    full, limited = (stream_order(labels, c) for c in
                     (table1_cells(dataset="x", corruptions=["fog"], rhos=[10], methods=["bnadapt"], limit=n)[0] for n in (0, 50)))
    assert len(limited) == 50 and np.array_equal(limited, full[:50]) and len(full) > 50


def test_unknown_refiner_names_are_refused():
    from dartlib.experiments import Cell

    context = Table1Context(source=small_cnn(10, width=4).eval(), refiner=None)
    cell = Cell(dataset="x", shift="lt", shift_param=1.0, corruption="fog", severity=5, method="bnadapt", refiner="dart")
    with pytest.raises(ValueError, match="no refiner 'dart' in this context; valid: none"):
        context.adapter(cell)
