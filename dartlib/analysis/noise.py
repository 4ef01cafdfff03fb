"""Noise of our numbers: the binomial standard error of a cell's accuracy, pooled over the cells a
table averages and over seeds (the paper prints mean +- std over seeds, Section 5).

A cell of n test images with accuracy a (points) has SE sqrt(a (100 - a) / n). A mean over m
cells has SE sqrt(sum SE_i^2) / m; a difference of two means combines both SEs as independent,
which overstates the SE of two methods scored on the same images (errs towards "within noise").
Where a cell has several seeds, the seed spread std / sqrt(k) is added in quadrature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

# The fields that name a cell apart from its seed.
_CELL = ["dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner", "params"]


@dataclass(frozen=True)
class Estimate:
    """A mean accuracy (or a difference of two) in points, with its standard error."""

    value: float
    se: float

    def __sub__(self, other: "Estimate") -> "Estimate":
        return Estimate(self.value - other.value, math.hypot(self.se, other.se))


NAN = Estimate(math.nan, math.nan)


def cell_estimates(*, rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (seeds pooled): ``accuracy`` (mean over seeds) and ``se``, the binomial
    standard error of that mean with the seed spread ``std / sqrt(k)`` added in quadrature. Rows
    without a sample count give a NaN ``se`` (the paper's tables)."""
    frame = rows.assign(params=rows["params"].astype(str), shift_param=rows["shift_param"].astype(float).fillna(-1.0),
                        severity=rows["severity"].astype(str), corruption=rows["corruption"].astype(str))
    n = pd.to_numeric(frame["n"], errors="coerce")
    frame = frame.assign(var=frame["accuracy"] * (100.0 - frame["accuracy"]) / n)
    if "seed" in frame and frame.duplicated(_CELL + ["seed"]).any():
        dup = frame[frame.duplicated(_CELL + ["seed"], keep=False)].iloc[0]
        raise ValueError(f"two results rows for one cell and seed: {dict(dup[_CELL + ['seed']])}")
    grouped = frame.groupby(_CELL, sort=False, dropna=False)
    k = grouped["accuracy"].count()
    seed_var = (grouped["accuracy"].std(ddof=1).fillna(0.0) ** 2) / k
    out = pd.DataFrame({"accuracy": grouped["accuracy"].mean(), "se": ((grouped["var"].sum(min_count=1) / k**2
                                                                       + seed_var) ** 0.5), "seeds": k})
    return out.reset_index()


def mean_estimate(*, rows: pd.DataFrame) -> Estimate:
    """The mean accuracy over the cells of ``rows`` with ``sqrt(sum SE_cell^2) / m``."""
    if not len(rows):
        return NAN
    cells = cell_estimates(rows=rows)
    return Estimate(float(cells["accuracy"].mean()), float(math.sqrt((cells["se"] ** 2).sum()) / len(cells))
                    if cells["se"].notna().all() else math.nan)


def difference(a: pd.DataFrame, b: pd.DataFrame) -> Estimate:
    """mean(a) - mean(b) with its SE, where both average over the same corruptions; NaN otherwise
    (a grid still running: a difference of means over different streams says nothing)."""
    if not len(a) or not len(b) or set(a["corruption"].astype(str)) != set(b["corruption"].astype(str)):
        return NAN
    return mean_estimate(rows=a) - mean_estimate(rows=b)
