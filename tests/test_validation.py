"""Choosing alpha on held-out source data (never on test data)."""

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.data.sources import Dataset
from dartlib.models.backbones import small_cnn
from dartlib.experiments.validation import choose_alpha, heldout_rows, holdout_split


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


def test_with_corrupted_streams_the_rule_reads_their_mean_loss_not_the_clean_one():
    rows = []
    for alpha, clean, corrupted in ((0.1, 0.2, (1.5, 0.9)), (1.0, 0.1, (0.7, 0.2)), (10.0, 0.0, (0.1, 0.1))):
        rows.append({"alpha": alpha, "corruption": "clean", "rho": 1.0, "bnadapt": 80.0, "dart": 80.0 - clean})
        for name, loss in zip(("speckle_noise", "saturate"), corrupted):
            rows.append({"alpha": alpha, "corruption": name, "rho": 1.0, "bnadapt": 60.0, "dart": 60.0 - loss})
        rows.append({"alpha": alpha, "corruption": "saturate", "rho": 100.0, "bnadapt": 50.0, "dart": 0.0})  # ignored
    frame = pd.DataFrame(rows)
    assert choose_alpha(frame[frame.corruption == "clean"], paper_alpha=0.1) == 0.1
    assert choose_alpha(frame, paper_alpha=0.1) == 1.0  # mean corrupted loss 1.2, 0.45, 0.1


def test_corrupted_heldout_keeps_labels_and_changes_images():
    from dartlib.experiments.validation import corrupted_heldout

    rng = np.random.default_rng(0)
    held = Dataset("fixture", "train-heldout", rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8),
                   np.repeat(np.arange(2), 10), ("a", "b"))
    out = corrupted_heldout(held, corruption="speckle_noise", severity=5, seed=0)
    assert np.array_equal(out.labels, held.labels) and out.images.shape == held.images.shape
    assert not np.array_equal(out.images, held.images) and out.split == "train-heldout-speckle_noise"
    with pytest.raises(ValueError, match="gaussian_blur"):
        corrupted_heldout(held, corruption="gaussian_noise_typo", severity=5, seed=0)


def test_validation_file_names_keep_the_default_length_and_separate_others():
    from dartlib.cli import VALIDATION_EPOCHS, validation_filename

    assert validation_filename(corrupted=False, epochs=VALIDATION_EPOCHS) == "alpha_validation.csv"
    assert validation_filename(corrupted=True, epochs=VALIDATION_EPOCHS) == "alpha_validation_corrupted.csv"
    assert validation_filename(corrupted=True, epochs=10) == "alpha_validation_corrupted_epochs10.csv"
    assert validation_filename(corrupted=False, epochs=10) != validation_filename(corrupted=True, epochs=10)
