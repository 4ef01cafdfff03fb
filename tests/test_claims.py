"""The claims ledger: every claim reads, and checks give HOLDS / FAILS / NOT RUN as they should."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dartlib.reporting import claims
from dartlib.experiments.grid import SCHEMA


def test_every_claim_is_well_formed_and_its_paper_values_compute():
    ledger = claims.load_claims()
    assert len(ledger) >= 7 and len({c["id"] for c in ledger}) == len(ledger)
    table = claims.evaluate("paper", claims=ledger, folder=None)
    assert not table["paper"].isna().any()  # every check's quantity exists in its paper table
    gains = table[table.claim == "abstract-gains-without-degradation"].paper.round(1).tolist()
    assert gains == [0.0, 5.7, 18.1]  # the numbers the text states


def _results(rows):
    frame = pd.DataFrame([{**{k: "" for k in SCHEMA}, "dataset": "fmnistc", "shift": "lt", "corruption": "fog",
                           "severity": 5, "seed": 0, "n": 100, **r} for r in rows])
    return frame[SCHEMA]


def test_reduced_profile_statuses(tmp_path):
    rows = [{"method": "bnadapt", "refiner": ref, "shift_param": rho, "accuracy": acc}
            for ref, rho, acc in (("none", 1, 80.0), ("dart", 1, 79.8), ("none", 10, 75.0), ("dart", 10, 77.0),
                                  ("none", 100, 60.0), ("dart", 100, 75.0))]
    _results(rows).to_csv(tmp_path / "table1.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="fmnistc", folder=tmp_path)
    got = table[table.claim == "abstract-gains-without-degradation"]
    assert got.status.tolist() == ["HOLDS", "FAILS", "HOLDS"]  # -0.2 >= -0.5; +2 < 3; +15 >= 10
    assert got.ours.tolist() == pytest.approx([-0.2, 2.0, 15.0])
    drop = table[table.claim == "bnadapt-degrades-under-label-shift"].iloc[0]
    assert drop.status == "HOLDS" and drop.ours == pytest.approx(20.0)
    absent = table[table.claim == "dart-split-large-scale"].iloc[0]
    assert absent.status == "NOT RUN" and math.isnan(absent.ours)


def test_comparison_with_another_method_and_the_paper_tolerance(tmp_path):
    rows = [{"method": m, "refiner": "none", "shift_param": rho, "accuracy": acc}
            for m, rho, acc in (("tent", 1, 80.0), ("tent", 100, 60.0), ("delta", 1, 80.0), ("delta", 100, 70.0))]
    _results(rows).to_csv(tmp_path / "table1.csv", index=False)
    table = claims.evaluate("smoke", corrupted_dataset="fmnistc", folder=tmp_path)
    got = table[table.claim == "tent-sar-degrade-more-than-label-shift-aware"].status.tolist()
    assert got == ["HOLDS", "HOLDS", "NOT RUN"]  # delta loses 10 < tent's 20; ods absent
    paper = claims.evaluate("paper", corrupted_dataset="fmnistc", folder=tmp_path)
    assert paper[paper.claim == "tent-sar-degrade-more-than-label-shift-aware"].status.tolist()[0] == "FAILS"


def test_cli_prints_the_report(capsys):
    from dartlib.cli import main

    assert main(["claims", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "abstract-gains-without-degradation" in out and "NOT RUN" in out


def test_comparison_with_another_refiner(tmp_path):
    rows = [{"method": "bnadapt", "refiner": r, "shift_param": 1, "accuracy": acc, "dataset": "cifar10c"}
            for r, acc in (("dart", 85.0), ("dart-pbar-only", 82.0))]
    _results(rows).to_csv(tmp_path / "ablations.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)
    row = table[table.claim == "d-input-keeps-rho-1-intact"].iloc[0]
    assert row.status == "HOLDS" and row.ours == 82.0 and row.paper == 81.8
    _results([{**rows[0]}, {**rows[1], "accuracy": 86.0}]).to_csv(tmp_path / "ablations.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)
    assert table[table.claim == "d-input-keeps-rho-1-intact"].status.tolist() == ["FAILS"]


def test_a_gain_or_drop_over_different_corruptions_is_not_run(tmp_path):
    # a grid still running: DART's row has one of BNAdapt's two corruptions at rho = 100
    rows = [{"method": "bnadapt", "refiner": ref, "shift_param": rho, "corruption": c, "accuracy": acc}
            for ref, rho, c, acc in (("none", 1, "fog", 80.0), ("none", 1, "snow", 70.0), ("dart", 1, "fog", 80.0),
                                     ("dart", 1, "snow", 70.0), ("none", 100, "fog", 60.0), ("none", 100, "snow", 40.0),
                                     ("dart", 100, "fog", 75.0))]
    _results(rows).to_csv(tmp_path / "table1.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="fmnistc", folder=tmp_path)
    gains = table[table.claim == "abstract-gains-without-degradation"]
    assert gains.status.tolist() == ["HOLDS", "NOT RUN", "NOT RUN"]  # rho 1 complete; 10 absent; 100 incomplete
    drop = table[table.claim == "bnadapt-degrades-under-label-shift"].iloc[0]
    assert drop.status == "HOLDS" and drop.ours == pytest.approx(25.0)  # both rhos cover fog and snow


def test_a_comparison_with_a_quantity_not_computed_is_not_run(tmp_path):
    # ODS without TENT: "drop(ods) < drop(tent)" cannot be judged, so it is NOT RUN, not FAILS
    rows = [{"method": "ods", "refiner": "none", "shift_param": rho, "accuracy": acc} for rho, acc in ((1, 80.0), (100, 70.0))]
    _results(rows).to_csv(tmp_path / "table1.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="fmnistc", folder=tmp_path)
    got = table[table.claim == "tent-sar-degrade-more-than-label-shift-aware"]
    assert got.status.tolist() == ["NOT RUN", "NOT RUN", "NOT RUN"]
    assert got.ours.tolist()[2] == pytest.approx(10.0)


def test_online_imbalance_claims_read_the_online_grid_until_the_more_settings_one_exists(tmp_path):
    rows = [{"method": m, "refiner": r, "shift_param": ir, "accuracy": acc, "shift": "online-imb"}
            for m, r, ir, acc in (("noadapt", "none", 20, 60.0), ("bnadapt", "none", 20, 40.0),
                                  ("bnadapt", "dart", 20, 65.0), ("noadapt", "none", 5000, 60.0),
                                  ("bnadapt", "dart", 5000, 45.0))]
    _results(rows).to_csv(tmp_path / "online_imbalance.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="fmnistc", folder=tmp_path)
    got = dict(zip(table[table.claim == "online-imbalance-dart-above-noadapt"].check,
                   table[table.claim == "online-imbalance-dart-above-noadapt"].status))
    assert got["accuracy bnadapt at 20"] == "HOLDS" and got["accuracy bnadapt+dart at 20"] == "HOLDS"
    assert got["accuracy bnadapt+dart at 5000"] == "FAILS" and got["accuracy bnadapt at 5000"] == "NOT RUN"
    # once notebook 09's grid has rows, they are the ones read
    more = [{**r, "accuracy": 70.0} if r["refiner"] == "dart" else r for r in rows]
    _results(more).to_csv(tmp_path / "more_settings.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="fmnistc", folder=tmp_path)
    assert table[(table.claim == "online-imbalance-dart-above-noadapt")
                 & (table.check == "accuracy bnadapt+dart at 5000")].status.item() == "HOLDS"


def test_each_check_reads_the_first_results_file_that_has_its_rows(tmp_path):
    # notebook 09's grid has started (IR 1 only): IR 5000 still comes from notebook 11's grid
    online = [{"method": m, "refiner": r, "shift_param": ir, "accuracy": acc, "shift": "online-imb"}
              for m, r, ir, acc in (("noadapt", "none", 5000, 60.0), ("bnadapt", "dart", 5000, 45.0),
                                    ("noadapt", "none", 1, 60.0), ("bnadapt", "dart", 1, 70.0))]
    _results(online).to_csv(tmp_path / "online_imbalance.csv", index=False)
    started = [{**r, "accuracy": r["accuracy"] - 20.0} for r in online if r["shift_param"] == 1]
    _results(started).to_csv(tmp_path / "more_settings.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="fmnistc", folder=tmp_path)
    got = table[table.claim == "online-imbalance-dart-above-noadapt"].set_index("check")
    assert got.loc["accuracy bnadapt+dart at 1"].ours == pytest.approx(50.0)  # notebook 09's rows
    assert got.loc["accuracy bnadapt+dart at 5000"].ours == pytest.approx(45.0)  # notebook 11's rows
    assert got.loc["accuracy bnadapt+dart at 5000"].status == "FAILS"


def test_checks_at_settings_read_exact_values_and_baselines_without_the_setting(tmp_path):
    # the alpha table: plain TENT has no alpha; "alpha=0" must not read the alpha=0.01 rows
    rows = [{"method": "tent", "refiner": r, "shift_param": 1, "params": p, "accuracy": acc, "dataset": "cifar10c"}
            for r, p, acc in (("none", "", 80.0), ("dart", "alpha=0", 76.0), ("dart", "alpha=0.01", 90.0),
                              ("dart", "alpha=0.1", 79.0))]
    rows += [{**r, "shift_param": 100, "accuracy": r["accuracy"] - (20.0 if r["refiner"] == "none" else 5.0)}
             for r in rows]
    _results(rows).to_csv(tmp_path / "sensitivity_tent.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)
    row = table[table.claim == "alpha-regularisation-protects-balanced-batches"].iloc[0]
    assert row.check == "accuracy tent+dart at 1 [alpha=0]" and row.ours == 76.0 and row.paper == 84.4
    assert row.status == "HOLDS"  # 76 < 79 (alpha 0.1), whatever alpha 0.01 reads
    robust = table[table.claim == "dart-robust-to-alpha"].set_index("check")
    assert robust.loc["accuracy tent+dart at 100 [alpha=0.01]"].ours == 85.0
    assert robust.loc["accuracy tent+dart at 100 [alpha=0.01]"].status == "HOLDS"  # 85 > plain TENT's 60
    assert robust.loc["accuracy tent+dart at 100 [alpha=1]"].status == "NOT RUN"
    assert robust.loc["accuracy bnadapt+dart at 100 [alpha=1]"].status == "NOT RUN"


def test_checks_on_balanced_streams_compare_like_settings(tmp_path):
    # the test-batch table: no shift parameter; a gain compares rows of the same test batch only
    rows = [{"method": m, "refiner": r, "shift": "none", "shift_param": "", "params": f"test_batch={b}",
             "accuracy": acc, "dataset": "cifar10c"}
            for m, r, b, acc in (("bnadapt", "none", 4, 60.0), ("bnadapt", "dart", 4, 58.0), ("bnadapt", "none", 8, 66.0),
                                 ("bnadapt", "dart", 8, 69.0), ("bnadapt", "none", 200, 71.0), ("tent", "none", 4, 20.0),
                                 ("tent", "dart", 4, 45.0), ("tent", "none", 64, 99.0))]
    _results(rows).to_csv(tmp_path / "sensitivity_batch.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)
    got = table[table.claim == "dart-helps-small-test-batches"]
    assert got.check.tolist()[:2] == ["accuracy bnadapt [test_batch=8]", "gain bnadapt+dart [test_batch=4]"]
    assert got.ours.tolist() == pytest.approx([66.0, -2.0, 3.0, 25.0])
    assert got.status.tolist() == ["HOLDS", "FAILS", "HOLDS", "HOLDS"]  # 66 < 71 at batch 200
    assert got.paper.tolist() == pytest.approx([76.7, 2.8, 3.7, 31.6])
