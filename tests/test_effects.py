"""DART's effect per stream, ours beside the paper's (dartlib.analysis.effects)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dartlib.analysis.effects import direction, effect_summary, refiner_effects
from dartlib.reporting.paper import load_table


def _rows(values: dict[tuple[str, str, float, str], float], seeds=(0,)) -> pd.DataFrame:
    return pd.DataFrame([{"method": m, "refiner": r, "shift_param": p, "corruption": c, "seed": s, "accuracy": a}
                         for (m, r, p, c), a in values.items() for s in seeds])


def test_direction_has_a_flat_band():
    assert [direction(g) for g in (1.0, 0.5, 0.2, -0.5, -0.51, float("nan"))] == ["+", "0", "0", "0", "-", ""]
    assert direction(0.3, flat=0.1) == "+"


def test_effects_pair_each_method_with_its_refined_row():
    ours = _rows({("tent", "none", 1.0, "fog"): 70.0, ("tent", "dart", 1.0, "fog"): 69.0,
                  ("tent", "none", 100.0, "fog"): 50.0, ("tent", "dart", 100.0, "fog"): 60.0,
                  ("tent", "none", 100.0, "snow"): 50.0, ("tent", "dart", 100.0, "snow"): 50.2,
                  ("noadapt", "none", 1.0, "fog"): 40.0})
    paper = _rows({("tent", "none", 1.0, "fog"): 80.0, ("tent", "dart", 1.0, "fog"): 80.1,
                   ("tent", "none", 100.0, "fog"): 60.0, ("tent", "dart", 100.0, "fog"): 75.0,
                   ("tent", "none", 100.0, "snow"): 60.0, ("tent", "dart", 100.0, "snow"): 59.0,
                   ("noadapt", "none", 1.0, "fog"): 50.0})
    effects = refiner_effects(ours, paper).set_index(["method", "shift_param", "corruption"])
    assert len(effects) == 3  # NoAdapt has no DART row
    fog1 = effects.loc[("tent", 1.0, "fog")]
    assert math.isclose(fog1.ours, -1.0) and math.isclose(fog1.paper, 0.1, abs_tol=1e-9)
    assert (fog1.ours_dir, fog1.paper_dir, fog1.agrees, fog1.opposite) == ("-", "0", False, False)
    assert effects.loc[("tent", 100.0, "fog")].agrees
    snow = effects.loc[("tent", 100.0, "snow")]
    assert (snow.ours_dir, snow.paper_dir, snow.agrees) == ("0", "-", False)
    summary = effect_summary(effects.reset_index()).loc[("tent", 100.0)]
    assert (summary.same_direction, summary.opposite, summary.streams) == (1, 0, 2)
    assert math.isclose(summary.ours_gain, 5.1) and math.isclose(summary.paper_gain, 7.0)


def test_gain_is_the_mean_over_seeds_and_a_stream_missing_on_one_side_is_left_out():
    ours = _rows({("bnadapt", "none", 10.0, "fog"): 60.0, ("bnadapt", "dart", 10.0, "fog"): 64.0,
                  ("bnadapt", "none", 10.0, "snow"): 60.0}, seeds=(0, 1))
    ours.loc[(ours.refiner == "dart") & (ours.seed == 1), "accuracy"] = 66.0
    paper = _rows({("bnadapt", "none", 10.0, "fog"): 70.0, ("bnadapt", "dart", 10.0, "fog"): 66.0,
                   ("bnadapt", "none", 10.0, "snow"): 70.0, ("bnadapt", "dart", 10.0, "snow"): 75.0})
    effects = refiner_effects(ours, paper)
    assert len(effects) == 1
    row = effects.iloc[0]
    assert math.isclose(row.ours, 5.0) and row.paper == -4.0 and row.opposite


def test_paper_full_tables_give_one_effect_per_method_and_corruption():
    paper = pd.concat([load_table(f"full_cifar10c_lt_rho{r}") for r in (1, 10, 100)])
    effects = refiner_effects(paper, paper)
    assert len(effects) == 8 * 15 * 3  # every method of Table 1 but NoAdapt, 15 corruptions, 3 rhos
    assert effects.agrees.all() and not effects.opposite.any()
    # The paper's Table 1 headline: BNAdapt+DART gains 18.1 points at rho = 100 on average.
    summary = effect_summary(effects)
    assert summary.loc[("bnadapt", 100.0), "paper_gain"] == pytest.approx(18.1, abs=0.1)


def test_gain_against_accuracy_per_corruption_and_its_rank_correlation():
    from dartlib.analysis.effects import gain_against_accuracy, rank_correlation

    ours = _rows({("bnadapt", "none", 1.0, "fog"): 70.0, ("bnadapt", "dart", 1.0, "fog"): 69.0,
                  ("bnadapt", "none", 1.0, "snow"): 60.0, ("bnadapt", "dart", 1.0, "snow"): 57.0,
                  ("bnadapt", "none", 1.0, "blur"): 80.0, ("bnadapt", "dart", 1.0, "blur"): 80.2,
                  ("bnadapt", "none", 100.0, "fog"): 50.0, ("bnadapt", "dart", 100.0, "fog"): 65.0,
                  ("tent", "none", 1.0, "fog"): 10.0, ("tent", "dart", 1.0, "fog"): 90.0}, seeds=(0, 1))
    table = gain_against_accuracy(ours)
    assert table.corruption.tolist() == ["snow", "fog", "blur"]
    assert table.gain.tolist() == pytest.approx([-3.0, -1.0, 0.2])
    assert rank_correlation(table) == pytest.approx(1.0)
    assert math.isnan(rank_correlation(table.iloc[:2]))
    assert gain_against_accuracy(ours, method="lame").empty


def test_the_papers_own_rho_1_loss_sits_on_its_hardest_corruption():
    from dartlib.analysis.effects import gain_against_accuracy

    table = gain_against_accuracy(load_table("full_cifar10c_lt_rho1"))
    assert len(table) == 15
    worst = table.iloc[0]
    assert (worst.corruption, round(worst.accuracy, 1), round(worst.gain, 1)) == ("impulse_noise", 69.9, -1.8)
    assert (table.gain.iloc[1:] >= -0.1).all()
