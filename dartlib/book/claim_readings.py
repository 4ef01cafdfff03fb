"""How the claims ledger (:mod:`dartlib.book.claims`) reads a check's quantity off results rows: the
rows of a (method, refiner) at a shift parameter and settings, a gain or a drop as two sides on
the streams and seeds they share, with its standard error (:mod:`dartlib.analysis.noise`); a
refiner's other g_phi seeds named as its own; a per-batch statistic of Figure 4 and a ratio of the
cost table."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import pandas as pd

from dartlib.analysis.noise import NAN, Estimate, Outcomes, combination
from dartlib.experiments.cell_options import cell_options

_VERSUS = re.compile(r"^(?:(\w[\w-]*)\+)?(\w[\w.-]*)(?:\[([^\]]*)\])?$")
_SEED_SUFFIX = re.compile(r"^(?P<base>.+)-seed(?P<seed>\d+)$")


def seed_refiners(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a refiner trained under another g_phi seed and measured on that seed's streams
    (refiner ``<name>-seed<k>`` on rows of seed k, e.g. ``alpha0.1-epochs50-seed1``) named ``<name>``:
    its rows are that refiner's seed k, so a quantity of ``<name>`` is the mean over its seeds. A
    ``-seed<k>`` refiner on another seed's streams keeps its name (a variant, not a seed)."""
    if not len(frame) or "refiner" not in frame or "seed" not in frame:
        return frame
    parts = frame["refiner"].astype(str).str.extract(_SEED_SUFFIX)
    own = parts["seed"].notna() & (parts["seed"].fillna("-1").astype(int) == pd.to_numeric(frame["seed"], errors="coerce"))
    return frame.assign(refiner=frame["refiner"].where(~own, parts["base"]))


def _settings_match(row_params: str, wanted: Mapping, *, baseline: bool) -> bool:
    """Whether a row's ``params`` carry every wanted setting (typed values: ``alpha=0.10`` is
    ``alpha=0.1``); a baseline row (refiner "none") may lack a setting it does not depend on (plain
    TENT has no alpha), but not contradict one."""
    have = cell_options(row_params)
    return all(have[k] == v if k in have else baseline for k, v in wanted.items())


def _rows(frame: pd.DataFrame, *, method: str, refiner: str, shift_param: float | None,
          params: str | None = None) -> pd.DataFrame:
    """Rows of (method, refiner) at ``shift_param`` (None: streams without a shift parameter, such
    as balanced ones) whose settings match ``params`` (e.g. "alpha=0.1" or "test_batch=4")."""
    values = frame["shift_param"].astype(float)
    at = values.isna() if shift_param is None else values.sub(float(shift_param)).abs() < 1e-9
    rows = frame[(frame["method"] == method) & (frame["refiner"] == refiner) & at]
    if params:
        wanted = cell_options(params)
        rows = rows[[_settings_match(p, wanted, baseline=refiner == "none") for p in rows["params"]]]
    return rows


def _versus(check: dict, method: str) -> tuple[str, str, str | None]:
    """The (method, refiner, params) a gain is measured against: ``versus`` ("none", "dart-split",
    "noadapt+none", "dart[alpha=0]"), by default the same method without a refiner."""
    m, refiner, params = _VERSUS.match(str(check.get("versus") or "none")).groups()
    return m or method, refiner, params if params is not None else check.get("params")


def _corruptions(frame: pd.DataFrame, check: dict, *, method: str | None = None) -> set[str]:
    """The corruptions the check's own rows (of ``method``, default the check's) cover."""
    rho = check["from"] if check["quantity"] == "drop" else check["shift_param"]
    rows = _rows(frame, method=method or check["method"], refiner=check["refiner"], shift_param=rho,
                 params=check.get("params"))
    return set(rows["corruption"].astype(str))


def quantity_terms(frame: pd.DataFrame, check: dict, *, method: str | None = None) -> list[tuple[float, pd.DataFrame]]:
    """The check's quantity as (weight, rows) terms (:func:`dartlib.analysis.noise.combination`):
    an accuracy is one term, a gain or a drop two. Empty where a gain's or a drop's two sides do
    not cover the same corruptions (a difference of means over different streams says nothing)."""
    method = method or check["method"]
    refiner, rho, params = check["refiner"], check["shift_param"], check.get("params")
    rows = _rows(frame, method=method, refiner=refiner, shift_param=rho, params=params)
    if check["quantity"] == "accuracy":
        return [(1.0, rows)] if len(rows) else []
    if check["quantity"] == "gain":
        other_method, other_refiner, other_params = _versus(check, method)
        a, b = rows, _rows(frame, method=other_method, refiner=other_refiner, shift_param=rho, params=other_params)
    else:
        a, b = _rows(frame, method=method, refiner=refiner, shift_param=check["from"], params=params), rows
    a, b = _shared_seeds(a, b)
    if not len(a) or not len(b) or set(a["corruption"].astype(str)) != set(b["corruption"].astype(str)):
        return []
    return [(1.0, a), (-1.0, b)]


def _shared_seeds(*frames: pd.DataFrame) -> tuple[pd.DataFrame, ...]:
    """``frames`` kept to the seeds all of them hold: a difference is taken on the same streams (a
    baseline run on three seeds' streams is compared with a refiner of one seed on that seed's)."""
    if any("seed" not in f for f in frames):
        return frames
    seeds = set.intersection(*(set(f["seed"].astype(str)) for f in frames))
    return tuple(f[f["seed"].astype(str).isin(seeds)] for f in frames)


def quantity(frame: pd.DataFrame, check: dict, *, method: str | None = None, outcomes: Outcomes | None = None) -> Estimate:
    """The check's quantity on a results frame (already restricted to the check's data), with its
    standard error (:mod:`dartlib.analysis.noise`: clustered by test image and paired where
    ``outcomes`` holds every row's per-image outcomes, else an upper bound). NaN where
    :func:`quantity_terms` has none."""
    terms = quantity_terms(frame, check, method=method)
    return combination(terms=terms, outcomes=outcomes) if terms else NAN


def _restrict(frame: pd.DataFrame, spec: dict, *, dataset: str, paper: bool) -> pd.DataFrame:
    frame = frame[frame["dataset"] == dataset]
    if spec.get("shift"):
        frame = frame[frame["shift"] == spec["shift"]]
    if paper and "corruption" in frame:
        mean = frame[frame["corruption"].isin(["mean", "avg", ""])]
        frame = mean if len(mean) else frame
    return frame


def _cost_ratio(table: pd.DataFrame, *, column: str, method: str, refiner: str, versus: str) -> float:
    """``column`` of (method, refiner) over that of ``versus`` ("bnadapt+none") in a cost table."""
    other_method, other_refiner = versus.split("+")
    value = {}
    for key, (m, r) in (("a", (method, refiner)), ("b", (other_method, other_refiner))):
        sel = table[(table["method"] == m) & (table["refiner"] == r)]
        value[key] = float(sel[column].iloc[0]) if len(sel) else math.nan
    return value["a"] / value["b"] if value["b"] else math.nan


def batch_statistic(frame: pd.DataFrame, *, quantity: str, column: str, start: float, end: float) -> Estimate:
    """A batch check's quantity (:mod:`dartlib.book.claims`'s docstring) on per-batch rows ``frame``
    (columns ``ir`` and ``column``), between the batches at IR ``start`` and those at IR ``end``."""

    a = frame.loc[frame["ir"].astype(float) == float(start), column].astype(float).to_numpy()
    b = frame.loc[frame["ir"].astype(float) == float(end), column].astype(float).to_numpy()
    if len(a) < 2 or len(b) < 2:
        return NAN
    if quantity == "batch_mean_change":
        return Estimate(float(b.mean() - a.mean()), math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)), "batches")
    auc = float(((b[:, None] > a[None, :]).mean() + 0.5 * (b[:, None] == a[None, :]).mean()))
    auc = max(auc, 1.0 - auc)
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)  # Hanley and McNeil (1982)
    var = (auc * (1 - auc) + (len(b) - 1) * (q1 - auc**2) + (len(a) - 1) * (q2 - auc**2)) / (len(a) * len(b))
    return Estimate(auc, math.sqrt(max(var, 0.0)), "batches")
