"""Choosing alpha on held-out source data (never on test data)."""

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart import DartConfig, RefinementModule, Refiner
from dartlib.data.sources import Dataset
from dartlib.models import small_cnn
from dartlib.validation import choose_alpha, heldout_rows, holdout_split


def test_holdout_split_is_disjoint_and_class_balanced():
    labels = np.repeat(np.arange(4), [30, 20, 25, 40])
    fit, held = holdout_split(labels, per_class=5, seed=0)
    assert len(np.intersect1d(fit, held)) == 0 and len(fit) + len(held) == len(labels)
    assert np.bincount(labels[held]).tolist() == [5, 5, 5, 5]
    assert np.array_equal(holdout_split(labels, per_class=5, seed=0)[1], held)  # seeded


def _table(losses: dict[float, float]) -> pd.DataFrame:
    return pd.DataFrame([{"alpha": a, "rho": 1.0, "bnadapt": 80.0, "dart": 80.0 - loss} for a, loss in losses.items()])


def test_choose_alpha_keeps_the_papers_value_unless_it_costs_too_much():
    assert choose_alpha(_table({0.1: 0.4, 1.0: 0.0, 10.0: 0.0}), paper_alpha=0.1) == 0.1
    assert choose_alpha(_table({0.1: 2.0, 1.0: 0.3, 10.0: 0.0}), paper_alpha=0.1) == 1.0
    assert choose_alpha(_table({0.1: 2.0, 1.0: 0.9, 10.0: 0.6}), paper_alpha=0.1) == 10.0  # least loss
    assert choose_alpha(_table({0.1: 2.0, 1.0: 0.9, 10.0: 0.6}), paper_alpha=0.1, max_loss=1.0) == 1.0


def test_an_identity_refiner_scores_as_bnadapt_on_held_out_streams():
    rng = np.random.default_rng(0)
    held = Dataset("fixture", "train-heldout", rng.integers(0, 256, (300, 32, 32, 3), dtype=np.uint8),
                   np.repeat(np.arange(3), 100), ("a", "b", "c"))
    torch.manual_seed(0)
    identity = Refiner(module=RefinementModule(3, hidden=8), config=DartConfig())  # residual, zero-initialised
    rows = heldout_rows(small_cnn(3).eval(), identity, held, rhos=(1, 10), batch_size=50)
    assert [r["n"] for r in rows] == [300, 100 + 31 + 10]
    for row in rows:
        assert row["dart"] == row["bnadapt"]
        assert row["w_minus_i"] == pytest.approx(0.0) and row["b_norm"] == pytest.approx(0.0)
