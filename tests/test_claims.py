"""The claims ledger: every claim reads, and checks give HOLDS / FAILS / NOT RUN as they should."""

from __future__ import annotations

from dartlib.reporting import claims


def test_every_claim_is_well_formed_and_its_paper_values_compute():
    ledger = claims.load_claims()
    assert len(ledger) >= 7 and len({c["id"] for c in ledger}) == len(ledger)
    table = claims.evaluate("paper", claims=ledger, folder=None)
    # every check's quantity exists in its paper table, but for the one the paper prints no number for
    assert set(table[table["paper"].isna()].claim) == {"prediction-deviation-tells-ir1-from-ir5000"}
    gains = table[table.claim == "abstract-gains-without-degradation"].paper.round(1).tolist()
    # the numbers the text states (rho 10, 100, then 1), for the profile's g_phi and at the paper's
    assert gains == [5.7, 18.1, 0.0] * 2


def test_cli_prints_the_report(capsys):
    from dartlib.cli import main

    assert main(["claims", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "abstract-gains-without-degradation" in out and "NOT RUN" in out
