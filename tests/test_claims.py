"""The claims ledger: every claim reads, and checks give HOLDS / FAILS / NOT RUN as they should."""

from __future__ import annotations

import pandas as pd
import pytest

from dartlib.book import claim_readings, claims


def test_every_claim_is_well_formed_and_its_paper_values_compute():
    ledger = claims.load_claims()
    assert len(ledger) >= 7 and len({c["id"] for c in ledger}) == len(ledger)
    table = claims.evaluate("paper", claims=ledger, folder=None)
    # every check's quantity exists in its paper table, but for the one the paper prints no number for
    # (and Figure 4's, which prints points, not numbers)
    assert set(table[table["paper"].isna()].claim) == {"prediction-deviation-tells-ir1-from-ir5000",
                                                        "pbar-distance-rises-then-falls-with-ir",
                                                        "pbar-alone-cannot-tell-ir1-from-ir5000-on-figure-4"}
    gains = table[table.claim == "abstract-gains-without-degradation"].paper.round(1).tolist()
    # the numbers the text states (rho 10, 100, then 1), for the profile's g_phi and at the paper's
    assert gains == [5.7, 18.1, 0.0] * 2


def test_cli_prints_the_report(capsys):
    from dartlib.cli import main

    assert main(["claims", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "abstract-gains-without-degradation" in out and "NOT RUN" in out


def test_a_cost_check_is_a_ratio_of_the_cost_table_judged_exactly(tmp_path):
    # results/<profile>/costs.csv as notebook 10 writes it (the columns the checks read)
    (tmp_path / "costs.csv").write_text(
        "method,refiner,params_m,gmac_executed_per_image,wall_clock_s\n"
        "bnadapt,none,1.0,0.05,10.0\nbnadapt,dart,1.1,0.0502,12.5\ntent,none,1.0,0.1,20.0\ntent,dart,2.0,0.15,30.0\n")
    ledger = [c for c in claims.load_claims() if c["checks"][0]["quantity"] == "cost"]
    table = claims.evaluate("cpu", claims=ledger, folder=tmp_path).set_index("check")
    flops = table.loc["cost gmac_executed_per_image bnadapt+dart over bnadapt+none"]
    assert abs(flops.ours - 1.004) < 1e-9 and flops.status == "HOLDS" and flops.se_kind == "exact"
    # a single timing is not judged (it moves from run to run): no wall-clock check
    assert not table.index.str.contains("wall_clock").any()
    tent = table.loc["cost gmac_executed_per_image tent+dart over tent+none"]
    assert abs(tent.ours - 1.5) < 1e-9 and tent.paper == 2.0 and tent.status == "HOLDS"
    assert set(claims.evaluate("cpu", claims=ledger, folder=tmp_path / "absent").status) == {"NOT RUN"}


def test_figure_4_is_judged_on_its_own_per_batch_statistic(tmp_path):
    # results/<profile>/prediction_deviation.csv as notebook 05 writes it: one row per test batch
    rows = ["accuracy,ce_u_pbar,d,n,ir"]
    for ir, (acc, ce, d) in {1: (70, 2.31, 7.3), 20: (40, 2.36, 6.2), 50: (30, 2.355, 5.7), 5000: (17, 2.31, 5.4)}.items():
        rows += [f"{acc + k % 3},{ce + 0.001 * (k % 5)},{d + 0.01 * (k % 4)},200,{ir}" for k in range(20)]
    (tmp_path / "prediction_deviation.csv").write_text("\n".join(rows) + "\n")
    ledger = [c for c in claims.load_claims() if c["checks"][0]["quantity"].startswith("batch_")]
    table = claims.evaluate("cpu", claims=ledger, folder=tmp_path).set_index("check")
    assert table.loc["batch ce_u_pbar mean 1->20"].ours == pytest.approx(0.05) and table.loc["batch ce_u_pbar mean 1->20"].status == "HOLDS"
    assert table.loc["batch ce_u_pbar mean 20->5000"].status == "HOLDS"
    # D(u, p_bar) the same at IR 1 and 5000 (up to the batches' spread): a batch cannot tell them apart
    same = table.loc["batch ce_u_pbar separability 1 vs 5000"]
    assert 0.5 <= same.ours < 0.75 and same.status in ("HOLDS", "WITHIN NOISE")
    assert table.loc["batch d separability 1 vs 5000"].ours == 1.0
    auc = claim_readings.batch_statistic(pd.read_csv(tmp_path / "prediction_deviation.csv"), quantity="batch_separability",
                                 column="d", start=1, end=20)
    assert auc.value == 1.0 and auc.se == 0.0


def test_notes_paper_configuration_check_reads_the_paper_iabn_rows_where_they_are(tmp_path):
    from dartlib.experiments.grid import SCHEMA, row_key

    def write(name: str, gain: float) -> None:
        base = {**{k: "" for k in SCHEMA}, "dataset": "cifar10c", "shift": "lt", "shift_param": 10.0, "severity": 5,
                "method": "note", "seed": 0, "n": 10000}
        rows = [{**base, "corruption": c, "refiner": r, "accuracy": a, "key": f"{name}-{c}-{r}"}
                for c in ("fog", "snow") for r, a in (("none", 70.0), ("alpha0.1-epochs50", 70.0 + gain))]
        rows = [{**r, "key": row_key({**r, "key": ""})} for r in rows]  # a row's key is its fields' hash
        pd.DataFrame(rows)[SCHEMA].to_csv(tmp_path / f"{name}.csv", index=False)

    ledger = [{**c, "checks": [k for k in c["checks"] if k.get("method") == "note" and "paper_note" in k.get("experiment", [])
                                 and k["shift_param"] == 10]}
              for c in claims.load_claims() if c["id"] == "dart-improves-every-method"]
    write("paper_config", -1.0)  # NOTE's IABN at the profile's epochs
    table = claims.evaluate("cpu", claims=ledger, folder=tmp_path)
    at10 = table.iloc[0]
    assert at10.ours == pytest.approx(-1.0) and at10.configuration == claims.PAPER_G_PHI
    write("paper_note", 3.0)  # its IABN at the paper's 30 epochs: read first
    at10 = claims.evaluate("cpu", claims=ledger, folder=tmp_path).set_index("check").loc[at10.check]
    assert at10.ours == pytest.approx(3.0) and at10.status == "HOLDS" and "IABN 30 epochs" in at10.configuration
