"""The paper-c10 profile and what it needs: the paper's source recipe and the reference code's
variant (PolyLoss, gradient clipping), and the runner's overrides, output folder and time guard."""

from __future__ import annotations

import math
import shutil
import time

import nbformat
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dartlib import paths, runner
from dartlib.paths import PROFILES_DIR
from dartlib.models.training import RECIPES, EpochBatches, clip_gradients, sgd_epoch, source_loss
from dartlib.profiles import ProfileError
from dartlib.schema import checked_profile
from test_runner import _notebook  # the runner tests' one-notebook builder


def test_the_paper_recipes():
    paper, poly = RECIPES["paper"], RECIPES["paper-poly"]
    # Appendix A: 200 epochs, batch 200, SGD lr 0.1, momentum 0.9, weight decay 5e-4
    assert (paper.epochs, paper.batch_size, paper.lr, paper.momentum, paper.weight_decay) == (200, 200, 0.1, 0.9, 5e-4)
    assert (paper.loss, paper.grad_clip, paper.augmentation) == ("ce", 0.0, "rrc-flip")
    # the reference code adds PolyLoss epsilon 6 and clip_grad_norm_ 1.0; nothing else differs
    assert (poly.loss, poly.poly_epsilon, poly.grad_clip) == ("poly", 6.0, 1.0)
    assert {k: v for k, v in vars(poly).items() if k not in ("loss", "poly_epsilon", "grad_clip")} == \
        {k: v for k, v in vars(paper).items() if k not in ("loss", "poly_epsilon", "grad_clip")}
    assert RECIPES["paper-dry"].epochs == 1 and RECIPES["paper-dry"].augmentation == paper.augmentation


def test_polyloss_is_cross_entropy_plus_epsilon_times_one_minus_p_y():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    labels = torch.tensor([0, 1])
    p_y = torch.softmax(logits, 1)[torch.arange(2), labels]
    ce = F.cross_entropy(logits, labels, reduction="none")
    assert torch.allclose(source_loss(logits, labels, RECIPES["paper-poly"]), (ce + 6.0 * (1 - p_y)).mean())
    assert torch.allclose(source_loss(logits, labels, RECIPES["paper"]), ce.mean())
    with pytest.raises(ValueError, match="'ce' or 'poly'"):
        import dataclasses

        source_loss(logits, labels, dataclasses.replace(RECIPES["paper"], loss="focal"))


def test_gradient_clipping_bounds_the_global_norm_only_when_asked():
    model = nn.Linear(4, 3)
    for recipe, bounded in ((RECIPES["paper-poly"], True), (RECIPES["paper"], False)):
        for p in model.parameters():
            p.grad = torch.full_like(p, 10.0)
        clip_gradients(model, recipe)
        norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in model.parameters()))
        assert (norm <= 1.0 + 1e-5) is bounded


def test_an_epoch_of_the_reference_variant_runs_and_clips():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(32 * 32 * 3, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    images = torch.randint(0, 256, (40, 32, 32, 3), dtype=torch.uint8).numpy()
    labels = torch.randint(0, 10, (40,))
    seen_norms = []
    original = torch.nn.utils.clip_grad_norm_

    def spy(params, max_norm, *a, **kw):
        seen_norms.append(float(original(params, max_norm, *a, **kw)))
        return seen_norms[-1]

    torch.nn.utils.clip_grad_norm_ = spy
    try:
        loss_sum, correct, seen = sgd_epoch(
            model, opt, EpochBatches(images, labels, torch.arange(40), 2, 20, "rrc-flip", torch.Generator().manual_seed(0)),
            lr_of_step=lambda i: 0.1, device="cpu", desc="test", recipe=RECIPES["paper-poly"])
    finally:
        torch.nn.utils.clip_grad_norm_ = original
    assert seen == 40 and math.isfinite(loss_sum) and len(seen_norms) == 2


def test_the_paper_c10_profile():
    p = checked_profile("paper-c10")
    assert (p["source_arch"], p["source_recipe"], p["dart_epochs"], p["dart_alpha"]) == ("resnet26", "paper", 50, 0.1)
    assert p["note_finetune_epochs"] == 30
    assert p["lt_rhos"] == [1, 10, 100] and p["online_irs"] == [1, 20, 50, 5000]
    assert len(p["table1_corruptions"]) == 15 and p["table1_stream_limit"] == 0 and len(p["fig3_corruptions"]) == 15
    assert runner.resolve_notebooks(p["notebooks"])  # every listed notebook exists
    assert {"06", "11", "05"} <= set(p["notebooks"])  # Table 1, CIFAR-10C-imb, Figure 3


def test_overrides_are_read_as_yaml_and_checked_like_the_profile():
    assert runner.parse_override("dart_epochs=2") == ("dart_epochs", 2)
    assert runner.parse_override("table1_corruptions=[gaussian_noise, snow]") == \
        ("table1_corruptions", ["gaussian_noise", "snow"])
    with pytest.raises(ProfileError, match="KEY=VALUE"):
        runner.parse_override("dart_epochs")
    params = checked_profile("paper-c10")
    assert runner.overridden(params, {"dart_alpha": 10.0}, profile="paper-c10")["dart_alpha"] == 10.0
    with pytest.raises(ProfileError, match="dart_epochs"):
        runner.overridden(params, {"dart_epochs": 0}, profile="paper-c10")
    with pytest.raises(ProfileError, match="unknown corruption"):
        runner.overridden(params, {"table1_corruptions": ["gausian_noise"]}, profile="paper-c10")
    with pytest.raises(ProfileError, match="unknown key"):
        runner.overridden(params, {"dart_epoch": 2}, profile="paper-c10")
    with pytest.raises(ProfileError, match="name cannot be overridden"):
        runner.overridden(params, {"profile": "gpu"}, profile="paper-c10")


def test_an_overridden_run_needs_its_own_output_folder():
    with pytest.raises(ProfileError, match="--output"):
        runner.run_profile(profile="paper-c10", overrides={"dart_epochs": 2})


def test_the_output_folder_takes_only_the_running_profiles_outputs(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.OUTPUT_DIR_ENV, raising=False)
    assert paths.output_root("paper-c10") == paths.REPO_ROOT
    monkeypatch.setenv(paths.OUTPUT_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(paths.OUTPUT_PROFILE_ENV, "paper-c10")
    assert paths.results_dir("paper-c10") == tmp_path / "results" / "paper-c10"
    assert paths.figures_dir("paper-c10") == tmp_path / "figures" / "paper-c10"
    assert paths.runs_dir("paper-c10") == tmp_path / "runs" / "paper-c10"
    assert paths.output_root("cpu") == paths.REPO_ROOT  # committed rows of another profile are read where they are


def test_the_time_guard_bounds_each_cell_by_what_is_left():
    assert runner.TimeGuard(None).client_options() == {} and not runner.TimeGuard(None).spent()
    guard = runner.TimeGuard(100.0)
    options = guard.client_options()
    assert options["interrupt_on_timeout"] is True
    assert 98 <= options["timeout_func"](None) <= 100
    spent = runner.TimeGuard(0.01)
    time.sleep(0.02)
    assert spent.spent() and spent.cell_timeout() == 0.01


def test_the_time_guard_stops_a_run_and_keeps_what_finished(tmp_path, monkeypatch):
    """A cell still running when the budget is spent is interrupted: the rows it wrote before stay,
    its notebook is ``stopped``, later notebooks are ``not run``; values come from --set."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    shutil.copytree(PROFILES_DIR, nb_dir / "profiles")
    params = 'profile = "smoke"\ncost_repeats = 1'  # a setting of the tree standing for a grid's size
    grid = ("from pathlib import Path\nimport time\nfrom dartlib.paths import results_dir\n"
            "for i in range(cost_repeats):\n"
            "    with open(results_dir(profile) / 'rows.csv', 'a') as f: f.write(f'{i}\\n')\n"
            "    time.sleep(0.5 if i < 2 else 60)")
    nbformat.write(_notebook(grid, params=params), nb_dir / "01_grid.ipynb")
    nbformat.write(_notebook("x = 1", params=params), nb_dir / "02_after.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", nb_dir)
    monkeypatch.setattr("dartlib.profiles.PROFILES_DIR", nb_dir / "profiles")
    monkeypatch.setenv(paths.OUTPUT_DIR_ENV, "")  # run_profile sets both: restored after the test
    monkeypatch.setenv(paths.OUTPUT_PROFILE_ENV, "")
    out = tmp_path / "out"
    start = time.monotonic()
    runs = runner.run_profile(profile="smoke", overrides={"cost_repeats": 5}, output=out, budget=20.0)
    assert time.monotonic() - start < 50  # not the 60 s the third row would take
    assert [r.status for r in runs] == ["stopped", "not run"], runs
    assert "time guard" in runs[0].detail and "run the same command again" in runs[0].detail
    assert (out / "results" / "smoke" / "rows.csv").read_text().split() == ["0", "1", "2"]
    assert (out / "runs" / "smoke" / "01_grid.ipynb").is_file()  # the executed copy, under --output
