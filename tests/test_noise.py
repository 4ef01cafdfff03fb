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


def test_seed_spread_is_added_with_ddof_1_beside_the_image_noise_the_seeds_share():
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
    # each seed's own clustered variance; the seeds' spread already holds it, so only the shared part is added
    each = [1000 / 999 * 1000 * (p * (1 - p)) / 1000**2 * 1e4 for p in (0.7, 0.8, 0.9)]
    shared = (3 * image_var - np.mean(each)) / 2
    seed_var = np.var([70.0, 80.0, 90.0], ddof=1) / 3
    assert est.se == pytest.approx(math.sqrt(max(shared, 0.0) + seed_var))
    assert est.seeds == 3 and est.df == pytest.approx((max(shared, 0.0) + seed_var) ** 2 / (seed_var**2 / 2))


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


# A long-tailed, seeded simulation: each cell's stream draws its images class by class with
# replacement (unequal images per cell, some images left out, some drawn twice), the g_phi seed
# moves the refined method's accuracy by a seed effect, and a gain is averaged over three seeds.
LT_IMAGES, LT_CLASSES, LT_CORRUPTIONS, LT_SEEDS, LT_TAU = 1000, 10, 5, 3, 0.01
LT_PER_CLASS = np.array([150, 100, 70, 50, 35, 25, 18, 12, 9, 6])  # images per class in a stream (rho about 25)
_LT_SHIFT = np.random.default_rng(98).normal(scale=0.5, size=(LT_CORRUPTIONS, 1))  # the corruptions are fixed


def _lt_replicate(rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    """Rows and outcomes of BNAdapt ("none") and a refined method ("dart", three g_phi seeds) on
    long-tailed streams of LT_CORRUPTIONS corruptions: one replicate with new images, new streams and
    new seed effects. An image keeps its outcome wherever it is drawn (the same file, the same model)."""
    classes = np.arange(LT_IMAGES) % LT_CLASSES
    members = [np.flatnonzero(classes == k) for k in range(LT_CLASSES)]
    p = 1 / (1 + np.exp(-(0.8 + 1.5 * rng.normal(size=LT_IMAGES)[None, :] + _LT_SHIFT)))
    u = rng.random((LT_CORRUPTIONS, LT_IMAGES))
    effect = 0.04 + rng.normal(scale=LT_TAU, size=LT_SEEDS)  # each g_phi seed's gain in probability
    rows, outcomes = [], {}
    for seed in range(LT_SEEDS):
        for c in range(LT_CORRUPTIONS):
            scale = 0.6 + 0.2 * c  # unequal stream sizes across cells
            order = np.concatenate([rng.choice(m, size=max(1, round(n * scale)), replace=True)
                                    for m, n in zip(members, LT_PER_CLASS)])
            for refiner, hits in (("none", u < p), ("dart", u < p + effect[seed])):
                key = f"{refiner}-{c}-{seed}"
                o = CellOutcomes.from_stream(order=order, correct=hits[c][order], size=LT_IMAGES)
                rows.append({**{k: "" for k in SCHEMA}, "dataset": "sim", "shift": "lt", "shift_param": 25.0,
                             "corruption": f"c{c}", "severity": 5, "method": "bnadapt", "refiner": refiner,
                             "seed": seed, "n": o.n, "accuracy": o.accuracy, "key": key, "inputs": "d"})
                outcomes[(key, "d")] = o
    return pd.DataFrame(rows), outcomes


# Planting an SE error of this size must fail the test (the test is tuned to catch it).
SE_ERROR = 1.0


def test_the_se_of_a_three_seed_long_tailed_gain_matches_its_simulated_spread():
    """Over 400 replicates the model's SE of BNAdapt+DART's three-seed gain on long-tailed streams
    (repeated and omitted images, unequal cells, a g_phi seed effect) matches the spread of the
    gain: the root mean square SE at most 12% above the spread and not below it (an SE 12% off either way
    fails), and the t quantile
    at the Welch-Satterthwaite degrees of freedom misses the mean gain about as often as its level
    says (4.6%), where 2 SE, ignoring the seed term's 2 degrees of freedom, misses it far more often."""
    rng = np.random.default_rng(5)
    values, ses, crit = [], [], []
    for _ in range(400):
        frame, outcomes = _lt_replicate(rng)
        est = noise.difference(frame[frame.refiner == "dart"], frame[frame.refiner == "none"], outcomes=outcomes)
        assert est.kind == "images" and est.seeds == LT_SEEDS and est.df < math.inf
        values.append(est.value), ses.append(est.se * SE_ERROR), crit.append(est.critical)
    values, ses, crit = np.array(values), np.array(ses), np.array(crit)
    spread = values.std(ddof=1)
    # the model errs upward by up to 12% here (each seed's stream re-draws images the others hold too,
    # which the shared part counts roughly), never downward: an SE 12% too small or too large fails
    assert 0.99 < math.sqrt(np.mean(ses**2)) / spread < 1.12
    miss = np.abs(values - values.mean()) > crit * ses
    assert 0.01 < miss.mean() < 0.075
    assert (np.abs(values - values.mean()) > 2 * ses).mean() > miss.mean() + 0.03


def test_a_gain_s_seed_term_is_the_spread_of_its_per_seed_gains():
    """The seed term of a gain is the variance of the per-seed gains, not the two sides' seed
    spreads added: a refined method and its baseline that move together from seed to seed have a
    gain with no seed spread."""
    rows, outcomes = [], {}
    for seed, hits_n in ((0, 700), (1, 800), (2, 900)):
        for refiner, extra in (("none", 0), ("dart", 50)):
            hits = np.arange(1000) < hits_n + extra
            o = CellOutcomes.from_stream(order=np.arange(1000), correct=hits, size=1000)
            key = f"{refiner}{seed}"
            rows.append({**{k: "" for k in SCHEMA}, "dataset": "sim", "shift": "lt", "shift_param": 1.0,
                         "corruption": "fog", "severity": 5, "method": "a", "refiner": refiner, "seed": seed,
                         "n": 1000, "accuracy": o.accuracy, "key": key, "inputs": "d"})
            outcomes[(key, "d")] = o
    frame = pd.DataFrame(rows)
    est = noise.difference(frame[frame.refiner == "dart"], frame[frame.refiner == "none"], outcomes=outcomes)
    assert est.value == pytest.approx(5.0) and est.seeds == 3
    # no seed spread; of the image noise only the part the seeds share is added: z_i is 1/3000 on each seed's
    # 50 gained images (disjoint across seeds), so Var(mean) = mean_s Var_s / 3 and the shared part is 0
    z = np.select([np.arange(1000) < 700, np.arange(1000) < 750, np.arange(1000) < 800, np.arange(1000) < 850,
                   np.arange(1000) < 900, np.arange(1000) < 950], [0, 1, 0, 1, 0, 1], 0) / 3000
    var_mean = 1000 / 999 * ((z - z.mean()) ** 2).sum() * 1e4
    var_seed = 1000 / 999 * 50 * (1 / 1000 - 0.05 / 1000) ** 2 * 1e4 + 1000 / 999 * 950 * (0.05 / 1000) ** 2 * 1e4
    assert est.se == pytest.approx(math.sqrt(max(0.0, (3 * var_mean - var_seed) / 2)), abs=1e-9)
    assert est.se < 0.01  # the additive rule (each side's spread, or the whole image variance) would give 0.38
    assert est.df == math.inf and est.critical == 2.0
    # a seed missing one cell is left out: the mean is over the seeds that cover every cell
    part = pd.concat([frame, frame[frame.seed == 2].assign(corruption="snow", key=lambda f: f.key + "s")])
    outcomes.update({(k + "s", "d"): outcomes[(k, "d")] for k in frame[frame.seed == 2].key})
    est2 = noise.difference(part[part.refiner == "dart"], part[part.refiner == "none"], outcomes=outcomes)
    assert est2.seeds == 1  # no seed covers both fog and snow but seed 2, so no seed term


def test_the_critical_multiple_is_the_t_quantile_of_2_se():
    assert noise.critical(df=math.inf) == 2.0
    assert noise.critical(df=2) == pytest.approx(4.527, abs=1e-3)
    assert noise.critical(df=1e6) == pytest.approx(2.0, abs=1e-4)
