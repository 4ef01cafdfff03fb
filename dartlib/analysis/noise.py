"""Noise of our numbers: one model, stated here once, used by every table, page, ledger check and
diagnosis mark (docs/noise.md says it in words).

Every corruption of CIFAR-10-C holds the same test images in the same order, an image that is hard
under one corruption tends to be hard under the others, and two methods run on the same streams
are scored on the same images. Cells that share images are not independent, so the standard error
(SE) of a mean over corruptions, or of a difference of two methods, is computed by clustering on
the test image, from each cell's per-image outcomes (:mod:`dartlib.experiments.outcomes`):

- every quantity here is a linear combination of cell accuracies, sum_c w_c a_c, with a_c =
  (1 / n_c) sum_i y_ci over the images i of cell c's stream;
- it is a sum over test images of z_i = sum_c w_c y_ci / n_c (an image counts once however many
  cells it appears in), and images are the independent units: Var = m / (m - 1) sum_i (z_i - z_bar)^2
  over the m images any cell holds. A difference of two methods on the same streams is thereby
  paired image by image; a single cell gets p (1 - p) / (n - 1), the binomial variance;
- images are the same across corruptions and severities of one dataset (a cluster is the dataset,
  the test set's size and the image's index);
- where the quantity has several seeds (the g_phi and stream seeds; Section 5.1 reports mean +- std
  over seeds), it is the mean over the seeds that cover every cell of every term, and the variance of
  the quantity's own per-seed values (a gain's per-seed gains, not each side's means; ddof 1) over
  their number is added. Those per-seed values already hold each seed's own image noise, so of the
  image-clustered variance only the part the seeds share (the same test images drawn in each seed's
  stream) is added: (S Var(mean over seeds) - mean_s Var_s) / (S - 1), each Var clustered by image
  (0 where negative; with identical streams it is the whole clustered variance, with disjoint
  streams none of it). The seed term has (seeds - 1) degrees of freedom, so a verdict at "2 SE" uses
  the t quantile of the same one-sided level, Phi(2) = 0.977, at the Welch-Satterthwaite degrees of
  freedom of the sum (:func:`critical`): 4.53 SE where the seed term dominates with 3 seeds, 2 SE
  where there is none.

A row without per-image outcomes (computed before they were kept) cannot be clustered; its SE is
then an upper bound, sum_c |w_c| SE_c with SE_c the binomial SE of the cell (the standard deviation
of a sum is at most the sum of the standard deviations, whatever the correlation), and the
estimate says so (``kind="bound"``): a bound errs towards WITHIN NOISE, never towards a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from dartlib.experiments.outcomes import CellOutcomes

# The model in one sentence, for every page and table caption that shows an SE.
SE_SENTENCE = ("SE: the standard error clustered by test image (the corruptions share their images; a difference "
               "of two methods is paired image by image), with the spread of the per-seed values (ddof 1) added where seeds were run, judged at the "
               "matching t quantile; "
               "≤ marks an upper bound, where the rows have no per-image outcomes (docs/noise.md)")

# The fields that name a cell apart from its seed.
_CELL = ["dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner", "params"]

Outcomes = Mapping[tuple[str, str], CellOutcomes]


@dataclass(frozen=True)
class Estimate:
    """A mean accuracy (or a combination of means) in points, with its standard error. ``kind``:
    ``images`` (clustered by test image, paired across the terms), ``bound`` (an upper bound: some
    rows have no per-image outcomes) or ``none`` (no SE: no rows, or rows without a count)."""

    value: float
    se: float
    kind: str = "images"
    seeds: int = 1  # the seeds the value is the mean over; 1: no seed term in the SE
    df: float = math.inf  # the SE's degrees of freedom (Welch-Satterthwaite; inf: images only)

    @property
    def critical(self) -> float:
        """How many SE decide a verdict at this SE's degrees of freedom (:func:`critical`)."""
        return critical(df=self.df)

    def text(self, *, signed: bool = True, missing: str = "") -> str:
        """``+1.23 ± 0.45`` (``± ≤0.45`` where the SE is an upper bound), the value alone where it
        has no SE, ``missing`` where there is no value."""
        if math.isnan(self.value):
            return missing
        value = f"{self.value:+.2f}" if signed else f"{self.value:.2f}"
        return value if math.isnan(self.se) else f"{value} ± {'≤' if self.kind == 'bound' else ''}{self.se:.2f}"


NAN = Estimate(math.nan, math.nan, "none")
LEVEL = float(stats.norm.cdf(2.0))  # the one-sided level of "2 SE" on a normal SE


def critical(*, df: float) -> float:
    """The multiple of the SE that decides a verdict: 2 for an SE with no seed term (df infinite),
    the t quantile of the same level (Phi(2)) at ``df`` degrees of freedom otherwise (4.53 at 2)."""
    return 2.0 if math.isinf(df) or math.isnan(df) else float(stats.t.ppf(LEVEL, df))


def _satterthwaite(image_var: float, seed_var: float, seeds: int) -> float:
    """Degrees of freedom of image_var + seed_var, the image term's taken as infinite."""
    if seeds < 2 or seed_var <= 0:
        return math.inf
    return (image_var + seed_var) ** 2 / (seed_var**2 / (seeds - 1))


def mean_estimate(*, rows: pd.DataFrame, outcomes: Outcomes | None = None) -> Estimate:
    """The mean accuracy over the cells of ``rows`` (seeds averaged first) with its SE."""
    return combination(terms=[(1.0, rows)], outcomes=outcomes)


def difference(a: pd.DataFrame, b: pd.DataFrame, *, outcomes: Outcomes | None = None) -> Estimate:
    """mean(a) - mean(b), paired image by image, where both average over the same corruptions; NaN
    otherwise (a grid still running: a difference of means over different streams says nothing)."""
    if not len(a) or not len(b) or set(a["corruption"].astype(str)) != set(b["corruption"].astype(str)):
        return NAN
    return combination(terms=[(1.0, a), (-1.0, b)], outcomes=outcomes)


def combination(*, terms: Sequence[tuple[float, pd.DataFrame]], outcomes: Outcomes | None = None) -> Estimate:
    """sum_j w_j mean_j for ``terms`` (w_j, rows_j), mean_j the mean over rows_j's cells, as the mean
    over the seeds that cover every cell of every term of the quantity's per-seed values, with the
    SE of the module docstring (clustered by image plus the spread of those per-seed values; an
    upper bound where a row has no outcomes). Where the terms share no such seed, each cell is
    averaged over the seeds it has and no seed term is added (``seeds`` 1)."""
    if not terms or any(not len(rows) for _, rows in terms):
        return NAN
    frames = [(w, _cells(rows)) for w, rows in terms]
    shared = set.intersection(*(_complete_seeds(frame) for _, frame in frames))
    if len(shared) > 1:
        frames = [(w, frame[frame["seed"].isin(shared)]) for w, frame in frames]
    value, weighted, per_seed_value = 0.0, [], {s: 0.0 for s in shared}
    for w, frame in frames:
        cells = frame.groupby(_CELL, sort=False, dropna=False)
        k = cells.ngroups
        value += w * float(cells["accuracy"].mean().mean())
        if len(shared) > 1:  # the term's mean over its cells, seed by seed
            for seed, mean in frame.groupby("seed")["accuracy"].mean().items():
                per_seed_value[seed] += w * float(mean)
        per_seed = cells["seed"].transform("count").to_numpy()
        weighted += [(w / (k * s), row) for s, row in zip(per_seed, frame.to_dict("records"))]
    seeds = len(shared) if len(shared) > 1 else 1
    seed_var = float(np.var(list(per_seed_value.values()), ddof=1)) / seeds if seeds > 1 else 0.0
    known = [(c, outcomes.get((str(row.get("key", "")), str(row.get("inputs", ""))))) for c, row in weighted] if outcomes else []
    if known and all(o is not None for _, o in known):
        cells = [(c, row, o) for (c, row), (_, o) in zip(weighted, known)]
        var = _clustered_variance(cells)
        if seeds > 1:  # the per-seed values' spread holds each seed's own image noise already: add only
            # the part the seeds share (the same test images), (S var(mean) - mean_s var_s) / (S - 1)
            each = [_clustered_variance([(c * seeds, row, o) for c, row, o in cells if row["seed"] == seed])
                    for seed in shared]
            var = max(0.0, (seeds * var - float(np.mean(each))) / (seeds - 1))
        return Estimate(value, math.sqrt(var + seed_var), "images", seeds, _satterthwaite(var, seed_var, seeds))
    n = pd.to_numeric(pd.Series([row.get("n") for _, row in weighted], dtype=object), errors="coerce").to_numpy(float)
    if np.isnan(n).any():
        return Estimate(value, math.nan, "none", seeds)
    acc = np.array([float(row["accuracy"]) for _, row in weighted])
    bound = float(np.sum(np.abs([c for c, _ in weighted]) * np.sqrt(acc * (100.0 - acc) / n)))
    return Estimate(value, math.sqrt(bound**2 + seed_var), "bound", seeds, _satterthwaite(bound**2, seed_var, seeds))


def _complete_seeds(frame: pd.DataFrame) -> set:
    """The seeds whose rows cover every cell of ``frame``."""
    cells = frame.groupby(_CELL, sort=False, dropna=False).ngroups
    per_seed = frame.groupby("seed").apply(lambda f: f.groupby(_CELL, sort=False, dropna=False).ngroups,
                                           include_groups=False)
    return {seed for seed, count in per_seed.items() if count == cells}


def _cells(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.assign(**{col: "" for col in _CELL if col not in rows})
    frame = rows.assign(params=rows["params"].astype(str), shift_param=rows["shift_param"].astype(float).fillna(-1.0),
                        severity=rows["severity"].astype(str), corruption=rows["corruption"].astype(str),
                        accuracy=rows["accuracy"].astype(float))
    if "seed" not in frame:
        frame = frame.assign(seed=0)
    if frame.duplicated(_CELL + ["seed"]).any():
        dup = frame[frame.duplicated(_CELL + ["seed"], keep=False)].iloc[0]
        raise ValueError(f"two results rows for one cell and seed: {dict(dup[_CELL + ['seed']])}")
    return frame


def _clustered_variance(cells: list[tuple[float, dict, CellOutcomes]]) -> float:
    """Var(sum_i z_i) over independent images (module docstring), in points squared."""
    z: dict[tuple[str, int], np.ndarray] = {}
    held: dict[tuple[str, int], np.ndarray] = {}
    for weight, row, o in cells:
        space = (str(row["dataset"]), len(o.members))  # one test set's images, whatever the corruption
        if space not in z:
            z[space], held[space] = np.zeros(len(o.members)), np.zeros(len(o.members), dtype=bool)
        z[space] += weight * o.correct / o.n  # an image drawn twice counts twice in its cell's mean
        held[space] |= o.members > 0
    values = np.concatenate([z[space][held[space]] for space in z])
    m = len(values)
    if m < 2:
        return math.nan
    return float(m / (m - 1) * np.sum((values - values.mean()) ** 2)) * 100.0**2
