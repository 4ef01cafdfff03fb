"""The cost table: parameters held and trained, FLOPs, wall clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.perf.costs import COST_METHODS, cost_table
from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.models.backbones import resnet26, small_cnn


def test_cost_rows_count_what_each_method_holds_and_trains():
    torch.manual_seed(0)
    model = small_cnn(10, width=4).eval()
    module = RefinementModule(10, hidden=8)
    refiner = Refiner(module=module, config=DartConfig())
    images = np.random.default_rng(0).integers(0, 255, size=(40, 32, 32, 3), dtype=np.uint8)
    table = cost_table(model, refiner, images, batch_size=20, repeats=1).set_index(["method", "refiner"])
    assert list(table.index) == list(COST_METHODS)
    n_model = sum(p.numel() for p in model.parameters()) / 1e6
    n_phi = sum(p.numel() for p in module.parameters()) / 1e6
    assert table.loc[("noadapt", "none"), "params_m"] == pytest.approx(n_model)
    # BNAdapt+DART reads its own logits: one network plus g_phi; TENT+DART keeps a frozen copy
    assert table.loc[("bnadapt", "dart"), "params_m"] == pytest.approx(n_model + n_phi)
    assert table.loc[("tent", "dart"), "params_m"] == pytest.approx(2 * n_model + n_phi)
    n_bn = sum(m.weight.numel() + m.bias.numel() for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)) / 1e6
    assert table.loc[("tent", "none"), "trainable_params_m"] == pytest.approx(n_bn)
    assert table.loc[("bnadapt", "dart"), "trainable_params_m"] == 0
    fwd = table.gmac_forward_per_image
    assert fwd[("tent", "dart")] == pytest.approx(2 * fwd[("tent", "none")])
    assert fwd[("bnadapt", "dart")] == pytest.approx(fwd[("bnadapt", "none")])
    # TENT executes a backward pass (input gradients only: BN affine is all it trains) on top of its forward pass
    assert table.loc[("tent", "none"), "gmac_executed_per_image"] > 1.5 * fwd[("tent", "none")]
    assert (table.wall_clock_s > 0).all() and (table.images == 40).all()


def test_resnet26_forward_macs_match_the_papers_figure():
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        resnet26(10).eval()(torch.zeros(1, 3, 32, 32))
    assert counter.get_total_flops() / 2 / 1e9 == pytest.approx(0.86, abs=0.01)  # the paper's cost table


def test_cost_rows_label_ours_and_join_the_papers_row_of_the_same_method():
    from dartlib.studies.costs import cost_rows

    ours = pd.read_csv(Path(__file__).parent / "golden" / "smoke" / "costs.csv")
    side = cost_rows(ours).set_index("row")
    assert list(side.index[:2]) == ["NoAdapt", "BNAdapt"] and "BNAdapt+DART" in side.index
    assert len(side) == len(ours)
    # the paper's rows joined by method: ResNet-26 is 17.4 M parameters, g_phi adds 0.2 M, TENT+DART holds two copies
    assert side.params_m_paper.tolist() == [17.4, 17.4, 17.6, 17.4, 35.0]
    assert side.loc["BNAdapt", "wall_clock_vs_bnadapt_paper"] == pytest.approx(1.0)
    assert side.loc["BNAdapt+DART", "wall_clock_s"] == pytest.approx(
        ours.set_index(["method", "refiner"]).loc[("bnadapt", "dart"), "wall_clock_s"])
