"""HOC's consensus estimator recovers a transition matrix when neighbours share true classes."""

from __future__ import annotations

import numpy as np
import torch

from dartlib.analysis.hoc import consensus, fit_transition, hoc_estimate, nearest_neighbours, transition_matrix


def test_nearest_neighbours_exclude_the_sample_itself():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    nn = nearest_neighbours(x, k=1, chunk=3)
    assert nn[:, 0].tolist() == [1, 0, 3, 2]


def test_exact_moments_give_back_t_and_p():
    t = np.array([[0.8, 0.2, 0.0], [0.1, 0.7, 0.2], [0.0, 0.3, 0.7]])
    p = np.array([0.5, 0.3, 0.2])
    c1 = torch.tensor(p @ t)
    c2 = torch.tensor(np.einsum("i,ij,il->jl", p, t, t))
    c3 = torch.tensor(np.einsum("i,ij,il,im->jlm", p, t, t, t))
    t_hat, p_hat = fit_transition(c1, c2, c3, steps=3000)
    assert np.abs(t_hat - t).max() < 0.03 and np.abs(p_hat - p).max() < 0.03


def test_clusterable_features_with_random_label_noise():
    """Features cluster by true class; labels flipped at random: HOC recovers T, the identity is far off."""
    rng = np.random.default_rng(0)
    k, n = 4, 4000
    true = rng.integers(0, k, n)
    centres = rng.normal(size=(k, 16)) * 5
    feats = torch.tensor(centres[true] + rng.normal(size=(n, 16)), dtype=torch.float32)
    t = np.full((k, k), 0.1) + 0.6 * np.eye(k)
    noisy = np.array([rng.choice(k, p=t[c]) for c in true])
    t_hat, _ = hoc_estimate(feats, noisy, k, steps=2000)
    assert np.abs(t_hat - transition_matrix(true, noisy, k)).max() < 0.05
    assert np.abs(np.eye(k) - t).max() > 0.25


def test_true_transition_matrix_rows():
    t = transition_matrix(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), 3)
    assert t.tolist() == [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_consensus_frequencies_sum_to_one():
    noisy = np.array([0, 1, 1, 2, 0])
    nn = np.array([[1, 2], [2, 3], [1, 0], [2, 1], [1, 3]])
    c1, c2, c3 = consensus(noisy, nn, 3)
    assert float(c1.sum()) == 1.0 and abs(float(c2.sum()) - 1) < 1e-12 and abs(float(c3.sum()) - 1) < 1e-12
    assert c2[0, 1] == 2 / 5  # (0 with first neighbour 1) happens for samples 0 and 4
