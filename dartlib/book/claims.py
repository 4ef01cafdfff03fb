"""The claims ledger (``data/paper/claims.yaml``): every quantitative sentence of the paper that our
results can speak to, each with one check per setting the sentence names, judged on a profile's
results with its noise as HOLDS, FAILS, WITHIN NOISE or NOT RUN.

Noise (:mod:`dartlib.analysis.noise`, the one model of the suite). A quantity (an accuracy, a gain,
a drop) is a linear combination of cell accuracies; its standard error is clustered by test image
from the rows' per-image outcomes (the 15 corruptions share their images; a gain's two sides are
paired image by image), with the seed spread (ddof 1) added where a cell has several seeds. Where
a row has no per-image outcomes, the SE is an upper bound (the sum of the cells' binomial SEs),
which errs towards WITHIN NOISE; ``se_kind`` says which (``images`` or ``bound``). A condition whose
bound is a quantity of other rows is judged on ours - bound computed from both sides' rows
together (paired), not on two SEs combined as if independent.

Verdicts (reduced profiles smoke, cpu, gpu; ``margin`` is the distance from the condition's bound
in standard errors, positive on the side the sentence asserts):

* ``> B`` / ``< B``: the sentence asserts an effect. HOLDS when the margin exceeds +2, FAILS below
  -2, WITHIN NOISE in between.
* ``>= B`` / ``<= B``: the sentence asserts the absence of a loss ("without degradation", "does not
  decline"), read with a stated margin E in the bound (``>= -0.5``: a loss under half a point); judged
  like ``>`` / ``<``, so a loss within noise of the margin is WITHIN NOISE, never HOLDS.
* ``within T of B``: the sentence asserts two numbers agree ("comparable", "stable"). The margin is
  ``(T - |x - B|) / SE``: HOLDS above +2, FAILS below -2, WITHIN NOISE in between.
* "2" is the decisive multiple of an SE without a seed term; where ours is a mean over g_phi seeds
  (a refiner ``<name>-seed<k>`` on seed k's streams is ``<name>``'s seed k), it is the t quantile of
  the same level at the SE's degrees of freedom (:func:`dartlib.analysis.noise.critical`), and a
  one-seed quantity is labelled as having no seed term.

A check of a stated size (``size: true``) gets a second verdict, judged apart from its direction
(:func:`dartlib.book.verdict_rules.judge_size`): AS STATED within the claim's ``size_margin`` of the paper's number, LARGER or
SMALLER beyond it in the asserted direction (with the ratio ours / paper), UNDECIDED between. Each
check's condition is also judged on the paper's own numbers (``paper_reading``), so a reading the
paper's table itself fails is marked.

``B`` is a number, ``paper`` (the paper's value of the same check), ``F*paper`` or a quantity of
other rows (``accuracy(noadapt+none)``, ``drop(tent)``, ``accuracy(bnadapt+dart)[alpha=0.1]``,
``gain(tent+dart)@10``: at shift_param 10); ``T`` is a number or ``F*paper`` (F times the size of
the paper's value). On the paper profile every check asks for the paper's number within
``tolerance`` points (default 1.5), judged the same way as ``within``. NOT RUN: the rows a check
needs are absent, or (a check with ``every_corruption: true``, one that reads a grid run over all of
CIFAR-10-C's corruptions) they do not yet cover all of them.

A ``cost`` check reads the test-time cost table (``costs.csv``, notebook 10; the paper's Appendix
table of parameters, FLOPs and wall clock): ``column`` of (method, refiner) over the same column of
``versus``, a ratio. Operation and parameter counts are exact (SE 0, ``se_kind`` ``exact``); a wall
clock is one measurement whose noise the table does not keep, so the ledger does not judge one.

A batch check reads Figure 4's statistic itself, per test batch (``prediction_deviation.csv``,
notebook 05): ``batch_mean_change``, the mean of ``column`` over the batches at ``shift_param``
minus its mean at ``from`` (SE: Welch's, batches as independent draws); ``batch_separability``,
how well ``column`` of a single batch tells a ``from`` batch from a ``shift_param`` batch, max(AUC,
1 - AUC) (0.5: not at all, 1: always; SE: Hanley and McNeil's).

The paper is cited by section and table in ``claims.yaml``; :mod:`dartlib.book.claims_page` renders
``docs/claims.md`` (and the book's claims page) from the ledger and the results. Here: the ledger
read and its checks evaluated; how a check's quantity is read off the rows is in
:mod:`dartlib.book.claim_readings`, the rules above that judge it in :mod:`dartlib.book.verdict_rules`.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pandas as pd
import yaml

from dartlib.analysis.noise import NAN, Estimate, Outcomes, combination
from dartlib.book.claim_readings import (_VERSUS, _corruptions, _cost_ratio, _restrict, _shared_seeds, batch_statistic,
                                         quantity, quantity_terms, seed_refiners)
from dartlib.book.verdict_rules import CheckResult, _verdict, decisive, judge, judge_size
from dartlib.dart.refiner import PAPER_CIFAR10
from dartlib.data.corruptions import CORRUPTIONS
from dartlib.experiments.grid import folder_outcomes, read_results
from dartlib.paths import results_dir
from dartlib.reporting.paper import PAPER_DIR, load_table
from dartlib.tta.note import PAPER_IABN_EPOCHS

CLAIMS_FILE = PAPER_DIR / "claims.yaml"
QUANTITIES = ("accuracy", "gain", "drop", "cost", "batch_mean_change", "batch_separability")
# the per-batch statistics a batch check reads (results/<profile>/prediction_deviation.csv, notebook 05:
# one row per test batch of CIFAR-10C-imb, its IR in ``ir``)
BATCH_COLUMNS = ("ce_u_pbar", "d", "accuracy")
# a cost check's column of the cost table (results/<profile>/costs.csv, notebook 10) and the paper's
# (data/paper/app_cost.csv) it stands for
COST_COLUMNS = {"gmac_executed_per_image": "flops_g", "wall_clock_s": "wall_clock_s", "params_m": "params_m"}
REDUCED_PROFILES = ("smoke", "cpu", "gpu")
_EXPANDED = ("method", "refiner", "shift_param", "params", "versus", "dataset")
_REF = (r"(?P<r0>accuracy|gain|drop)\((?P<r1>\w[\w-]*?)(?:\+(?P<r2>\w[\w.-]*))?\)(?:\[(?P<r3>[^\]]*)\])?"
        r"(?:@(?P<r4>-?\d+(?:\.\d+)?))?")  # quantity(method+refiner)[params]@shift_param
_BOUND = rf"(?:(?P<factor>-?\d+(?:\.\d+)?)\*paper|(?P<number>-?\d+(?:\.\d+)?)|{_REF})"
_CONDITION = re.compile(rf"^\s*(?:(?P<op>>=|<=|>|<)|within\s+(?:(?P<tol>\d+(?:\.\d+)?)|(?P<tolf>\d+(?:\.\d+)?)\*paper)"
                        rf"\s+of)\s*(?:(?P<paper>paper)|{_BOUND})\s*$")


def _expand(check: dict) -> list[dict]:
    """A check whose fields hold lists stands for one check per combination (in order)."""
    keys = [k for k in _EXPANDED if isinstance(check.get(k), list)]
    return [{**check, **dict(zip(keys, values))} for values in itertools.product(*(check[k] for k in keys))]


def load_claims(*, path: Path = CLAIMS_FILE) -> list[dict]:
    """The ledger, each check expanded to one per setting; every condition and quantity checked."""
    claims = yaml.safe_load(path.read_text())
    for claim in claims:
        for field in ("id", "quote", "where", "reading", "table", "experiment", "dataset", "checks"):
            if field not in claim:
                raise ValueError(f"{claim.get('id', claim)}: no {field!r}")
        claim["checks"] = [c for check in claim["checks"] for c in _expand(check)]
        for check in claim["checks"]:
            if check["quantity"] not in QUANTITIES:
                raise ValueError(f"{claim['id']}: unknown quantity {check['quantity']!r}; valid: {', '.join(QUANTITIES)}")
            if not _CONDITION.match(str(check["reduced"])):
                raise ValueError(f"{claim['id']}: cannot read condition {check['reduced']!r}")
            if check["quantity"].startswith("batch_") and check.get("column") not in BATCH_COLUMNS:
                raise ValueError(f"{claim['id']}: a batch check names a column of {', '.join(BATCH_COLUMNS)}, not "
                                 f"{check.get('column')!r}")
            if check["quantity"] == "cost" and check.get("column") not in COST_COLUMNS:
                raise ValueError(f"{claim['id']}: a cost check names a column of {', '.join(COST_COLUMNS)}, not "
                                 f"{check.get('column')!r}")
            if check.get("versus") is not None and not _VERSUS.match(str(check["versus"])):
                raise ValueError(f"{claim['id']}: cannot read versus {check['versus']!r}")
            if check.get("size") and not (isinstance(claim.get("size_margin"), dict) and claim.get("size_reason")):
                raise ValueError(f"{claim['id']}: a check of a stated size (size: true) needs the claim's size_margin "
                                 f"({{points: P, fraction: F}}) and size_reason in {path}")
        if "size_margin" in claim and set(claim["size_margin"]) - {"points", "fraction"}:
            raise ValueError(f"{claim['id']}: size_margin takes points and fraction, not "
                             f"{sorted(set(claim['size_margin']) - {'points', 'fraction'})} ({path})")
    return claims


def size_margin(claim: dict, *, paper: float) -> float:
    """The claim's margin around the paper's stated number (points): max(points, fraction * |paper|)."""
    margin = claim.get("size_margin") or {}
    return max(float(margin.get("points", 0.0)), float(margin.get("fraction", 0.0)) * abs(paper))


def describe(*, check: dict) -> str:
    """A check in words: "gain bnadapt+dart over none at 10 [alpha=0.1]", "drop tent 1->100"."""
    rho, origin = check["shift_param"], check.get("from")
    fmt = (lambda v: "balanced" if v is None else f"{v:g}")
    refiner = f"+{check['refiner']}" if check["refiner"] != "none" else ""
    what = f"{check['quantity']} {check['method']}{refiner}"
    if check["quantity"] == "gain":
        what += f" over {check.get('versus') or 'none'}"
    where = f"{fmt(origin)}->{fmt(rho)}" if check["quantity"] == "drop" else ("" if rho is None else f"at {rho:g}")
    settings = f" [{check['params']}]" if check.get("params") else ""
    dataset = f" ({check['dataset']})" if check.get("dataset_override") else ""
    return " ".join(part for part in (what, where) if part) + settings + dataset


def _bound(match: re.Match, *, check: dict, paper: float, frame: pd.DataFrame | None,
           outcomes: Outcomes | None = None) -> tuple[Estimate, Estimate | None]:
    """The condition's bound, and (where the bound is a quantity of rows) ours - bound on both
    sides' rows together, paired image by image (None where the bound is a number)."""
    if match["paper"] is not None:
        return Estimate(paper, 0.0), None
    if match["factor"] is not None:
        return Estimate(float(match["factor"]) * paper, 0.0), None
    if match["number"] is not None:
        return Estimate(float(match["number"]), 0.0), None
    other_q, other_m, other_r, other_p, other_at = (match[f"r{i}"] for i in range(5))
    other = {**check, "quantity": other_q, **({"refiner": other_r} if other_r else {}),
             **({"params": other_p} if other_p is not None else {}),
             **({"shift_param": float(other_at)} if other_at is not None else {})}
    # a comparison of means over different corruptions says nothing about the effect: not run
    if frame is None or _corruptions(frame, other, method=other_m) != _corruptions(frame, check):
        return NAN, None
    mine, theirs = quantity_terms(frame, check), quantity_terms(frame, other, method=other_m)
    if not mine or not theirs:
        return NAN, None
    weights = [w for w, _ in [*mine, *theirs]]  # both sides on the streams they share
    kept = list(zip(weights, _shared_seeds(*(rows for _, rows in [*mine, *theirs]))))
    mine, theirs = kept[:len(mine)], kept[len(mine):]
    gap = combination(terms=[*mine, *((-w, rows) for w, rows in theirs)], outcomes=outcomes)
    return combination(terms=theirs, outcomes=outcomes), gap


def _condition_text(condition: str, *, bound: float) -> str:
    return condition if "paper" not in condition or math.isnan(bound) else f"{condition} = {bound:.2f}"


def evaluate(profile: str, *, corrupted_dataset: str | None = None, claims: list[dict] | None = None,
             folder: Path | None = None) -> pd.DataFrame:
    """Every check of every claim on ``results/<profile>/`` (or ``folder``); one row per check
    (:class:`dartlib.book.verdict_rules.CheckResult`'s fields). ``corrupted_dataset`` stands in for CIFAR-10-C (e.g.
    ``fmnistc`` on the smoke profile)."""
    claims = claims if claims is not None else load_claims()
    folder = folder or results_dir(profile)
    outcomes = folder_outcomes(folder)
    files: dict[str, pd.DataFrame] = {}
    tables: dict[str, pd.DataFrame] = {}
    rows = []
    for claim in claims:
        for check in claim["checks"]:
            if check["quantity"] == "cost":
                rows.append(_cost_check(claim, check, folder=folder, profile=profile).__dict__)
                continue
            if check["quantity"].startswith("batch_"):
                rows.append(_batch_check(claim, check, folder=folder).__dict__)
                continue
            spec = {**{k: claim.get(k) for k in ("table", "experiment", "dataset", "shift")}, **check}
            spec["dataset_override"] = "dataset" in check and check["dataset"] != claim["dataset"]
            if spec["table"] not in tables:
                tables[spec["table"]] = load_table(spec["table"])
            pspec = {**spec, **check.get("paper_reads", {})}  # the paper's rows where ours are named otherwise
            paper = quantity(_restrict(tables[spec["table"]], pspec, dataset=spec["dataset"], paper=True), pspec).value
            ours_dataset = corrupted_dataset if (corrupted_dataset and spec["dataset"] == "cifar10c") else spec["dataset"]
            frames = []
            for experiment in spec["experiment"]:
                if experiment not in files:
                    files[experiment] = seed_refiners(read_results(folder / f"{experiment}.csv"))
                frames.append((experiment, _restrict(files[experiment], spec, dataset=ours_dataset, paper=False)))
            # the first listed results file that has this check's rows (a grid still running may
            # hold some of a claim's checks and not others)
            source, frame, ours = next(((e, f, q) for e, f in frames
                                        if len(f) and not math.isnan((q := quantity(f, spec, outcomes=outcomes)).value)),
                                       ("", None, NAN))
            if check.get("every_corruption") and frame is not None and len(_corruptions(frame, spec)) < len(CORRUPTIONS):
                frame, ours = None, NAN  # a grid still running over the corruptions: a subsample is not its verdict
            condition = str(check["reduced"])
            if profile in REDUCED_PROFILES:
                match = _CONDITION.match(condition)
                bound, gap = _bound(match, check=spec, paper=paper, frame=frame, outcomes=outcomes)
                tol = match["tol"] or (f"{float(match['tolf']) * abs(paper):g}" if match["tolf"] else None)
                op = match["op"] or f"within {tol}"
            else:
                tolerance = float(check.get("tolerance", 1.5))
                bound, gap = Estimate(paper, 0.0), None
                op, condition = f"within {tolerance:g}", f"within {tolerance:g} of the paper"
            margin, status = judge(ours=ours, bound=bound, op=op, gap=gap)
            kind = (gap or ours).kind if status != "NOT RUN" else ""
            configuration = _configuration(spec, source=source)
            size, ratio, margin_points = "", math.nan, math.nan
            if check.get("size"):
                margin_points = size_margin(claim, paper=paper)
                op_sign = (_CONDITION.match(str(check["reduced"]))["op"] or "")[:1]
                size, ratio = judge_size(ours=ours, paper=paper, margin=margin_points,
                                         sense={">": 1.0, "<": -1.0}.get(op_sign))
            reading = (_paper_reading(_CONDITION.match(str(check["reduced"])), spec=spec, pspec=pspec, paper=paper,
                                      table=tables[spec["table"]]) if profile in REDUCED_PROFILES else "")
            rows.append(CheckResult(claim["id"], describe(check=spec), paper, ours.value, ours.se, bound.value,
                                    margin, status, _condition_text(condition, bound=bound.value), kind,
                                    configuration, (gap or ours).seeds if status != "NOT RUN" else 0,
                                    decisive(ours=ours, bound=bound, gap=gap), size, ratio, margin_points,
                                    reading).__dict__)
    return pd.DataFrame(rows)


def _paper_reading(match: re.Match, *, spec: dict, pspec: dict, paper: float, table: pd.DataFrame) -> str:
    """The check's condition judged on the paper's own numbers (SE 0): HOLDS, FAILS, WITHIN NOISE
    (exactly on the bound), or "" where the paper's table has no number for a side."""
    if math.isnan(paper):
        return ""
    if match["r0"] is not None:  # a quantity of other rows, read in the paper's table as the check's own is
        other_q, other_m, other_r, other_p, other_at = (match[f"r{i}"] for i in range(5))
        other = {**pspec, "quantity": other_q,
                 **({"refiner": pspec["refiner"] if other_r == spec["refiner"] else other_r} if other_r else {}),
                 **({"params": other_p} if other_p is not None else {}),
                 **({"shift_param": float(other_at)} if other_at is not None else {})}
        bound = quantity(_restrict(table, other, dataset=spec["dataset"], paper=True), other, method=other_m).value
    elif match["paper"] is not None:
        bound = paper
    else:
        bound = float(match["factor"]) * paper if match["factor"] is not None else float(match["number"])
    if math.isnan(bound):
        return ""
    tol = match["tol"] or (f"{float(match['tolf']) * abs(paper):g}" if match["tolf"] else None)
    return judge(ours=Estimate(paper, 0.0), bound=Estimate(bound, 0.0), op=match["op"] or f"within {tol}")[1]


def _configuration(spec: dict, *, source: str) -> str:
    """The label of the configuration a check judges, read from the results file ``source`` its
    rows came from: the paper's g_phi (and NOTE's IABN at the paper's epochs), every corruption, or
    "" for the profile's own."""
    if spec.get("every_corruption"):
        return EVERY_CORRUPTION
    if source == "paper_note":
        return f"{PAPER_G_PHI}, {PAPER_IABN}"
    return PAPER_G_PHI if {"paper_config", "paper_note"} & set(spec["experiment"]) else ""


def _cost_check(claim: dict, check: dict, *, folder: Path, profile: str) -> CheckResult:
    """A ``cost`` check (module docstring): ours from ``costs.csv``, the paper's from its cost table."""
    column, versus = check["column"], str(check.get("versus") or f"{check['method']}+none")
    what = f"cost {column} {check['method']}+{check['refiner']} over {versus}"
    paper = _cost_ratio(load_table(claim["table"]), column=COST_COLUMNS[column], method=check["method"],
                        refiner=check["refiner"], versus=versus)
    path = folder / "costs.csv"
    ours = (_cost_ratio(pd.read_csv(path), column=column, method=check["method"], refiner=check["refiner"],
                        versus=versus) if path.is_file() else math.nan)
    condition = str(check["reduced"]) if profile in REDUCED_PROFILES else f"within {check.get('tolerance', 0.1):g} of paper"
    match = _CONDITION.match(condition)
    if match["number"] is None and match["paper"] is None:
        raise ValueError(f"{claim['id']}: a cost check's bound is a number or the paper's, not {condition!r}")
    bound = float(match["number"]) if match["number"] is not None else paper
    op = match["op"] or f"within {match['tol']}"
    margin, status = judge(ours=Estimate(ours, 0.0, "exact"), bound=Estimate(bound, 0.0), op=op)
    return CheckResult(claim["id"], what, paper, ours, 0.0, bound, margin, status,
                       _condition_text(condition, bound=bound), "exact" if status != "NOT RUN" else "")


def _batch_check(claim: dict, check: dict, *, folder: Path) -> CheckResult:
    """A batch check (module docstring) on ``<experiment>.csv`` of ``folder``; the paper prints no
    number for Figure 4, so every profile judges the condition."""
    column, start, end = check["column"], check["from"], check["shift_param"]
    kind = "mean" if check["quantity"] == "batch_mean_change" else "separability"
    what = f"batch {column} {kind} {start:g}->{end:g}" if kind == "mean" else f"batch {column} {kind} {start:g} vs {end:g}"
    path = folder / f"{claim['experiment'][0]}.csv"
    ours = (batch_statistic(pd.read_csv(path), quantity=check["quantity"], column=column, start=start, end=end)
            if path.is_file() else NAN)
    condition = str(check["reduced"])
    match = _CONDITION.match(condition)
    if match["number"] is None:
        raise ValueError(f"{claim['id']}: a batch check's bound is a number, not {condition!r}")
    op = match["op"] or f"within {match['tol']}"
    margin, status = judge(ours=ours, bound=Estimate(float(match["number"]), 0.0), op=op)
    return CheckResult(claim["id"], what, math.nan, ours.value, ours.se, float(match["number"]), margin, status,
                       condition, "batches" if status != "NOT RUN" else "")


def claim_verdicts(*, table: pd.DataFrame, claims: list[dict] | None = None) -> dict[str, str]:
    """One verdict per claim from its checks: FAILS if any check fails, else WITHIN NOISE if any is
    within noise, else HOLDS if any holds, else NOT RUN; a claim whose sentence says "in most
    cases" (``aggregate: most``) holds when more than half of its run checks hold and fails when
    at least half fail. " (k of n run)" is added where some checks are not run."""
    aggregate = {c["id"]: c.get("aggregate", "all") for c in (claims if claims is not None else load_claims())}
    verdicts = {}
    for claim_id, group in table.groupby("claim", sort=False):
        configurations = group["configuration"].fillna("") if "configuration" in group else pd.Series("", group.index)
        if configurations.nunique() > 1:  # one verdict per g_phi configuration the checks judge
            verdicts[claim_id] = " · ".join(
                f"{configuration or 'profile g_phi'}: {_verdict(sub, most=aggregate.get(claim_id) == 'most')}"
                for configuration, sub in group.groupby(configurations, sort=False))
        else:
            verdicts[claim_id] = _verdict(group, most=aggregate.get(claim_id) == "most")
    return verdicts


# What each results file's rows were computed with, per profile key (None: the paper's own setting):
# a verdict names the configuration it judges (the paper: g_phi 50 epochs at alpha 0.1, NOTE's IABN
# 30 epochs, every corruption).
PAPER_CONFIG = f"g_phi {PAPER_CIFAR10.epochs} epochs at alpha {PAPER_CIFAR10.alpha:g}"
PAPER_G_PHI = "paper g_phi"  # the label of a verdict on the rows at the paper's g_phi
PAPER_IABN = f"NOTE's IABN {PAPER_IABN_EPOCHS} epochs"  # and on NOTE's rows with its IABN at the paper's epochs
EVERY_CORRUPTION = f"all {len(CORRUPTIONS)} corruptions"  # and on a grid's rows over every corruption
