"""dartlib.analysis.toy: the closed forms of Appendix C, checked entry by entry."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from dartlib.analysis import toy

PHI = norm.cdf


def paper_class1_row(p: float, d: float, beta: float, sigma: float) -> np.ndarray:
    """Appendix C.1's three displayed formulas for Pr[h(Norm(x)) = j | y = 1], written out."""
    a = (1.5 - 2 * p) * d / sigma
    b = (1.5 - 2 * p) * beta * d / sigma
    to2 = PHI(-a) * (1 - PHI(-b))
    to3 = PHI(-b) * (1 - PHI(-a))
    to4 = PHI(-b) * PHI(-a)
    return np.array([1 - to2 - to3 - to4, to2, to3, to4])


@pytest.mark.parametrize("p,d,beta,sigma", [(0.3, 1.0, 2.0, 0.4), (0.45, 2.0, 1.3, 1.5), (0.26, 0.7, 3.0, 0.5)])
def test_class1_row_matches_appendix_closed_forms(p, d, beta, sigma):
    cm = toy.confusion_matrix(p, d=d, beta=beta, sigma=sigma)
    np.testing.assert_allclose(cm[0], paper_class1_row(p, d, beta, sigma), rtol=1e-12, atol=1e-15)


def test_class2_to_class1_matches_appendix():
    p, d, beta, sigma = 0.4, 1.0, 1.5, 0.6
    expected = (1 - PHI(-(-0.5 - 2 * p) * d / sigma)) * (1 - PHI(-(1.5 - 2 * p) * beta * d / sigma))
    assert toy.confusion_matrix(p, d=d, beta=beta, sigma=sigma)[1, 0] == pytest.approx(expected, rel=1e-12)


def test_centred_means_are_the_papers():
    p, d, beta = 0.35, 1.2, 1.7
    got = toy.centred_means(p, d=d, beta=beta)
    want = np.array(
        [
            [(1.5 - 2 * p) * d, (1.5 - 2 * p) * beta * d],
            [(-0.5 - 2 * p) * d, (1.5 - 2 * p) * beta * d],
            [(1.5 - 2 * p) * d, (-0.5 - 2 * p) * beta * d],
            [(-0.5 - 2 * p) * d, (-0.5 - 2 * p) * beta * d],
        ]
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_prior_and_rows():
    np.testing.assert_allclose(toy.shifted_prior(0.4), [0.4, 0.25, 0.25, 0.1])
    cm = toy.confusion_matrix(0.4, d=1.0, beta=2.0, sigma=0.8)
    np.testing.assert_allclose(cm.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(cm >= 0)
    with pytest.raises(ValueError, match="p must lie"):
        toy.shifted_prior(0.6)


def test_balanced_prior_gives_symmetric_unbiased_matrix():
    """At p = 1/4 centring restores the training Bayes classifier: errors are symmetric."""
    d, beta, sigma = 1.0, 1.5, 0.9
    cm = toy.confusion_matrix(0.25, d=d, beta=beta, sigma=sigma)
    np.testing.assert_allclose(cm, cm.T, atol=1e-15)
    assert cm[0, 1] == pytest.approx(PHI(-d / sigma) * PHI(beta * d / sigma), rel=1e-12)
    np.testing.assert_allclose(np.diag(cm), np.diag(cm)[0])


def test_head_class_errs_more_than_tail_class():
    cm = toy.confusion_matrix(0.45, d=1.0, beta=1.5, sigma=0.7)
    assert cm[0, 1] > cm[3, 2] and cm[0, 2] > cm[3, 1]
    assert cm[0, 0] < cm[3, 3]


def test_covariate_shift_cancels_and_simulation_agrees():
    p, d, beta, sigma = 0.4, 1.0, 1.4, 0.8
    analytic = toy.confusion_matrix(p, d=d, beta=beta, sigma=sigma)
    for shift in [(0.0, 0.0), (3.0, -5.0)]:
        sim = toy.simulate_confusion(p, d=d, beta=beta, sigma=sigma, n=1_000_000, seed=3, shift=shift)
        assert np.abs(sim.z_scores(analytic)).max() < 3.5
        assert sim.counts.sum() == 1_000_000


def test_simulation_is_deterministic_per_seed():
    kw = dict(d=1.0, beta=2.0, sigma=1.0, n=20_000)
    a = toy.simulate_confusion(0.3, seed=7, **kw)
    b = toy.simulate_confusion(0.3, seed=7, **kw)
    c = toy.simulate_confusion(0.3, seed=8, **kw)
    np.testing.assert_array_equal(a.matrix, b.matrix)
    assert not np.array_equal(a.matrix, c.matrix)


def test_simulation_detects_a_wrong_prior():
    """The check has power: the matrix for p = 0.45 is rejected by a sample drawn at p = 0.40."""
    sim = toy.simulate_confusion(0.40, d=1.0, beta=1.4, sigma=0.8, n=1_000_000, seed=0)
    wrong = toy.confusion_matrix(0.45, d=1.0, beta=1.4, sigma=0.8)
    assert np.abs(sim.z_scores(wrong)).max() > 10


def test_derivative_matches_finite_difference():
    p, h = 0.37, 1e-6
    kw = dict(d=1.1, beta=1.6, sigma=0.5)
    numeric = (toy.confusion_matrix(p + h, **kw) - toy.confusion_matrix(p - h, **kw)) / (2 * h)
    np.testing.assert_allclose(toy.confusion_derivative(p, **kw), numeric, rtol=1e-5, atol=1e-9)


def test_properties_hold_in_the_papers_region_and_3_can_fail_outside():
    grid = toy.property_grid(
        ps=np.linspace(0.26, 0.49, 12), betas=np.array([1.05, 1.5, 3.0]), d_over_sigma=np.array([2.05, 3.0])
    )
    assert grid[["#1", "#2", "#3"]].all().all()
    outside = toy.properties(0.45, d=0.5, beta=1.05, sigma=1.0)
    assert outside == {"#1": True, "#2": True, "#3": False}
    assert toy.property3_margin(0.45, d=0.5, beta=1.05, sigma=1.0) < 0
    assert toy.property3_margin(0.45, d=2.5, beta=1.05, sigma=1.0) > 0


def test_property1_is_an_equality_at_balance():
    assert toy.properties(0.25, d=1.0, beta=2.0, sigma=0.5)["#1"] is False


@pytest.fixture()
def linear_model():
    rng = np.random.default_rng(0)
    mu = rng.normal(size=(6, 9))
    p = np.full(6, 1 / 6)
    q = toy.long_tailed_prior(6, rho=50)
    return mu, p, q


def test_optimal_w_identity_without_shift(linear_model):
    mu, p, _ = linear_model
    np.testing.assert_allclose(toy.optimal_W(mu, p, p), np.eye(6), atol=1e-10)
    skewed = np.array([0.3, 0.1, 0.1, 0.2, 0.2, 0.1])
    np.testing.assert_allclose(toy.optimal_W(mu, skewed, skewed), np.eye(6), atol=1e-10)


def test_optimal_w_matches_numerical_fit(linear_model):
    mu, p, q = linear_model
    w = toy.optimal_W(mu, p, q)
    logits = toy.simulate_linear_logits(mu, p, q, sigma=1.0, n=5000, seed=1)
    fit = toy.fit_W(logits.adapted, logits.target)
    assert np.linalg.norm(fit - w) / np.linalg.norm(w) < 1e-6
    np.testing.assert_allclose(logits.adapted @ w, logits.target, atol=1e-8)
    assert not np.allclose(w, np.eye(6), atol=1e-3)


def test_optimal_w_changes_no_prediction_but_bias_restores_training_logits(linear_model):
    mu, p, q = linear_model
    logits = toy.simulate_linear_logits(mu, p, q, sigma=1.0, n=200_000, seed=2)
    refined = logits.adapted @ toy.optimal_W(mu, p, q)
    np.testing.assert_array_equal(refined.argmax(1), logits.adapted.argmax(1))
    restored = logits.adapted + toy.optimal_bias(mu, p, q)
    scale = np.abs(logits.source).mean()
    assert np.abs(restored - logits.source).max() < 0.05 * scale
    assert np.mean(restored.argmax(1) == logits.labels) > np.mean(logits.adapted.argmax(1) == logits.labels)


def test_optimal_w_rejects_bad_priors(linear_model):
    mu, p, _ = linear_model
    with pytest.raises(ValueError, match="q_test"):
        toy.optimal_W(mu, p, np.full(6, 0.2))


def test_long_tailed_prior_shape():
    q = toy.long_tailed_prior(10, rho=100)
    assert q.sum() == pytest.approx(1.0)
    assert q[0] / q[-1] == pytest.approx(100.0)
    assert np.all(np.diff(q) < 0)
