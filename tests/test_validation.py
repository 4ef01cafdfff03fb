"""Choosing alpha on held-out source data (never on test data)."""

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.data.dataset import Dataset
from dartlib.models.backbones import small_cnn
from dartlib.data.protocols import long_tailed
from dartlib.studies.alpha_choice import AlphaChoice, AlphaSearch, choose_alpha, heldout_rows, holdout_split


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
    from dartlib.cli.alpha import VALIDATION_EPOCHS, validation_filename

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


def _outcomes(n: int, bn: np.ndarray, dart: dict[tuple[float, float], np.ndarray], rhos=(1.0, 10.0)):
    """Per-image outcomes of streams over n held-out images (every image in every stream)."""
    from dartlib.experiments.outcomes import CellOutcomes

    order = np.arange(n)
    out = {("bnadapt", None, r): CellOutcomes.from_stream(order=order, correct=bn, size=n) for r in rhos}
    out |= {("dart", a, r): CellOutcomes.from_stream(order=order, correct=c, size=n) for (a, r), c in dart.items()}
    table = pd.DataFrame([{"alpha": a, "rho": r} for (a, r) in dart])
    return table, out


def _flip(correct: np.ndarray, k: int) -> np.ndarray:
    """``correct`` with its first k wrong predictions right (k < 0: its first -k right ones wrong)."""
    out = correct.copy()
    idx = np.flatnonzero(~correct if k > 0 else correct)[:abs(k)]
    out[idx] = ~out[idx]
    return out


def test_the_rule_weighs_the_cost_without_shift_against_the_gain_under_it():
    """400 held-out images, BNAdapt right on 300. alpha 0.1: -10 at rho 1, +25 under shift (score
    +7.5); alpha 10: 0 and +10 (score +5): 0.1 is kept. Its gain SEs follow the paired formula."""
    from dartlib.studies.alpha_choice import scored_candidates

    n, bn = 400, np.arange(400) % 4 != 0
    dart = {(0.1, 1.0): _flip(bn, -40), (0.1, 10.0): _flip(bn, 100), (10.0, 1.0): bn.copy(), (10.0, 10.0): _flip(bn, 40)}
    table, outcomes = _outcomes(n, bn, dart)
    summary, chosen = scored_candidates(table, outcomes, kept=0.1, shift_weight=0.5)
    assert chosen == 0.1
    assert summary.loc[0.1, ["iid", "shifted", "score"]].tolist() == pytest.approx([-10.0, 25.0, 7.5])
    assert summary.loc[10.0, ["iid", "shifted", "score"]].tolist() == pytest.approx([0.0, 10.0, 5.0])
    d = (dart[(0.1, 1.0)].astype(float) - bn) * 100
    assert summary.loc[0.1, "iid_se"] == pytest.approx(d.std(ddof=1) / np.sqrt(n))  # paired, image by image
    # the score's difference: 0.5 (d_iid(10) - d_iid(0.1)) + 0.5 (d_lt(10) - d_lt(0.1)) per image, paired
    z = 0.5 * (dart[(10.0, 1.0)].astype(float) - dart[(0.1, 1.0)]) + 0.5 * (dart[(10.0, 10.0)].astype(float) - dart[(0.1, 10.0)])
    assert summary.loc[10.0, "behind"] == pytest.approx(-2.5)
    assert summary.loc[10.0, "behind_se"] == pytest.approx(100 * z.std(ddof=1) / np.sqrt(n))
    # weighing only the cost without shift, 10 scores 10 points better, far beyond 2 SE: it is taken
    assert scored_candidates(table, outcomes, kept=0.1, shift_weight=0.0)[1] == 10.0


def test_the_kept_alpha_stays_unless_beaten_by_more_than_two_se():
    from dartlib.studies.alpha_choice import scored_candidates

    n, bn = 400, np.arange(400) % 4 != 0
    # 10 leads 0.1 by 2 images at rho 1 and 2 under shift (12 images gained, 10 others lost, on each
    # stream): 0.5 points of score, within 2 SE of the paired difference
    def mixed(correct):
        return _flip(_flip(correct, 12), -10)

    dart = {(0.1, 1.0): bn.copy(), (0.1, 10.0): _flip(bn, 40), (10.0, 1.0): mixed(bn), (10.0, 10.0): mixed(_flip(bn, 40))}
    table, outcomes = _outcomes(n, bn, dart)
    summary, chosen = scored_candidates(table, outcomes, kept=0.1, shift_weight=0.5)
    assert summary.score.idxmax() == 10.0 and chosen == 0.1
    assert 0 < summary.loc[10.0, "behind"] <= 2 * summary.loc[10.0, "behind_se"]  # ahead, within 2 SE
    choice = AlphaChoice(alpha=chosen, kept=0.1, shift_weight=0.5, table=table, summary=summary, separable=False,
                         helps=True)
    assert "The held-out data cannot separate it from alpha = 10 (score differences within 2 SE)" in str(choice)
    assert "does not help" not in str(choice)
    # no candidate gains under shift beyond 2 SE: said in words
    flat = {(a, r): _flip(bn, 1 if a == 10.0 else 0) for a in (0.1, 10.0) for r in (1.0, 10.0)}
    table, outcomes = _outcomes(n, bn, flat)
    summary, chosen = scored_candidates(table, outcomes, kept=0.1, shift_weight=0.5)
    choice = AlphaChoice(alpha=chosen, kept=0.1, shift_weight=0.5, table=table, summary=summary, separable=False,
                         helps=False)
    assert "DART does not help this model on the held-out data" in str(choice)


def test_select_alpha_takes_grey_images_of_any_size_and_a_validation_set(tmp_path):
    from dartlib.studies.alpha_choice import select_alpha

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 4)).eval()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(400, 9, 13, 1), dtype=np.uint8)  # grey, 9 x 13
    labels = np.arange(400) % 4
    search = AlphaSearch(alphas=[10], heldout_per_class=20, rhos=(1, 10), batch_size=20)
    choice = select_alpha(model=model, data=(images, labels), num_classes=4, device="cpu", config=DartConfig(**SMALL),
                          search=search, cache_dir=tmp_path, progress=False)
    assert choice.table.n.tolist()[:2] == [80, 80]
    held = select_alpha(model=model, data=(images, labels), num_classes=4, device="cpu", config=DartConfig(**SMALL),
                        search=search, validation=(images[:100], labels[:100]), cache_dir=tmp_path, progress=False)
    assert held.table.n.tolist()[:2] == [100, 100]  # the validation images, all of them at rho 1
    assert len(list(tmp_path.glob("*fit-all*"))) == 2  # g_phi trained on all the data for both candidates


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
    assert list(choice.table.columns) == ["alpha", "rho", "n", "bnadapt", "dart", "gain", "gain_se", "w_minus_i",
                                          "b_norm"]
    lt = len(long_tailed(np.arange(80) % 4, rho=10.0, seed=0))
    assert choice.table.n.tolist() == [80, 80, lt, lt]  # per rho, per candidate
    assert list(choice.summary.index) == [0.1, 10.0] and (choice.summary.iid_se >= 0).all()
    assert choice.summary.loc[choice.alpha, "behind"] == 0.0
    assert choice.helps == bool((choice.summary.shifted > 2 * choice.summary.shifted_se).any())
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
    assert "gain, no shift    gain, shifted     score" in out and "points on held-out batches" in out
    with pytest.raises(SystemExit, match="has arrays .*'x'.* it needs 'images' and 'labels'"):
        np.savez(tmp_path / "bad.npz", x=images)
        main([*args[:5], "--data", str(tmp_path / "bad.npz")])


def test_a_model_or_data_that_cannot_be_read_says_which_option_and_what_to_give(tmp_path):
    import torch
    from torch import nn

    from dartlib.data.labelled import LabelledDataError, load_labelled
    from dartlib.models.user_model import ModelSpecError, load_model

    (tmp_path / "nets.py").write_text("from torch import nn\n\nnet = nn.Linear(4, 2)\nsize = 3\n")
    model = load_model(f"{tmp_path / 'nets.py'}:net")
    assert isinstance(model, nn.Linear) and not model.training
    torch.save(nn.Linear(5, 2).state_dict(), tmp_path / "other.pt")
    for spec, weights, words in [
        (f"{tmp_path / 'nets.py'}:Net", None, "nets.py has no 'Net'"),
        (f"{tmp_path / 'nets.py'}:size", None, "gives a int, not a torch.nn.Module"),
        (f"{tmp_path / 'none.py'}:net", None, "no such file"),
        (str(tmp_path / "saved.pt"), None, "saved.pt: no such file"),
        ("nets", None, "give FILE.py:NAME or package.module:NAME"),
        (f"{tmp_path / 'nets.py'}:net", str(tmp_path / "other.pt"), "other.pt does not fit --model"),
    ]:
        with pytest.raises(ModelSpecError, match=words):
            load_model(spec, weights=weights)
    with pytest.raises(LabelledDataError, match="--data .*missing.npz: no such file"):
        load_labelled(str(tmp_path / "missing.npz"))
