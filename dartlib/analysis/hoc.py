"""HOC (Zhu et al., 2021): estimating a label-noise transition matrix from the consensus of
nearest neighbours' labels, applied to BN-adapted predictions (Appendix E).

Treat the BN-adapted classifier's predictions as noisy labels of the test samples. If a sample and
its two nearest neighbours in feature space share a true class ("clusterability"), the joint
frequencies of their noisy labels are moments of the class prior p and the transition matrix
T[i, j] = P(noisy j | true i):

    c1[j]       = sum_i p_i T_ij
    c2[j, l]    = sum_i p_i T_ij T_il
    c3[j, l, m] = sum_i p_i T_ij T_il T_im

HOC fits p and T to the empirical c1, c2, c3. The paper's point: BN-adapted features cluster by
*predicted* class, so neighbours agree with each other's mistakes and HOC returns a T close to the
identity, far from the true confusion matrix that label shift produces.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F


def nearest_neighbours(features: torch.Tensor, *, k: int = 2, chunk: int = 2048) -> torch.Tensor:
    """Indices (N x k) of each row's ``k`` nearest other rows by cosine similarity."""
    x = F.normalize(features.float(), dim=1)
    out = []
    for start in range(0, len(x), chunk):
        sim = x[start : start + chunk] @ x.T
        rows = torch.arange(start, min(start + chunk, len(x)))
        sim[torch.arange(len(rows)), rows] = -float("inf")  # not itself
        out.append(sim.topk(k, dim=1).indices)
    return torch.cat(out)


def consensus(noisy: np.ndarray, neighbours: np.ndarray, num_classes: int) -> tuple[torch.Tensor, ...]:
    """Empirical first-, second- and third-order label consensus of (sample, 1st NN, 2nd NN)."""
    k = num_classes
    a, b, c = noisy, noisy[neighbours[:, 0]], noisy[neighbours[:, 1]]
    c1 = np.bincount(a, minlength=k) / len(a)
    c2 = np.bincount(a * k + b, minlength=k * k).reshape(k, k) / len(a)
    c3 = np.bincount((a * k + b) * k + c, minlength=k ** 3).reshape(k, k, k) / len(a)
    return tuple(torch.as_tensor(v, dtype=torch.float64) for v in (c1, c2, c3))


def fit_transition(c1: torch.Tensor, c2: torch.Tensor, c3: torch.Tensor, *, steps: int = 1500, lr: float = 0.1,
                   init_diagonal: float = 2.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(T, p) minimising the squared error of the three consensus equations; rows of T and p
    are softmax-parameterised, T starts diagonally dominant (logits ``init_diagonal`` * I)."""
    k = len(c1)
    gen = torch.Generator().manual_seed(seed)
    logits_t = (init_diagonal * torch.eye(k, dtype=torch.float64) + 0.01 * torch.randn(k, k, generator=gen, dtype=torch.float64))
    logits_t.requires_grad_(True)
    logits_p = torch.zeros(k, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([logits_t, logits_p], lr=lr)
    for _ in range(steps):
        t, p = logits_t.softmax(1), logits_p.softmax(0)
        e1 = p @ t
        e2 = torch.einsum("i,ij,il->jl", p, t, t)
        e3 = torch.einsum("i,ij,il,im->jlm", p, t, t, t)
        loss = (e1 - c1).pow(2).sum() + (e2 - c2).pow(2).sum() + (e3 - c3).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return logits_t.detach().softmax(1).numpy(), logits_p.detach().softmax(0).numpy()


def hoc_estimate(features: torch.Tensor, noisy: np.ndarray, num_classes: int, *, steps: int = 1500,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """HOC's estimate (T, p) from features and noisy labels (here: BN-adapted predictions)."""
    neighbours = nearest_neighbours(features).numpy()
    return fit_transition(*consensus(np.asarray(noisy), neighbours, num_classes), steps=steps, seed=seed)


def transition_matrix(true: np.ndarray, noisy: np.ndarray, num_classes: int) -> np.ndarray:
    """The true T[i, j] = P(noisy j | true i) (rows of absent classes are left at zero)."""
    counts = np.bincount(true * num_classes + noisy, minlength=num_classes ** 2).reshape(num_classes, num_classes)
    rows = counts.sum(1, keepdims=True)
    return np.divide(counts, rows, out=np.zeros(counts.shape, dtype=float), where=rows > 0)
