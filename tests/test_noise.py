"""The noise model (dartlib.analysis.noise) against simulations whose variance is known: cells that
share test images (15 corruptions of one test set) and two methods on the same streams."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dartlib.analysis import noise
from dartlib.experiments.grid import SCHEMA
from dartlib.experiments.outcomes import CellOutcomes

N_IMAGES, N_CORRUPTIONS = 2000, 15


def _simulate(rng: np.random.Generator, *, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Correctness of methods A and B on N_IMAGES new images under N_CORRUPTIONS fixed corruptions:
    each image has a difficulty shared by every corruption and both methods (correlated cells), B is
    A with ``gap`` less probability of being right."""
    difficulty = rng.normal(size=N_IMAGES)[None, :]
    shift = np.random.default_rng(99).normal(scale=0.5, size=(N_CORRUPTIONS, 1))  # the corruptions are fixed
    p_a = 1 / (1 + np.exp(-(1.0 + 1.5 * difficulty + shift)))
    u = rng.random((N_CORRUPTIONS, N_IMAGES))
    return u < p_a, u < p_a - gap  # B fails on a subset of A's successes: strongly paired


def _frame(correct: np.ndarray, method: str) -> tuple[pd.DataFrame, dict]:
    rows, outcomes = [], {}
    for c, hits in enumerate(correct):
        key = f"{method}-{c}"
        o = CellOutcomes.from_stream(order=np.arange(N_IMAGES), correct=hits, size=N_IMAGES)
        rows.append({**{k: "" for k in SCHEMA}, "dataset": "sim", "shift": "lt", "shift_param": 1.0,
                     "corruption": f"c{c}", "severity": 5, "method": method, "refiner": "none", "seed": 0,
                     "n": N_IMAGES, "accuracy": o.accuracy, "key": key, "inputs": "d"})
        outcomes[(key, "d")] = o
    return pd.DataFrame(rows), outcomes


def test_the_se_of_a_mean_and_of_a_paired_difference_match_their_simulated_spread():
    """Over 300 independent replicates (new images each time), the spread of the 15-corruption mean
    and of the A - B difference equals the SE the model gives from one replicate (median over
    replicates, within 15%); the binomial formula that treats cells as independent is 2x too small
    for the mean and too large for the paired difference."""
    rng = np.random.default_rng(0)
    means, diffs, se_mean, se_diff, naive_mean, naive_diff = [], [], [], [], [], []
    for _ in range(300):
        a, b = _simulate(rng, gap=0.05)
        fa, oa = _frame(a, "a")
        fb, ob = _frame(b, "b")
        outcomes = {**oa, **ob}
        m = noise.mean_estimate(rows=fa, outcomes=outcomes)
        d = noise.difference(fa, fb, outcomes=outcomes)
        assert m.kind == d.kind == "images"
        means.append(m.value), diffs.append(d.value), se_mean.append(m.se), se_diff.append(d.se)
        binom = np.sqrt(fa.accuracy * (100 - fa.accuracy) / N_IMAGES)
        binom_b = np.sqrt(fb.accuracy * (100 - fb.accuracy) / N_IMAGES)
        naive_mean.append(math.sqrt((binom**2).sum()) / N_CORRUPTIONS)
        naive_diff.append(math.hypot(math.sqrt((binom**2).sum()), math.sqrt((binom_b**2).sum())) / N_CORRUPTIONS)
    true_mean, true_diff = np.std(means, ddof=1), np.std(diffs, ddof=1)
    assert np.median(se_mean) == pytest.approx(true_mean, rel=0.15)
    assert np.median(se_diff) == pytest.approx(true_diff, rel=0.15)
    assert np.median(naive_mean) < 0.6 * true_mean  # independent cells: far too small
    assert np.median(naive_diff) > 1.5 * true_diff  # unpaired: far too large


def test_one_cell_gets_the_binomial_se():
    hits = np.arange(N_IMAGES) < 1600
    frame, outcomes = _frame(hits[None, :], "a")
    est = noise.mean_estimate(rows=frame, outcomes=outcomes)
    assert est.value == pytest.approx(80.0)
    assert est.se == pytest.approx(math.sqrt(80 * 20 / (N_IMAGES - 1)))


def test_rows_without_outcomes_get_an_upper_bound_and_say_so():
    rng = np.random.default_rng(1)
    a, b = _simulate(rng, gap=0.05)
    fa, oa = _frame(a, "a")
    fb, _ = _frame(b, "b")
    clustered = noise.difference(fa, fb, outcomes={**oa, **_frame(b, "b")[1]})
    bound = noise.difference(fa, fb, outcomes=oa)  # B's outcomes missing
    assert bound.kind == "bound" and clustered.kind == "images"
    assert bound.se >= clustered.se
    binom = lambda f: np.sqrt(f.accuracy * (100 - f.accuracy) / N_IMAGES).sum() / N_CORRUPTIONS  # noqa: E731
    assert bound.se == pytest.approx(binom(fa) + binom(fb))


def test_seed_spread_is_added_with_ddof_1():
    rows, outcomes = [], {}
    for seed, hits_n in ((0, 700), (1, 800), (2, 900)):
        hits = np.arange(1000) < hits_n
        o = CellOutcomes.from_stream(order=np.arange(1000), correct=hits, size=1000)
        rows.append({**{k: "" for k in SCHEMA}, "dataset": "sim", "shift": "lt", "shift_param": 1.0, "corruption": "fog",
                     "severity": 5, "method": "a", "refiner": "none", "seed": seed, "n": 1000, "accuracy": o.accuracy,
                     "key": f"s{seed}", "inputs": "d"})
        outcomes[(f"s{seed}", "d")] = o
    est = noise.mean_estimate(rows=pd.DataFrame(rows), outcomes=outcomes)
    assert est.value == pytest.approx(80.0)
    # images: z_i = mean over seeds of hit_i / 1000 -> per-image values 1, 2/3, 1/3, 0 (in 1/1000 units)
    z = np.select([np.arange(1000) < 700, np.arange(1000) < 800, np.arange(1000) < 900], [1, 2 / 3, 1 / 3], 0) / 1000
    image_var = 1000 / 999 * ((z - z.mean()) ** 2).sum() * 1e4
    seed_var = np.var([70.0, 80.0, 90.0], ddof=1) / 3
    assert est.se == pytest.approx(math.sqrt(image_var + seed_var))


def test_outcomes_round_trip_and_count_a_repeated_image():
    hits = np.random.default_rng(2).random(777) < 0.6
    order = np.random.default_rng(3).permutation(10_000)[:777]
    o = CellOutcomes.from_stream(order=order, correct=hits, size=10_000)
    back = CellOutcomes.decode(**o.encode())
    assert (back.members == o.members).all() and (back.correct == o.correct).all()
    assert back.n == 777 and back.accuracy == pytest.approx(100 * hits.mean())
    # a stream that draws an image again (online imbalance beyond a class's size) keeps counts
    twice = CellOutcomes.from_stream(order=np.array([1, 1, 2]), correct=np.array([True, False, True]), size=3)
    assert twice.members.tolist() == [0, 2, 1] and twice.correct.tolist() == [0, 1, 1]
    back = CellOutcomes.decode(**twice.encode())
    assert back.members.tolist() == [0, 2, 1] and back.n == 3 and back.accuracy == pytest.approx(200 / 3)
