"""Table 1 and CIFAR-10C-imb at the paper's g_phi (dartlib.studies.paper_config): the grid's
cells, the report beside the profile's refiner and the paper, and the ledger's checks on those rows
(a gain taken on the streams both sides share)."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from dartlib.experiments.grid import SCHEMA
from dartlib.studies.paper_config import PAPER_VARIANTS, bnadapt_block, every_method_block, paper_config_cells
from dartlib.experiments.settings import Settings
from dartlib.book import claim_readings, claims

CORRUPTIONS = ["fog", "snow"]


def _settings() -> Settings:
    return Settings.from_profile("cpu", table1_corruptions=CORRUPTIONS, imb_corruptions=CORRUPTIONS,
                                 lt_rhos=[1, 100], imb_table_irs=[1, 5000])


def test_the_grid_runs_bnadapt_on_each_seeds_streams_first_and_every_method_on_seed_0():
    cells = paper_config_cells(_settings(), names=list(PAPER_VARIANTS))
    counts = Counter((c.method, c.refiner, c.seed) for c in cells)
    # seed 0: none, the profile's refiner and the paper's, on 2 rhos and 2 IRs of 2 corruptions
    assert counts[("bnadapt", "alpha0.1-epochs50", 0)] == counts[("bnadapt", "dart", 0)] == 8
    assert counts[("bnadapt", "alpha0.1-epochs50-seed1", 1)] == counts[("bnadapt", "none", 2)] == 8
    assert counts[("noadapt", "none", 1)] == 4 and ("bnadapt", "dart", 1) not in counts
    assert counts[("noadapt", "none", 0)] == 8  # seed 0: Table 1's LT streams too
    for method in ("pl", "note", "delta", "ods", "lame", "sar"):
        assert counts[(method, "alpha0.1-epochs50", 0)] == counts[(method, "dart", 0)] == 4
    # TENT on CIFAR-10C-LT and, last, on CIFAR-10C-imb (the appendix's table): 4 streams each
    assert counts[("tent", "alpha0.1-epochs50", 0)] == counts[("tent", "none", 0)] == 8
    assert [(c.method, c.shift) for c in cells[-12:]] == [("tent", "online-imb")] * 12
    first_other = next(i for i, c in enumerate(cells) if c.method not in ("bnadapt", "noadapt"))
    assert all(c.method in ("bnadapt", "noadapt") for c in cells[:first_other])  # BNAdapt's rows come first
    assert len(cells) == len({c.key for c in cells})
    assert paper_config_cells(_settings(), names=["alpha0.1-epochs50-seed1"])[0].seed == 1


def _rows(rows: list[dict]) -> pd.DataFrame:
    base = {**{k: "" for k in SCHEMA}, "dataset": "cifar10c", "severity": 5, "n": 1000, "params": ""}
    return pd.DataFrame([{**base, **r} for r in rows])[SCHEMA]


def _fixture() -> pd.DataFrame:
    """BNAdapt at 70 (seed 0) / 60 (seeds 1, 2), the paper's g_phi +5 over it on each seed's streams,
    the profile's +2; on rho 100 and IR 5000 only for the seed-0 refiners; NoAdapt at 50."""
    rows = []
    for shift, param, params in (("lt", 100.0, ""), ("online-imb", 5000.0, "subset=1000")):
        for corruption in CORRUPTIONS:
            base = dict(shift=shift, shift_param=param, corruption=corruption, params=params)
            rows.append({**base, "method": "noadapt", "refiner": "none", "seed": 0, "accuracy": 50.0})
            for seed, name in enumerate(PAPER_VARIANTS):
                level = 70.0 if seed == 0 else 60.0
                rows.append({**base, "method": "bnadapt", "refiner": "none", "seed": seed, "accuracy": level})
                rows.append({**base, "method": "bnadapt", "refiner": name, "seed": seed, "accuracy": level + 5})
            rows.append({**base, "method": "bnadapt", "refiner": "dart", "seed": 0, "accuracy": 72.0})
    return _rows(rows)


def test_the_report_pairs_each_gain_on_its_streams_and_says_what_is_not_run():
    table = bnadapt_block(settings=_settings(), rows=_fixture(), outcomes={})
    assert table.loc["gain, paper g_phi, seed 0", "rho=100"].startswith("5.00 ± ≤")
    assert table.loc["gain, paper g_phi, seeds 0-2", "IR=5000"].startswith("5.00 ± ≤")  # each seed on its own streams
    assert table.loc["+DART, paper g_phi, seeds 0-2", "rho=100"].startswith("68.33 ± ")  # (75 + 65 + 65) / 3
    own = f"gain, cpu g_phi ({_settings().dart.epochs} ep, alpha {_settings().dart.alpha:g})"  # the profile's own
    assert table.loc[own, "rho=100"].startswith("2.00 ± ≤")
    assert table.loc["BNAdapt", "rho=1"] == "not run (0 of 2)"
    assert table.loc["paper: gain", "IR=5000"] == "+62.1" and table.loc["paper: gain", "rho=100"] == "+18.1"
    gains = every_method_block(settings=_settings(), rows=_fixture(), outcomes={}, methods=["noadapt", "bnadapt", "tent"])
    assert gains.loc[("bnadapt", "rho=100"), "gain, paper g_phi"].startswith("5.00")
    assert gains.loc[("tent", "rho=100"), "gain, paper g_phi"] == "not run (0 of 2)"


def test_a_ledger_gain_is_taken_on_the_seeds_both_sides_hold():
    frame = _fixture()
    frame = frame[frame["shift"] == "lt"]
    check = {"quantity": "gain", "method": "bnadapt", "refiner": "alpha0.1-epochs50", "shift_param": 100.0}
    # the baseline holds seeds 0, 1 and 2 (70, 60, 60), the refiner seed 0 only: the gain is seed 0's, +5
    assert claim_readings.quantity(frame, check).value == pytest.approx(5.0)
    above = {"quantity": "accuracy", "method": "bnadapt", "refiner": "alpha0.1-epochs50", "shift_param": 100.0}
    bound, gap = claims._bound(claims._CONDITION.match("> accuracy(bnadapt+none)"), check=above, paper=0.0, frame=frame)
    assert bound.value == pytest.approx(70.0) and gap.value == pytest.approx(5.0)


def test_note_at_the_papers_iabn_epochs_is_a_line_read_against_the_papers_note():
    from dartlib.studies.paper_config import PAPER, PAPER_NOTE, accuracy_block

    lt = dict(shift="lt", shift_param=100.0, params="")
    rows = _rows([{**lt, "corruption": c, "method": PAPER_NOTE, "refiner": r, "seed": 0, "accuracy": a}
                  for c in CORRUPTIONS for r, a in (("none", 60.0), (PAPER, 64.0))])
    table = accuracy_block(settings=_settings(), rows=rows, outcomes={}, methods=[PAPER_NOTE])
    line = table.loc[(PAPER_NOTE, "rho=100")]
    assert line["without DART"].startswith("60.00") and line["+DART, paper g_phi"].startswith("64.00")
    assert line["+DART, cpu g_phi"] == "not run (0 of 2)"
    assert (line["paper"], line["paper +DART"]) == ("79.8", "82.2")  # Table 1's NOTE row


def test_the_imb_table_puts_tent_beside_bnadapt_at_both_configurations_with_the_appendix_numbers():
    from dartlib.studies.paper_config import PAPER, imb_block

    imb = dict(shift="online-imb", shift_param=5000.0, params="subset=1000", seed=0)
    rows = _rows([{**imb, "corruption": c, "method": m, "refiner": r, "accuracy": a}
                  for c in CORRUPTIONS for m, r, a in (("noadapt", "none", 50.0), ("tent", "none", 20.0),
                                                       ("tent", PAPER, 45.0), ("tent", "dart", 30.0))])
    table = imb_block(settings=_settings(), rows=rows, outcomes={})
    assert list(table.index) == [(m, f"IR={r}") for m in ("noadapt", "bnadapt", "tent") for r in (1, 5000)]
    tent = table.loc[("tent", "IR=5000")]
    assert tent["without DART"].startswith("20.00") and tent["+DART, paper g_phi"].startswith("45.00")
    assert tent["gain, paper g_phi"].startswith("25.00") and tent["gain, cpu g_phi"].startswith("10.00")
    assert (tent["paper"], tent["paper +DART"], tent["gain, paper"]) == ("19.1", "71.5", "+52.4")  # the appendix's TENT
    assert table.loc[("noadapt", "IR=5000"), "gain, paper g_phi"] == ""  # NoAdapt has no DART row
    assert table.loc[("bnadapt", "IR=1"), "without DART"] == "not run (0 of 2)"
