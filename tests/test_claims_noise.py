"""The claims ledger with its noise: standard errors from each cell's n (and the seed spread), the
margin in standard errors of every verdict, readings no contradicting result can pass, the
committed cpu ledger and the generated page docs/claims.md."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dartlib.experiments.grid import SCHEMA
from dartlib.experiments.settings import Settings
from dartlib.analysis import noise
from dartlib.book import claim_readings, claims, claims_page, verdict_rules
from dartlib.paths import REPO_ROOT

PAPER_TEX = Path(__file__).resolve().parents[2] / "shared" / "paper" / "dart_paper.tex"


def _rows(rows: list[dict], **common) -> pd.DataFrame:
    base = {**{k: "" for k in SCHEMA}, "dataset": "cifar10c", "shift": "lt", "corruption": "fog", "severity": 5,
            "seed": 0, "n": 100, **common}
    return pd.DataFrame([{**base, **r} for r in rows])[SCHEMA]


def test_without_outcomes_a_mean_carries_the_upper_bound_and_seeds_add_their_spread():
    rows = _rows([{"corruption": "fog", "accuracy": 80.0}, {"corruption": "snow", "accuracy": 60.0}],
                 method="bnadapt", refiner="none", shift_param=1)
    mean = noise.mean_estimate(rows=rows)
    # fog: sqrt(80*20/100) = 4; snow: sqrt(60*40/100) = sqrt(24); the bound is their mean (perfect correlation)
    assert mean.value == pytest.approx(70.0) and mean.se == pytest.approx((4 + math.sqrt(24)) / 2)
    assert mean.kind == "bound"
    seeds = _rows([{"seed": 0, "accuracy": 80.0}, {"seed": 1, "accuracy": 70.0}], method="bnadapt", refiner="none",
                  shift_param=1)
    cell = noise.mean_estimate(rows=seeds)
    # the bound of the mean of the two seeds' cells (4 + sqrt(21)) / 2, plus the seed spread var(ddof 1) / k = 50 / 2
    assert cell.value == pytest.approx(75.0) and cell.se == pytest.approx(math.sqrt(((4 + math.sqrt(21)) / 2) ** 2 + 25))


def test_two_rows_for_one_cell_and_seed_are_an_error():
    rows = _rows([{"accuracy": 61.83}, {"accuracy": 99.5}], method="noadapt", refiner="none", shift_param=1)
    with pytest.raises(ValueError, match="two results rows for one cell and seed"):
        noise.mean_estimate(rows=rows)


@pytest.mark.parametrize("op", [">", "<", "within 1.0"])
def test_a_result_on_the_wrong_side_of_the_bound_never_holds(op):
    for se in (0.0, 0.01, 0.3, 5.0):
        for value in (-3.0, -1.01, -0.2, 0.2, 1.01, 3.0):
            wrong = value < 0 if op == ">" else value > 0 if op == "<" else abs(value) > 1.0
            margin, verdict = verdict_rules.judge(ours=claims.Estimate(value, se), bound=claims.Estimate(0.0, 0.0), op=op)
            if wrong:
                assert verdict != "HOLDS" and margin <= 0, (op, value, se)


def test_an_effect_under_two_standard_errors_is_within_noise_either_way(tmp_path):
    # TENT loses 0.5 points from rho 1 to 100 on 15 corruptions of 10,000 images: SE of the drop ~0.23
    def drop_rows(loss: float, n: int) -> pd.DataFrame:
        return _rows([{"method": "tent", "refiner": "none", "shift_param": rho, "corruption": c, "n": n,
                       "accuracy": 70.0 - (loss if rho == 100 else 0.0)}
                      for rho in (1, 10, 100) for c in ("fog", "snow", "frost", "glass_blur", "zoom_blur")])

    for loss, n, verdict in ((0.5, 10_000, "WITHIN NOISE"), (-0.5, 10_000, "WITHIN NOISE"), (0.5, 10**6, "HOLDS"),
                             (-0.5, 10**6, "FAILS")):
        drop_rows(loss, n).to_csv(tmp_path / "table1.csv", index=False)
        table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)
        row = table[(table.claim == "tent-sar-degrade-under-label-shift") & (table.check == "drop tent 1->100")].iloc[0]
        assert row.status == verdict, (loss, n, row.margin)
        assert row.margin == pytest.approx(loss / row.se)


def test_no_loss_readings_hold_only_beyond_two_standard_errors_of_their_margin():
    """A no-loss sentence is read with a stated margin in its bound (">= -0.5") and judged three ways:
    a loss smaller than 2 SE no longer passes as HOLDS."""
    judge = verdict_rules.judge
    zero = claims.Estimate(0.0, 0.0)
    assert judge(ours=claims.Estimate(-0.3, 0.2), bound=zero, op=">=")[1] == "WITHIN NOISE"  # once HOLDS
    assert judge(ours=claims.Estimate(-0.5, 0.2), bound=zero, op=">=")[1] == "FAILS"
    assert judge(ours=claims.Estimate(0.5, 0.2), bound=zero, op="<=")[1] == "FAILS"
    margin = claims.Estimate(-0.5, 0.0)
    assert judge(ours=claims.Estimate(-0.05, 0.2), bound=margin, op=">=")[1] == "HOLDS"
    assert judge(ours=claims.Estimate(-0.3, 0.2), bound=margin, op=">=")[1] == "WITHIN NOISE"
    assert judge(ours=claims.Estimate(-1.0, 0.2), bound=margin, op=">=")[1] == "FAILS"


def test_a_stated_size_is_judged_apart_from_its_direction():
    """A stated effect gets a direction verdict (the condition) and a size verdict: within the claim's
    margin of the paper's number, else LARGER or SMALLER in the asserted direction, with the ratio; a
    larger effect in the stated direction is no failure of the direction."""
    E = claims.Estimate
    # W beats b: ours +5.09 +- 0.23 where the paper states 0.4 (margin 1 point)
    assert verdict_rules.judge(ours=E(5.09, 0.23), bound=E(0.0, 0.0), op=">")[1] == "HOLDS"
    size, ratio = verdict_rules.judge_size(ours=E(5.09, 0.23), paper=0.4, margin=1.0)
    assert size == "LARGER" and ratio == pytest.approx(12.725)
    # ROID's drop 38.7 +- 0.4 where the paper states 67.4 (margin a quarter, 16.85): smaller, not as stated
    assert verdict_rules.judge_size(ours=E(38.7, 0.4), paper=67.4, margin=16.85)[0] == "SMALLER"
    assert verdict_rules.judge_size(ours=E(5.9, 0.3), paper=5.7, margin=1.425)[0] == "AS STATED"
    # within the margin but not beyond 2 SE of its edge: undecided, either way
    assert verdict_rules.judge_size(ours=E(6.5, 0.5), paper=5.7, margin=1.425)[0] == "UNDECIDED"
    assert verdict_rules.judge_size(ours=E(7.5, 0.5), paper=5.7, margin=1.425)[0] == "UNDECIDED"
    # "comparably" read one-sided (>= -1.2): a gain of +2.57 where the paper has -0.6 is larger, not a failure
    assert verdict_rules.judge(ours=E(2.57, 0.18), bound=E(-1.2, 0.0), op=">=")[1] == "HOLDS"
    assert verdict_rules.judge_size(ours=E(2.57, 0.18), paper=-0.6, margin=1.2, sense=1.0)[0] == "LARGER"
    # "<" asserts a negative effect: more negative than stated is larger
    assert verdict_rules.judge_size(ours=E(-9.0, 0.2), paper=-4.0, margin=1.0, sense=-1.0)[0] == "LARGER"
    assert verdict_rules.judge_size(ours=claims.NAN, paper=4.0, margin=1.0)[0] == "NOT RUN"


def test_a_seeded_estimate_is_decided_at_its_t_quantile():
    """An SE with a seed term of 2 degrees of freedom decides at 4.53 SE, not 2: 3 SE is within noise."""
    E = claims.Estimate
    zero = E(0.0, 0.0)
    assert verdict_rules.judge(ours=E(3.0, 1.0), bound=zero, op=">")[1] == "HOLDS"
    assert verdict_rules.judge(ours=E(3.0, 1.0, "images", 3, 2.0), bound=zero, op=">")[1] == "WITHIN NOISE"
    assert verdict_rules.judge(ours=E(-3.0, 1.0, "images", 3, 2.0), bound=zero, op=">")[1] == "WITHIN NOISE"
    assert verdict_rules.judge(ours=E(4.6, 1.0, "images", 3, 2.0), bound=zero, op=">")[1] == "HOLDS"
    # a paired gap's own degrees of freedom decide where the bound is other rows
    gap = E(3.0, 1.0, "images", 3, 2.0)
    assert verdict_rules.judge(ours=E(71.0, 0.6), bound=E(68.0, 0.6), op=">", gap=gap)[1] == "WITHIN NOISE"


def test_a_refiner_trained_under_another_seed_is_that_refiner_s_seed():
    frame = _rows([{"refiner": "alpha0.1-epochs50", "seed": 0, "accuracy": 70.0},
                   {"refiner": "alpha0.1-epochs50-seed1", "seed": 1, "accuracy": 71.0},
                   {"refiner": "alpha0.1-epochs50-seed2", "seed": 0, "accuracy": 72.0}],
                  method="bnadapt", shift_param=1)
    named = claim_readings.seed_refiners(frame)
    # seed 1's refiner on seed 1's streams is a seed of alpha0.1-epochs50; seed 2's on seed 0's streams is a variant
    assert named.refiner.tolist() == ["alpha0.1-epochs50", "alpha0.1-epochs50", "alpha0.1-epochs50-seed2"]


def test_a_gain_over_seeds_is_the_mean_of_the_per_seed_gains_and_one_seed_says_so():
    """Three g_phi seeds (named by refiner, each on its seed's streams): ours is the mean of the
    per-seed gains with the spread of those gains; the same check on one seed says its SE has no seed term."""
    rows = []
    for seed, (base, gain) in enumerate(((70.0, -1.20), (71.0, -1.37), (69.0, -0.80))):
        name = "alpha0.1-epochs50" + (f"-seed{seed}" if seed else "")
        for c in ("fog", "snow"):
            rows += [{"method": "bnadapt", "refiner": "none", "seed": seed, "corruption": c, "accuracy": base},
                     {"method": "bnadapt", "refiner": name, "seed": seed, "corruption": c, "accuracy": base + gain}]
    frame = claim_readings.seed_refiners(_rows(rows, shift_param=1, n=10000))
    check = {"quantity": "gain", "method": "bnadapt", "refiner": "alpha0.1-epochs50", "shift_param": 1}
    est = claim_readings.quantity(frame, check)
    assert est.value == pytest.approx((-1.20 - 1.37 - 0.80) / 3) and est.seeds == 3
    # no outcomes: the bound (each row's binomial SE over 2 cells x 3 seeds) plus the per-seed gains' spread,
    # not the sides' own spreads (70, 71, 69: a variance of 1 / 3 each)
    acc = frame.accuracy.to_numpy(float)
    bound = float(np.sum(np.sqrt(acc * (100 - acc) / 10000)) / 6)
    seed_var = np.var([-1.20, -1.37, -0.80], ddof=1) / 3
    assert est.se == pytest.approx(math.sqrt(bound**2 + seed_var)) and est.critical > 2.0
    one = claim_readings.quantity(frame[frame.seed == 0], check)
    assert one.seeds == 1 and one.critical == 2.0
    r = verdict_rules.CheckResult("c", "gain", -1.0, one.value, one.se, -0.5, 0.0, "FAILS", ">= -0.5", "bound", "", 1)
    assert "1 seed: no seed term" in claims_page._seeds(r)


def test_the_paper_s_own_numbers_are_judged_by_each_reading(tmp_path):
    """Where the paper's own table fails a reading, the ledger says so: DELTA's drop at rho 100 (15.5)
    exceeds LAME's (14.6) in Table 1, so "degrade less than other baselines" fails there on the paper."""
    table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)  # no rows of ours
    own = table.set_index(["claim", "check", "condition"])["paper_reading"]
    assert own["label-shift-aware-methods-degrade-less", "drop delta 1->100", "< drop(lame)"] == "FAILS"
    assert own["label-shift-aware-methods-degrade-less", "drop note 1->100", "< drop(lame)"] == "HOLDS"
    assert (table.status == "NOT RUN").all()


def test_a_bound_of_other_rows_is_judged_on_the_paired_difference():
    """ours - bound on the same images: the two SEs are not combined as if independent."""
    judge = verdict_rules.judge
    ours, bound = claims.Estimate(71.0, 0.6, "images"), claims.Estimate(70.0, 0.6, "images")
    assert judge(ours=ours, bound=bound, op=">")[1] == "WITHIN NOISE"  # unpaired: 1.0 / 0.85 < 2
    assert judge(ours=ours, bound=bound, op=">", gap=claims.Estimate(1.0, 0.1, "images"))[1] == "HOLDS"


def test_a_comparison_over_different_corruptions_is_not_run(tmp_path):
    rows = [{"method": "bnadapt", "refiner": "none", "shift_param": 100, "corruption": "fog", "accuracy": 50.0},
            {"method": "noadapt", "refiner": "none", "shift_param": 100, "corruption": "snow", "accuracy": 70.0}]
    _rows(rows).to_csv(tmp_path / "table1.csv", index=False)
    table = claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=tmp_path)
    row = table[(table.claim == "bnadapt-degrades-under-label-shift") & (table.check == "accuracy bnadapt at 100")]
    assert row.status.item() == "NOT RUN"


def test_every_quote_is_the_papers_sentence_word_for_word():
    if not PAPER_TEX.is_file():
        pytest.skip("the paper's LaTeX source is not next to the repository")
    tex = " ".join(PAPER_TEX.read_text().split())
    for claim in claims.load_claims():
        assert " ".join(claim["quote"].split()) in tex, claim["id"]


def test_every_stated_size_is_judged_apart_with_a_margin_and_its_reason():
    """A sentence that states a size has checks of that size (``size: true``), their direction a
    one-sided condition (never "within ... of paper", which mixed direction and size), and its claim
    states the margin and why."""
    for claim in claims.load_claims():
        stated = re.findall(r"(\d+(?:\.\d+)?)\\%", claim["quote"])
        conditions = [str(c["reduced"]) for c in claim["checks"]]
        assert not any("paper of paper" in c for c in conditions), claim["id"]
        if stated and claim["id"] not in ("dart-split-above-noadapt-cifar100c", "ten-epochs-close-to-fifty"):
            assert any(c.get("size") for c in claim["checks"]), claim["id"]
        if any(c.get("size") for c in claim["checks"]):
            assert claim["size_margin"] and len(claim["size_reason"].split()) > 5, claim["id"]


@pytest.fixture(scope="module")
def cpu() -> pd.DataFrame:
    return claims.evaluate("cpu", corrupted_dataset="cifar10c", folder=claims_page.PAGE_RESULTS["cpu"])


def _claim(claim_id: str) -> dict:
    return next(c for c in claims.load_claims() if c["id"] == claim_id)


def test_a_fixture_ledger_reads_the_no_loss_sentence_with_its_margin_and_the_gains_with_their_size(tmp_path):
    """"5-18% gains ... without any performance degradation" on a fixture Table 1 of known values: a
    loss of 1.2 points at rho = 1 on a million images FAILS the no-loss reading (beyond the 0.5-point
    margin by 2 SE), one of 0.1 HOLDS; gains of 5.9 and 25.0 at rho 10 and 100 hold their direction,
    each with its size judged apart: as stated against the paper's 5.7, larger than its 18.1 by more than
    the claim's margin (a quarter of it)."""
    ledger = {}
    for cost in (1.2, 0.1):
        gains = {1: -cost, 10: 5.9, 100: 25.0}
        rows = [{"method": "bnadapt", "refiner": r, "shift_param": rho, "corruption": c, "n": 10**6,
                 "accuracy": 60.0 + (gains[rho] if r == "dart" else 0.0)}
                for rho in gains for c in ("fog", "snow") for r in ("none", "dart")]
        _rows(rows).assign(experiment="table1").to_csv(tmp_path / "table1.csv", index=False)
        table = claims.evaluate("cpu", corrupted_dataset="cifar10c", claims=[_claim("abstract-gains-without-degradation")],
                                folder=tmp_path)
        ledger[cost] = table[table.configuration == ""].set_index("check")
    assert ledger[1.2].loc["gain bnadapt+dart over none at 1", "status"] == "FAILS"
    assert ledger[0.1].loc["gain bnadapt+dart over none at 1", "status"] == "HOLDS"
    sized = ledger[1.2].loc[["gain bnadapt+dart over none at 10", "gain bnadapt+dart over none at 100"]]
    assert sized.status.tolist() == ["HOLDS", "HOLDS"] and sized["size"].tolist() == ["AS STATED", "LARGER"]


def _reading(claim_id: str, **check) -> tuple[str, float, float, float]:
    """The op and bound of the claim's check that matches ``check``, the paper's number there and the
    claim's size margin, as the ledger reads them from data/paper/claims.yaml and the paper's tables."""
    claim = _claim(claim_id)
    spec = next(c for c in claim["checks"] if all(c.get(k) == v for k, v in check.items()))
    condition = claims._CONDITION.match(str(spec["reduced"]))
    full = {**{k: claim.get(k) for k in ("table", "experiment", "dataset", "shift")}, **spec}
    paper = claims.quantity(claims._restrict(claims.load_table(full["table"]), full, dataset=full["dataset"], paper=True),
                            full).value
    return condition["op"], float(condition["number"]), paper, claims.size_margin(claim, paper=paper)


def test_a_larger_effect_in_the_stated_direction_is_no_failure_of_the_sentence():
    """"comparably ... maintaining" (DART-split at rho 10, the paper -0.6) is read one-sided: a gain
    above the paper's by more than the margin holds its direction and is LARGER, not a failure; a gain
    beyond 2 SE of 0 but under the paper's stated one holds its direction with its size SMALLER."""
    E = claims.Estimate
    op, bound, paper, margin = _reading("dart-split-on-cifar10c-lt", refiner="dart-split", shift_param=10)
    ours = E(paper + 3 * margin, 0.1)
    assert claims.judge(ours=ours, bound=E(bound, 0.0), op=op)[1] == "HOLDS"
    assert claims.judge_size(ours=ours, paper=paper, margin=margin, sense=1.0)[0] == "LARGER"
    op, bound, paper, margin = _reading("abstract-gains-without-degradation", refiner="dart", shift_param=100)
    small = E(paper - 3 * margin, 0.1)
    assert claims.judge(ours=small, bound=E(bound, 0.0), op=op)[1] == "HOLDS"
    assert claims.judge_size(ours=small, paper=paper, margin=margin, sense=1.0)[0] == "SMALLER"


def test_the_committed_cpu_ledger_has_a_check_per_setting_each_sentence_names(cpu):
    """The ledger's shape on the committed rows (what checks exist, not their verdicts): gains grow with
    rho judged step by step for every method, at the profile's refiner and the paper's g_phi;
    "robust to the hyperparameters" against the default at equal optimiser steps; "compared to other
    baseline methods" over every adapting baseline; 10 against 50 epochs read from notebook 15's pairs."""
    tens = cpu[cpu.claim == "ten-epochs-close-to-fifty"]
    assert (tens[tens.check.str.contains("over epochs50|over alpha0.1-epochs50")].status != "NOT RUN").all()
    assert set(tens[tens.check.str.contains(r"\[epochs=10\]")].status) == {"NOT RUN"}
    versus = {c.split("(")[1].split(")")[0] for c in cpu[cpu.claim == "label-shift-aware-methods-degrade-less"].condition}
    assert versus == {"tent", "sar", "bnadapt", "pl", "lame"}
    grow = cpu[(cpu.claim == "dart-gains-grow-with-rho") & cpu.condition.str.startswith("> gain(")]
    paper = grow[grow.check.str.contains("alpha0.1-epochs50")]
    assert len(grow) == 32 and len(paper) == 16 and paper.configuration.str.startswith(claims.PAPER_G_PHI).all()
    robust = cpu[cpu.claim == "dart-robust-to-intermediate-batch-and-width"]
    assert len(robust) == 22 and not robust.check.str.contains(r"int_batch=(?:32|128)").any()
    assert robust.condition.str.endswith("of gain(bnadapt+dart)[int_batch=64;hidden=1000]").all()
    run = cpu[cpu.status != "NOT RUN"]
    assert set(run.se_kind) <= {"images", "bound", "exact", "batches"} and (run.se_kind == "images").any()


def test_the_committed_claims_page_is_the_generated_one():
    page = claims_page.committed_page()
    assert claims_page.CLAIMS_PAGE.read_text() == page, "regenerate: python -c 'from dartlib.book.claims_page " \
                                                    "import write_claims_page; write_claims_page()'"


def test_the_configuration_judged_is_read_from_the_rows_own_record(tmp_path):
    """A results folder's "Configuration judged" names the refiner its rows used (a run's run.json and
    the alpha its DART rows carry), not the profile file's settings; without a record it says so."""
    import json

    rows = _rows([{"method": "bnadapt", "refiner": "dart", "params": "alpha=30", "accuracy": 70.0},
                  {"method": "bnadapt", "refiner": "none", "accuracy": 69.0}], shift_param=1)
    rows.to_csv(tmp_path / "table1.csv", index=False)
    (tmp_path / "run.json").write_text(json.dumps({"gphi": {"epochs": 19, "chosen_alpha": 30.0}}))
    recorded = claims_page.recorded_refiner(folder=tmp_path)
    assert recorded["dart_epochs"] == 19 and recorded["dart_alpha"] == 30.0
    profile = Settings.from_profile("cpu", dart_epochs=50, dart_alpha=0.1, ablation_epochs=2, ablation_alpha=30.0,
                                    table1_corruptions=["fog"], note_finetune_epochs=1)
    judged = profile.replace(dart_epochs=recorded["dart_epochs"], dart_alpha=recorded["dart_alpha"])
    label = claims_page.judged_configuration(settings=judged, recorded=recorded["recorded"], experiments=["table1"])
    assert "g_phi 19 epochs at alpha 30 (recorded: run.json)" in label and "Table 1: g_phi 50" not in label
    assert "no record" in claims_page.judged_configuration(settings=profile, recorded="", experiments=["table1"])
    # rows of two alphas do not say which refiner is the main one: no record
    pd.concat([rows, rows.assign(params="alpha=0.1", corruption="snow")]).to_csv(tmp_path / "table1.csv", index=False)
    assert claims_page.recorded_refiner(folder=tmp_path) == {}


def test_without_a_run_record_the_refiner_is_the_variant_whose_rows_share_the_input_digests(tmp_path):
    """Table 1's DART rows name no refiner; the notebook-15 variant whose rows have their input digests
    (which cover the refiner's weights) does, and its committed file's config is what they judge."""
    paper = pd.read_csv(REPO_ROOT / "results" / "cpu" / "diagnosis_refiners.csv").set_index("variant")
    streams = [dict(corruption=c, shift_param=r) for c in ("fog", "snow") for r in (1, 100)]
    table = _rows([{**s, "method": "bnadapt", "refiner": "dart", "inputs": f"p{i}", "accuracy": 70.0}
                   for i, s in enumerate(streams)])
    diagnosis = _rows([{**s, "method": "bnadapt", "refiner": v, "inputs": f"{v[0]}{i}", "accuracy": 70.0}
                       for v in ("table1", "paper") for i, s in enumerate(streams)]).replace({"refiner": {"paper": "alpha0.1-epochs50"}})
    table.to_csv(tmp_path / "table1.csv", index=False)
    diagnosis.to_csv(tmp_path / "diagnosis.csv", index=False)
    paper.reset_index().to_csv(tmp_path / "diagnosis_refiners.csv", index=False)
    recorded = claims_page.recorded_refiner(folder=tmp_path)
    assert (recorded["dart_epochs"], recorded["dart_alpha"]) == (50, 0.1) and "alpha0.1-epochs50" in recorded["recorded"]
    table.assign(inputs=["p0", "p1", "p2", "t3"]).to_csv(tmp_path / "table1.csv", index=False)  # one row of another refiner
    assert claims_page.recorded_refiner(folder=tmp_path) == {}
