"""Choosing alpha on held-out source data (never on test data)."""

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.data.sources import Dataset
from dartlib.models.backbones import small_cnn
from dartlib.data.protocols import long_tailed
from dartlib.studies.alpha_choice import AlphaSearch, choose_alpha, heldout_rows, holdout_split


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
    from dartlib.studies.alpha_choice import corrupted_heldout

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


def _plain_model_and_arrays():
    """A plain torch model and numpy arrays, as a user has them: 4 classes of 8 x 8 RGB noise."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(4, 4))
    rng = np.random.default_rng(0)
    return model, rng.integers(0, 256, size=(400, 8, 8, 3), dtype=np.uint8), np.arange(400) % 4


SMALL = dict(per_class=40, n_dir=4, epochs=1, batch_size=32, hidden=16)


def test_select_alpha_runs_the_rule_on_a_users_model_and_arrays(tmp_path, monkeypatch):
    """The paper's 0.1 loses 2 points on the held-out i.i.d. stream, 1 loses 0.3: the rule takes 1,
    the smallest candidate within 0.5 points; with 0.1 within, it keeps 0.1."""
    from dartlib.dart.refiner import DartConfig
    from dartlib.studies import alpha_choice

    model, images, labels = _plain_model_and_arrays()
    iid_gain = {0.1: -2.0, 1.0: -0.3, 10.0: 0.0}

    def scored(model, refiner, held, *, rhos, batch_size, seed, device):
        assert held.split == "train-heldout" and len(held) == 4 * 20  # held-out training images, no test data
        return [{"rho": float(r), "n": 80, "bnadapt": 80.0,
                 "dart": 80.0 + (iid_gain[refiner.config.alpha] if r == 1 else 5.0), "w_minus_i": 0.0, "b_norm": 0.0}
                for r in rhos]

    monkeypatch.setattr(alpha_choice, "heldout_rows", scored)
    choice = alpha_choice.select_alpha(model=model, data=(images, labels), num_classes=4, device="cpu",
                                     config=DartConfig(**SMALL), search=AlphaSearch(alphas=[1, 10], heldout_per_class=20),
                                     cache_dir=tmp_path, progress=False)
    assert choice.alpha == 1.0 and choice.kept == 0.1
    assert str(choice).startswith("alpha = 1: 0.1 changes accuracy on held-out i.i.d. batches by -2.00 points, a loss "
                                  "of more than 0.5; 1 (-0.30) is the smallest candidate within it")
    assert choice.gains().loc[0.1, 100.0] == 5.0
    iid_gain[0.1] = -0.4
    assert alpha_choice.select_alpha(model=model, data=(images, labels), num_classes=4, device="cpu",
                                   config=DartConfig(**SMALL), search=AlphaSearch(alphas=[1, 10], heldout_per_class=20),
                                   cache_dir=tmp_path, progress=False).alpha == 0.1


def test_select_alpha_scores_trained_refiners_on_held_out_streams(tmp_path):
    import torch

    from dartlib.dart.fit import SettingError
    from dartlib.dart.refiner import DartConfig
    from dartlib.studies.alpha_choice import select_alpha

    model, images, labels = _plain_model_and_arrays()
    floats = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255  # tensors in [0, 1] work as well
    choice = select_alpha(model=model, data=(floats, torch.from_numpy(labels)), num_classes=4, device="cpu",
                          config=DartConfig(**SMALL),
                          search=AlphaSearch(alphas=[10], heldout_per_class=20, rhos=(1, 10), batch_size=20), cache_dir=tmp_path, progress=False)
    assert choice.alpha in (0.1, 10.0)
    assert list(choice.table.columns) == ["alpha", "rho", "n", "bnadapt", "dart", "w_minus_i", "b_norm", "gain"]
    assert choice.table.n.tolist() == [80, len(long_tailed(np.arange(80) % 4, rho=10.0, seed=0))] * 2
    # the stronger regulariser keeps g_phi closer to the identity on balanced batches
    w = choice.table[choice.table.rho == 1].set_index("alpha").w_minus_i
    assert w[10.0] < w[0.1]
    with pytest.raises(SettingError, match="heldout_per_class=100: hold out at least 1 and fewer than"):
        select_alpha(model=model, data=(images, labels), num_classes=4, device="cpu", config=DartConfig(**SMALL),
                     search=AlphaSearch(heldout_per_class=100), cache_dir=tmp_path)


def test_the_choose_alpha_command_takes_a_model_file_weights_and_an_npz(tmp_path, monkeypatch, capsys):
    import torch

    from dartlib.cli import main

    model, images, labels = _plain_model_and_arrays()
    (tmp_path / "my_model.py").write_text(
        "from torch import nn\n\n"
        "def build():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),\n"
        "                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 4))\n")
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    np.savez(tmp_path / "train.npz", images=images, labels=labels)
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path / "data"))  # the refiners' cache
    args = ["choose-alpha", "--model", f"{tmp_path / 'my_model.py'}:build", "--weights", str(tmp_path / "weights.pt"),
            "--data", str(tmp_path / "train.npz"), "--alphas", "10", "--epochs", "1", "--n-dir", "4",
            "--per-class", "40", "--batch-size", "32", "--heldout", "20", "--test-batch-size", "20", "--device", "cpu",
            "--quiet", "--out", str(tmp_path / "alpha.csv")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Sequential on 400 labelled images (4 classes)" in out and "use DartConfig(alpha=" in out
    assert len(pd.read_csv(tmp_path / "alpha.csv")) == 2 * 3  # 0.1 and 10, at rho 1, 10, 100
    with pytest.raises(SystemExit, match="has arrays .*'x'.* it needs 'images' and 'labels'"):
        np.savez(tmp_path / "bad.npz", x=images)
        main([*args[:5], "--data", str(tmp_path / "bad.npz")])
