"""The verdict rules of the claims ledger (:mod:`dartlib.book.claims`, whose docstring states them):
a check's margin from its bound in standard errors and its verdict (:func:`judge`, decided at
:data:`MARGIN_SE` or the t quantile of its level, :func:`decisive`), the size verdict of a check of
a stated effect (:func:`judge_size`), a claim's verdict from its checks', and the row a judged check
gives (:class:`CheckResult`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dartlib.analysis.noise import Estimate, critical

VERDICTS = ("HOLDS", "WITHIN NOISE", "FAILS", "NOT RUN")
# the size verdicts of a check of a stated effect: ours within the claim's margin of the paper's
# number, larger or smaller than it (in the stated direction) beyond the margin, undecided between
SIZES = ("AS STATED", "LARGER", "SMALLER", "UNDECIDED", "NOT RUN")
MARGIN_SE = 2.0  # the margin, in standard errors, beyond which a check is decided (the t quantile of its level with seeds)


@dataclass
class CheckResult:
    claim: str
    check: str
    paper: float
    ours: float
    se: float
    bound: float
    margin: float  # standard errors from the bound, positive on the asserted side
    status: str  # one of VERDICTS
    condition: str
    # the margin's SE: "images" (clustered, paired), "bound" (rows without outcomes), "exact" (a count) or
    # "batches" (over a figure's test batches)
    se_kind: str = ""
    # "paper g_phi" for a check on the rows at the paper's g_phi (results file paper_config), "" for the profile's
    configuration: str = ""
    seeds: int = 0  # the seeds ours is the mean over (1: its SE has no seed term; 0: not run or no seeds)
    critical: float = MARGIN_SE  # the margin (in SE) beyond which the check is decided
    size: str = ""  # a check of a stated size: one of SIZES; "" where the sentence states no size
    ratio: float = math.nan  # ours / paper, for a check of a stated size
    size_margin: float = math.nan  # the margin (points) around the paper's number
    paper_reading: str = ""  # the condition judged on the paper's own numbers: HOLDS, FAILS or "" (not computable)


def judge(*, ours: Estimate, bound: Estimate, op: str, gap: Estimate | None = None) -> tuple[float, str]:
    """(margin in SE, verdict) of ``ours`` against ``bound`` under ``op`` (">", "<", ">=", "<=" or
    "within T"); see :mod:`dartlib.book.claims`'s docstring for the rules. ``gap``: ours - bound computed on the
    rows of both (paired where they share test images), whose SE then replaces the two sides'
    combined as if independent."""
    if math.isnan(ours.value) or math.isnan(bound.value):
        return math.nan, "NOT RUN"
    se = gap.se if gap is not None else math.hypot(ours.se, 0.0 if math.isnan(bound.se) else bound.se)
    decide = decisive(ours=ours, bound=bound, gap=gap)
    if math.isnan(se):
        raise ValueError("results rows without a sample count n: no standard error, no verdict")
    if op.startswith("within"):
        distance = float(op.split()[1]) - abs(ours.value - bound.value)
    else:
        distance = ours.value - bound.value if op.startswith(">") else bound.value - ours.value
    margin = distance / se if se > 0 else math.copysign(math.inf, distance) if distance else 0.0
    return margin, "HOLDS" if margin > decide else "FAILS" if margin < -decide else "WITHIN NOISE"


def decisive(*, ours: Estimate, bound: Estimate, gap: Estimate | None = None) -> float:
    """The margin in SE that decides a check: 2, or the t quantile of 2 SE's level at the SE's degrees
    of freedom where seeds add a term (:func:`dartlib.analysis.noise.critical`; two sides combined as
    independent take the fewer)."""
    if gap is not None:
        return gap.critical
    return critical(df=min(ours.df, bound.df if not math.isnan(bound.se) and bound.se > 0 else math.inf))


def judge_size(*, ours: Estimate, paper: float, margin: float, sense: float | None = None) -> tuple[str, float]:
    """(size verdict, ours / paper) of a check of a stated effect: AS STATED where ours lies within
    ``margin`` points of the paper's number beyond the decisive SE both ways; LARGER (SMALLER) where it
    lies beyond the margin on the far (near) side of the paper's number in the direction the sentence
    asserts (``sense``: +1 for a condition ">" or ">=", -1 for "<" or "<="; by default the paper's
    sign), beyond the decisive SE; UNDECIDED in between; NOT RUN without ours or the paper's number."""
    if math.isnan(ours.value) or math.isnan(paper):
        return "NOT RUN", math.nan
    ratio = ours.value / paper if paper else math.nan
    sense = sense if sense is not None else math.copysign(1.0, paper)
    excess = sense * (ours.value - paper)  # positive: more of the asserted effect
    room = ours.critical * (0.0 if math.isnan(ours.se) else ours.se)
    if abs(excess) + room < margin:
        return "AS STATED", ratio
    if excess - margin > room:
        return "LARGER", ratio
    if -excess - margin > room:
        return "SMALLER", ratio
    return "UNDECIDED", ratio


def _verdict(group: pd.DataFrame, *, most: bool) -> str:
    counts = group["status"].value_counts()
    run = len(group) - int(counts.get("NOT RUN", 0))
    if most and run:
        verdict = ("HOLDS" if counts.get("HOLDS", 0) * 2 > run else
                   "FAILS" if counts.get("FAILS", 0) * 2 >= run else "WITHIN NOISE")
    else:
        verdict = next((v for v in ("FAILS", "WITHIN NOISE", "HOLDS") if counts.get(v, 0)), "NOT RUN")
    return verdict + (f" ({run} of {len(group)} run)" if 0 < run < len(group) else "")
