"""TENT on CIFAR-10C-imb and MEMO on CIFAR-10C-LT over all of Table 1's corruptions
(dartlib.studies.all_corruptions): the grid's cells (notebook 09's among them, so its rows are
borrowed), each cell's context, and the block beside the profile's subset and the paper."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from dartlib.experiments.cell_options import options_text
from dartlib.experiments.grid import SCHEMA
from dartlib.experiments.settings import Settings
from dartlib.studies import all_corruptions
from dartlib.studies.appendix_settings import memo_cells, tent_imb_cells

EVERY = ["fog", "snow", "frost", "pixelate"]
FEW = ["fog", "snow"]


def _settings() -> Settings:
    return Settings.from_profile("cpu", table1_corruptions=EVERY, tent_corruptions=FEW, memo_corruptions=FEW,
                                 lt_rhos=[1, 100], imb_table_irs=[1, 5000])


def test_the_grid_runs_tent_then_memo_rho_by_rho_over_every_corruption():
    s = _settings()
    cells = all_corruptions.profile_cells(s)
    counts = Counter((c.method, c.refiner, c.options.get("bn", "")) for c in cells)
    assert counts[("tent", "none", "")] == counts[("tent", "dart", "")] == 2 * 4  # 2 IRs x 4 corruptions
    assert counts[("memo", "none", "stored")] == counts[("memo", "dart", "adapted")] == 2 * 4
    assert counts[("noadapt", "none", "")] == 2 * 4
    first_memo = next(i for i, c in enumerate(cells) if c.shift == "lt")
    assert all(c.method == "tent" for c in cells[:first_memo])
    assert [float(c.shift_param) for c in cells[first_memo:]] == sorted(float(c.shift_param) for c in cells[first_memo:])
    assert {c.corruption for c in cells} == set(EVERY)
    # notebook 09's cells over the subset are the same cells (same keys): their rows are borrowed
    keys = {c.key for c in cells}
    assert {c.key for c in tent_imb_cells(s, corruptions=FEW) + memo_cells(s, corruptions=FEW)} <= keys
    assert len(keys) == len(cells)


class _Context:
    """What the grids' ``context_of`` read of a context: its named refiners and ``variant``."""

    def __init__(self, **fields):
        self.fields = fields
        self.refiners = fields.get("refiners", {})

    def variant(self, **changes):
        return _Context(**{**self.fields, **changes})


def test_each_memo_cell_gets_its_bn_mode_and_the_others_the_base_context():
    s = _settings()
    base = _Context(batch_size=7)
    context_of = all_corruptions.context_of(s, base)
    by_bn = {c.options.get("bn", ""): context_of(c) for c in all_corruptions.profile_cells(s)}
    assert by_bn["stored"].fields["options"]["memo"]["bn"] == "source"
    assert by_bn["adapted"].fields["options"]["memo"] == {"bn": "batch", "n_augmentations": s.methods.memo_augmentations}
    assert by_bn["adapted"].fields["batch_size"] == s.test.batch_size
    assert by_bn[""] is base


def _rows() -> pd.DataFrame:
    """TENT at 40 + i and TENT+DART at 50 + 2i on corruption i (IR 5000); MEMO's three on fog only."""
    base = {**{k: "" for k in SCHEMA}, "dataset": "cifar10c", "severity": 5, "n": 1000, "seed": 0}
    rows = []
    for i, corruption in enumerate(EVERY):
        imb = dict(shift="online-imb", shift_param=5000.0, corruption=corruption, method="tent", params="subset=1000")
        rows += [{**base, **imb, "refiner": "none", "accuracy": 40.0 + i},
                 {**base, **imb, "refiner": "dart", "accuracy": 50.0 + 2 * i}]
    lt = dict(shift="lt", shift_param=100.0, corruption="fog", method="memo")
    rows += [{**base, **lt, "refiner": "none", "params": "bn=stored", "accuracy": 60.0},
             {**base, **lt, "refiner": "none", "params": "bn=adapted", "accuracy": 55.0},
             {**base, **lt, "refiner": "dart", "params": "bn=adapted", "accuracy": 75.0}]
    return pd.DataFrame(rows)[SCHEMA]


def test_the_block_puts_every_corruption_beside_the_subset_and_the_paper():
    table = all_corruptions.all_corruptions_block(settings=_settings(), rows=_rows(), outcomes={})
    assert table.loc[("TENT", "IR=5000"), "4 corruptions"].startswith("41.50 ± ≤")  # 40, 41, 42, 43
    assert table.loc[("TENT", "IR=5000"), "2 corruptions"].startswith("40.50 ± ≤")  # fog and snow
    assert table.loc[("TENT+DART", "IR=5000"), "gain, 4 corruptions"].startswith("11.50 ± ≤")  # 10 + mean(i)
    assert table.loc[("TENT+DART", "IR=5000"), "paper"] == "71.5"
    assert table.loc[("TENT", "IR=1"), "4 corruptions"] == "not run (0 of 4)"
    assert table.loc[("MEMO (adapted BN)+DART", "rho=100"), "4 corruptions"] == "not run (1 of 4)"
    assert table.loc[("MEMO (adapted BN)+DART", "rho=100"), "gain, 2 corruptions"] == "not run (1 of 2)"
    assert table.loc[("MEMO (stored BN)", "rho=100"), "paper"] == "71.4"  # the stored-BN row, not the adapted one
    assert table.loc[("MEMO (adapted BN)", "rho=100"), "paper"] == "73.6"


def test_the_grid_is_registered_and_the_ray_backend_refuses_it(capsys):
    from dartlib.studies.grids import GRIDS

    spec = GRIDS["all_corruptions"]
    assert spec.notebook == "09_more_settings" and spec.context_of is all_corruptions.context_of
    assert "more_settings.csv" in spec.shared_results
    with pytest.raises(KeyError):
        GRIDS["all-corruptions"]
    from dartlib import cli

    assert cli.main(["grid", "all_corruptions", "--profile", "smoke", "--backend", "ray"]) == 2
    assert "--backend local" in capsys.readouterr().err


def test_the_sensitivity_grid_holds_notebook_08s_tent_cells_over_every_corruption():
    from dartlib.studies.sensitivity import alpha_tent_cells, test_batch_cells

    s = _settings()
    cells = all_corruptions.sensitivity_cells(s)
    alphas, batches = len(s.sensitivity.alpha_values), len(s.sensitivity.test_batches)
    lt = [c for c in cells if c.shift == "lt"]
    assert len(lt) == (1 + alphas) * 2 * 4  # TENT without DART and with each alpha, 2 rhos, 4 corruptions
    assert len(cells) - len(lt) == (1 + 2 + 2) * batches * 4  # NoAdapt, BNAdapt(+DART), TENT(+DART) per batch
    assert cells[:len(lt)] == lt  # the alpha table's first
    few = alpha_tent_cells(s, corruptions=FEW) + test_batch_cells(s, corruptions=FEW)
    assert {c.key for c in few} <= {c.key for c in cells}


def test_each_sensitivity_cell_gets_the_refiner_its_params_name():
    s = _settings()
    refiners = {options_text(alpha=a): f"refiner {a:g}" for a in s.sensitivity.alpha_values}
    base = _Context(refiner="base", refiners=refiners)
    context_of = all_corruptions.sensitivity_context_of(s, base)
    cells = all_corruptions.sensitivity_cells(s)
    alpha01 = next(c for c in cells if c.shift == "lt" and c.refiner == "dart" and c.options.get("alpha") == 0.1)
    assert context_of(alpha01).fields["refiner"] == "refiner 0.1"
    assert context_of(next(c for c in cells if c.shift == "lt" and c.refiner == "none")).fields["refiner"] is None
    batch = next(c for c in cells if c.shift == "none" and c.refiner == "dart")
    assert context_of(batch) is base  # the base refiner, as notebook 08 runs the test batch sizes
