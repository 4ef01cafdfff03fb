"""The effect of a plug-in (DART) per test stream, ours beside the paper's.

Table 1 and its per-corruption appendix tables print each method with and without DART. What the
reproduction must match first is the direction of DART's effect on each stream, more than the
level (our backbone is narrower than the paper's). :func:`refiner_effects` pairs every method's
row with its +refiner row, per (shift parameter, corruption), for both tables, and classes each
gain as up, flat or down.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Gains within this many points count as no change: the paper prints one decimal and its seeds
# spread by a few tenths, so smaller differences carry no direction.
FLAT_POINTS = 0.5

_KEYS = ["method", "shift_param", "corruption"]


def direction(gain: float, *, flat: float = FLAT_POINTS) -> str:
    """``"+"`` above ``flat`` points, ``"-"`` below ``-flat``, ``"0"`` between (``""`` for NaN)."""
    if gain is None or np.isnan(gain):
        return ""
    return "+" if gain > flat else "-" if gain < -flat else "0"


def _gains(frame: pd.DataFrame, refiner: str) -> pd.Series:
    means = frame.groupby([*_KEYS, "refiner"])["accuracy"].mean().unstack("refiner")
    if "none" not in means or refiner not in means:
        return pd.Series(dtype=float, index=pd.MultiIndex.from_tuples([], names=_KEYS))
    return (means[refiner] - means["none"]).dropna()


def refiner_effects(results: pd.DataFrame, paper: pd.DataFrame, *, refiner: str = "dart",
                    flat: float = FLAT_POINTS) -> pd.DataFrame:
    """Per (method, shift_param, corruption) present in both: our gain of ``method + refiner`` over
    ``method`` (mean over seeds), the paper's, their directions (:func:`direction`) and whether
    those agree. ``results`` and ``paper`` are in the results schema (the paper's rows are the
    appendix's full per-corruption tables)."""
    table = pd.concat({"ours": _gains(results, refiner), "paper": _gains(paper, refiner)}, axis=1, join="inner")
    table["ours_dir"] = [direction(g, flat=flat) for g in table["ours"]]
    table["paper_dir"] = [direction(g, flat=flat) for g in table["paper"]]
    table["agrees"] = table["ours_dir"] == table["paper_dir"]
    table["opposite"] = ((table["ours_dir"] == "+") & (table["paper_dir"] == "-")) | (
        (table["ours_dir"] == "-") & (table["paper_dir"] == "+"))
    return table.reset_index()


def effect_summary(effects: pd.DataFrame) -> pd.DataFrame:
    """Per (method, shift_param): mean gains, how many streams agree in direction and how many
    are opposite, out of how many."""
    grouped = effects.groupby(["method", "shift_param"], sort=False)
    return pd.DataFrame({"ours_gain": grouped["ours"].mean(), "paper_gain": grouped["paper"].mean(),
                         "same_direction": grouped["agrees"].sum(), "opposite": grouped["opposite"].sum(),
                         "streams": grouped.size()})


def gain_against_accuracy(frame: pd.DataFrame, *, method: str = "bnadapt", refiner: str = "dart",
                          shift_param: float = 1.0) -> pd.DataFrame:
    """Per corruption at one shift parameter: the accuracy of ``method`` alone and the gain of
    ``method + refiner`` over it (means over seeds), sorted by accuracy.

    Without label shift (rho = 1) the refinement module of Section 3 should leave predictions
    alone; where it does not, the loss tends to sit on the corruptions the backbone handles worst
    (its softmax outputs are least confident there, which moves d_B as label shift would)."""
    rows = frame[(frame["method"] == method) & (frame["shift_param"].astype(float) == float(shift_param))]
    means = rows.groupby(["corruption", "refiner"])["accuracy"].mean().unstack("refiner")
    if "none" not in means or refiner not in means:
        return pd.DataFrame(columns=["corruption", "accuracy", "gain"])
    table = pd.DataFrame({"accuracy": means["none"], "gain": means[refiner] - means["none"]}).dropna()
    return table.sort_values("accuracy").reset_index()


def rank_correlation(table: pd.DataFrame) -> float:
    """Spearman's rank correlation of ``gain`` with ``accuracy`` (NaN with fewer than 3 rows)."""
    if len(table) < 3:
        return float("nan")
    return float(table["accuracy"].rank().corr(table["gain"].rank()))
