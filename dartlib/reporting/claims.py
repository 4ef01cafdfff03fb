"""The claims ledger (``data/paper/claims.yaml``): each quantitative claim of the paper with the
table it rests on, checked against a profile's results as HOLDS, FAILS or NOT RUN.

See the header of ``claims.yaml`` for the quantities and conditions.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from dartlib.experiments.grid import read_results
from dartlib.reporting.paper import PAPER_DIR, load_table
from dartlib.paths import results_dir
from dartlib.reporting.tables import parse_params

CLAIMS_FILE = PAPER_DIR / "claims.yaml"
QUANTITIES = ("accuracy", "gain", "drop")
REDUCED_PROFILES = ("smoke", "cpu", "gpu")
_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
# "> 0", ">= -0.5", "< drop(tent)", "< accuracy(bnadapt+dart)", "< accuracy(tent+dart)[alpha=0.1]": a
# number, or a quantity of another method (and refiner, and settings) on the same results
_CONDITION = re.compile(r"^\s*(>=|<=|>|<)\s*(?:(-?\d+(?:\.\d+)?)|(accuracy|gain|drop)\((\w[\w-]*?)(?:\+(\w[\w-]*))?\)"
                        r"(?:\[([^\]]*)\])?)\s*$")


def load_claims(path: Path = CLAIMS_FILE) -> list[dict]:
    claims = yaml.safe_load(path.read_text())
    for claim in claims:
        for check in claim["checks"]:
            if check["quantity"] not in QUANTITIES:
                raise ValueError(f"{claim['id']}: unknown quantity {check['quantity']!r}; valid: {', '.join(QUANTITIES)}")
            if not _CONDITION.match(str(check["reduced"])):
                raise ValueError(f"{claim['id']}: cannot read condition {check['reduced']!r}")
    return claims


def _same(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) < 1e-9
    except ValueError:
        return a == b


def _settings_match(row_params: str, wanted: dict[str, str], *, baseline: bool) -> bool:
    """Whether a row's ``params`` carry every wanted setting; a baseline row (refiner "none") may
    lack a setting it does not depend on (plain TENT has no alpha), but not contradict one."""
    have = parse_params(row_params)
    return all(_same(have[k], v) if k in have else baseline for k, v in wanted.items())


def _rows(frame: pd.DataFrame, *, method: str, refiner: str, shift_param: float | None,
          params: str | None = None) -> pd.DataFrame:
    """Rows of (method, refiner) at ``shift_param`` (None: streams without a shift parameter, such
    as balanced ones) whose settings match ``params`` (e.g. "alpha=0.1" or "test_batch=4")."""
    values = frame["shift_param"].astype(float)
    at = values.isna() if shift_param is None else values.sub(float(shift_param)).abs() < 1e-9
    rows = frame[(frame["method"] == method) & (frame["refiner"] == refiner) & at]
    if params:
        wanted = parse_params(params)
        rows = rows[[_settings_match(p, wanted, baseline=refiner == "none") for p in rows["params"]]]
    return rows


def _mean(rows: pd.DataFrame) -> float:
    return float(rows["accuracy"].mean()) if len(rows) else math.nan


def _difference(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """mean(a) - mean(b), where both average over the same corruptions; NaN otherwise (a grid
    still running: a difference of means over different streams says nothing about the effect)."""
    if "corruption" in a and set(a["corruption"]) != set(b["corruption"]):
        return math.nan
    return _mean(a) - _mean(b)


def quantity(frame: pd.DataFrame, check: dict, *, method: str | None = None) -> float:
    """The check's quantity on a results frame (already restricted to the claim's data). A gain
    or a drop is NaN unless its two sides cover the same corruptions."""
    method = method or check["method"]
    refiner, rho, params = check["refiner"], check["shift_param"], check.get("params")
    rows = _rows(frame, method=method, refiner=refiner, shift_param=rho, params=params)
    if check["quantity"] == "accuracy":
        return _mean(rows)
    if check["quantity"] == "gain":
        return _difference(rows, _rows(frame, method=method, refiner="none", shift_param=rho, params=params))
    return _difference(_rows(frame, method=method, refiner=refiner, shift_param=check["from"], params=params), rows)


def _restrict(frame: pd.DataFrame, claim: dict, *, dataset: str, paper: bool) -> pd.DataFrame:
    frame = frame[frame["dataset"] == dataset]
    if "shift" in claim:
        frame = frame[frame["shift"] == claim["shift"]]
    if "params" in claim:
        frame = frame[frame["params"].astype(str).str.contains(claim["params"], regex=False)]
    if paper and "corruption" in frame:
        mean = frame[frame["corruption"].isin(["mean", "avg", ""])]
        frame = mean if len(mean) else frame
    return frame


@dataclass
class CheckResult:
    claim: str
    check: str
    paper: float
    ours: float
    status: str  # HOLDS, FAILS, NOT RUN
    condition: str


def _describe(check: dict) -> str:
    what = f"{check['quantity']} {check['method']}"
    if check["quantity"] != "drop":
        what += f"+{check['refiner']}" if check["refiner"] != "none" else ""
    rho = check["shift_param"]
    where = f"rho {check['from']:g}->{rho:g}" if check["quantity"] == "drop" else ("" if rho is None else f"at {rho:g}")
    settings = f" [{check['params']}]" if check.get("params") else ""
    return " ".join(part for part in (what, where) if part) + settings


def evaluate(profile: str, *, corrupted_dataset: str | None = None, claims: list[dict] | None = None,
             folder: Path | None = None) -> pd.DataFrame:
    """Every check of every claim on ``results/<profile>/`` (or ``folder``); one row per check.

    ``corrupted_dataset`` stands in for CIFAR-10-C (e.g. ``fmnistc`` on the smoke profile)."""
    claims = claims if claims is not None else load_claims()
    folder = folder or results_dir(profile)
    rows = []
    for claim in claims:
        paper = _restrict(load_table(claim["table"]), claim, dataset=claim["dataset"], paper=True)
        ours_dataset = corrupted_dataset if (corrupted_dataset and claim["dataset"] == "cifar10c") else claim["dataset"]
        frames = [_restrict(read_results(folder / f"{experiment}.csv"), claim, dataset=ours_dataset, paper=False)
                  for experiment in claim["experiment"]]
        frames = [f for f in frames if len(f)]
        for check in claim["checks"]:
            p = quantity(paper, check)
            # the first listed results file that has this check's rows (a grid still running may
            # hold some of a claim's checks and not others)
            ours, o = next(((f, q) for f in frames if not math.isnan(q := quantity(f, check))), (None, math.nan))
            status, condition = "NOT RUN", str(check["reduced"])
            if not math.isnan(o):
                if profile in REDUCED_PROFILES:
                    op, number, other_q, other_m, other_r, other_p = _CONDITION.match(condition).groups()
                    other = {**check, "quantity": other_q, **({"refiner": other_r} if other_r else {}),
                             **({"params": other_p} if other_p is not None else {})}
                    target = float(number) if number is not None else quantity(ours, other, method=other_m)
                    # a comparison with a quantity we have not computed is not run, not failed
                    if not math.isnan(target):
                        status = "HOLDS" if _OPS[op](o, target) else "FAILS"
                else:
                    tolerance = float(check.get("tolerance", 1.5))
                    condition = f"within {tolerance:g} of the paper"
                    status = "HOLDS" if abs(o - p) <= tolerance else "FAILS"
            rows.append(CheckResult(claim["id"], _describe(check), p, o, status, condition).__dict__)
    return pd.DataFrame(rows)


def render(table: pd.DataFrame, *, profile: str) -> str:
    """A plain-text report, one line per check, and a count per status."""
    lines = [f"claims on profile {profile} (reduced profiles test the direction and rough size, not the number)"]
    width = max([34, *map(len, table["check"])])
    for claim_id, group in table.groupby("claim", sort=False):
        lines.append(f"{claim_id}:")
        for r in group.itertuples():
            fmt = "+.1f" if r.check.startswith(("gain", "drop")) else ".1f"
            ours = "—" if math.isnan(r.ours) else format(r.ours, fmt)
            lines.append(f"  {r.status:<7} {r.check:<{width}} ours {ours:>6}  paper {format(r.paper, fmt)}  ({r.condition})")
    counts = table["status"].value_counts()
    lines.append(", ".join(f"{s}: {int(counts.get(s, 0))}" for s in ("HOLDS", "FAILS", "NOT RUN")))
    return "\n".join(lines)
