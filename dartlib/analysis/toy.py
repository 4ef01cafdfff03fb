"""The 4-class Gaussian toy model of Section 2 and Appendix C.

Class i is N(mu_i + Delta, sigma^2 I_2) at test time with mu_1 = (d, beta d),
mu_2 = (-d, beta d), mu_3 = (d, -beta d), mu_4 = (-d, -beta d); the test prior is
[p, 1/4, 1/4, 1/2 - p]. The BN-adapted classifier is modelled as h(Norm(x)): centre x with the
test mixture mean, then apply the training Bayes classifier, which for equal training priors is
the quadrant rule (class 1: x1 > 0, x2 > 0; 2: x1 < 0, x2 > 0; 3: x1 > 0, x2 < 0;
4: x1 < 0, x2 < 0). Delta cancels in the centring, so the analytic results do not depend on it.

Classes are 0-indexed in arrays (row/column 0 is the paper's class 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

K_TOY = 4
# Quadrant of each predicted class: sign of x1 and of x2 where h predicts it (Appendix C.1).
_SIGN_X1 = np.array([1.0, -1.0, 1.0, -1.0])
_SIGN_X2 = np.array([1.0, 1.0, -1.0, -1.0])


def shifted_prior(p: float) -> np.ndarray:
    """The shifted test prior [p, 1/4, 1/4, 1/2 - p] of Section 2 (valid for 0 <= p <= 1/2)."""
    if not 0.0 <= p <= 0.5:
        raise ValueError(f"p must lie in [0, 1/2] so that the prior is a distribution, got {p}")
    return np.array([p, 0.25, 0.25, 0.5 - p])


def class_means(*, d: float, beta: float) -> np.ndarray:
    """The training class means mu_1..mu_4 as a (4, 2) array."""
    return np.stack([_SIGN_X1 * d, _SIGN_X2 * beta * d], axis=1)


def centred_means(p: float, *, d: float, beta: float) -> np.ndarray:
    """mu'_i = mu_i - sum_k q_k mu_k: class means after test-time mean centring (Appendix C.1).

    For class 1 this is ((3/2 - 2p) d, (3/2 - 2p) beta d), the paper's mu'_1.
    """
    mu = class_means(d=d, beta=beta)
    return mu - shifted_prior(p) @ mu


def _quadrant_probs(centred: np.ndarray, sigma: float) -> np.ndarray:
    """P[class i lands in the quadrant of class j] for means ``centred`` (rows i, columns j)."""
    zx = centred[:, :1] / sigma  # (4, 1)
    zy = centred[:, 1:] / sigma
    return norm.cdf(_SIGN_X1 * zx) * norm.cdf(_SIGN_X2 * zy)


def _check_params(d: float, beta: float, sigma: float) -> None:
    if d <= 0 or sigma <= 0:
        raise ValueError(f"d and sigma must be positive, got d={d}, sigma={sigma}")
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")


def confusion_matrix(p: float, *, d: float, beta: float, sigma: float) -> np.ndarray:
    """Analytic Pr[h(Norm(x)) = j | y = i] for all 16 (i, j) (Appendix C.1, extended).

    Each entry is a product of two normal CDFs because the coordinates are independent and the
    decision regions are quadrants; row i sums to 1.
    """
    _check_params(d, beta, sigma)
    return _quadrant_probs(centred_means(p, d=d, beta=beta), sigma)


def confusion_derivative(p: float, *, d: float, beta: float, sigma: float) -> np.ndarray:
    """d/dp of :func:`confusion_matrix` (every centred mean moves by (-2d, -2 beta d) per unit p)."""
    _check_params(d, beta, sigma)
    centred = centred_means(p, d=d, beta=beta)
    zx, zy = centred[:, :1] / sigma, centred[:, 1:] / sigma
    fx, fy = norm.cdf(_SIGN_X1 * zx), norm.cdf(_SIGN_X2 * zy)
    dfx = norm.pdf(zx) * _SIGN_X1 * (-2.0 * d / sigma)
    dfy = norm.pdf(zy) * _SIGN_X2 * (-2.0 * beta * d / sigma)
    return dfx * fy + fx * dfy


@dataclass(frozen=True)
class Simulation:
    """A Monte-Carlo confusion matrix with its delta-method standard errors."""

    matrix: np.ndarray  # (4, 4) row-normalised counts
    stderr: np.ndarray  # (4, 4)
    counts: np.ndarray  # (4,) samples per true class

    def z_scores(self, analytic: np.ndarray) -> np.ndarray:
        """(simulated - analytic) / stderr, entrywise."""
        return (self.matrix - analytic) / self.stderr


def simulate_confusion(
    p: float,
    *,
    d: float,
    beta: float,
    sigma: float,
    n: int,
    seed: int,
    shift: tuple[float, float] = (0.7, -1.3),
) -> Simulation:
    """Monte-Carlo estimate of :func:`confusion_matrix`.

    Draws ``n`` samples of the covariate-shifted mixture (class counts multinomial in the test
    prior, inputs N(mu_i + shift, sigma^2 I)), centres them with their own sample mean, and
    classifies by quadrant. The standard error of each entry combines the binomial error of the
    class-i frequency with the error of the sample mean used for centring (delta method,
    including their covariance), so that ``z_scores`` are standard normal to first order;
    the error is floored at one count (1 / n_i) for entries too rare for that approximation.
    """
    _check_params(d, beta, sigma)
    if n < 100:
        raise ValueError(f"n must be at least 100, got {n}")
    rng = np.random.default_rng(seed)
    prior = shifted_prior(p)
    mu = class_means(d=d, beta=beta) + np.asarray(shift, dtype=float)
    counts = rng.multinomial(n, prior)
    labels = np.repeat(np.arange(K_TOY), counts)
    x = mu[labels] + sigma * rng.standard_normal((n, 2))
    x -= x.mean(axis=0)
    pred = (x[:, 0] < 0).astype(np.int64) + 2 * (x[:, 1] < 0).astype(np.int64)
    joint = np.bincount(labels * K_TOY + pred, minlength=K_TOY * K_TOY).reshape(K_TOY, K_TOY)
    safe_counts = np.maximum(counts, 1)[:, None]
    matrix = joint / safe_counts

    # Delta method around the population quantities.
    centred = centred_means(p, d=d, beta=beta)
    zx, zy = centred[:, :1] / sigma, centred[:, 1:] / sigma
    fx, fy = norm.cdf(_SIGN_X1 * zx), norm.cdf(_SIGN_X2 * zy)
    px, py = norm.pdf(zx), norm.pdf(zy)
    prob = fx * fy
    # Gradient of P_ij w.r.t. the centring point m (raising m moves every sample by -m).
    grad = np.stack([-_SIGN_X1 * px * fy / sigma, -_SIGN_X2 * fx * py / sigma], axis=-1)
    # Cov(1[x in R_j], x | y = i) for x ~ N(mu'_i, sigma^2 I).
    cov_ind_x = np.stack([_SIGN_X1 * sigma * px * fy, _SIGN_X2 * sigma * fx * py], axis=-1)
    base = class_means(d=d, beta=beta)
    spread = base - prior @ base
    mixture_cov = sigma**2 * np.eye(2) + (spread * prior[:, None]).T @ spread
    var = (
        prob * (1.0 - prob) / safe_counts
        + np.einsum("ija,ab,ijb->ij", grad, mixture_cov, grad) / n
        + 2.0 * np.einsum("ija,ija->ij", grad, cov_ind_x) / n
    )
    # A frequency cannot be resolved finer than one count: floor the error at 1 / n_i, which
    # keeps entries with expected counts far below one (a single stray sample) honest.
    stderr = np.maximum(np.sqrt(np.maximum(var, 0.0)), 1.0 / safe_counts)
    return Simulation(matrix=matrix, stderr=stderr, counts=counts)


def properties(p: float, *, d: float, beta: float, sigma: float) -> dict[str, bool]:
    """Evaluate the three confusion-pattern properties of Section 2 at one point.

    (#1) Pr[1 -> i] > Pr[i -> 1] for i = 2, 3, 4; (#2) Pr[1 -> 2] > Pr[1 -> 3] > Pr[1 -> 4];
    (#3) d/dp Pr[1 -> 2] > d/dp Pr[1 -> 3].
    """
    cm = confusion_matrix(p, d=d, beta=beta, sigma=sigma)
    dcm = confusion_derivative(p, d=d, beta=beta, sigma=sigma)
    return {
        "#1": bool(all(cm[0, i] > cm[i, 0] for i in range(1, K_TOY))),
        "#2": bool(cm[0, 1] > cm[0, 2] > cm[0, 3]),
        "#3": bool(dcm[0, 1] > dcm[0, 2]),
    }


def property3_margin(p: float, *, d: float, beta: float, sigma: float) -> float:
    """a^2 - 2 ln(beta) / (beta^2 - 1) with a = (3/2 - 2p) d / sigma.

    (#3) holds exactly when this is positive: the difference of the two derivatives is
    proportional to phi(a) - beta phi(beta a). Since 2 ln(beta) / (beta^2 - 1) < 1 for every
    beta > 1 and a > d / (2 sigma) for p < 1/2, the paper's condition d > 2 sigma is sufficient.
    """
    a = (1.5 - 2.0 * p) * d / sigma
    return float(a * a - 2.0 * np.log(beta) / (beta * beta - 1.0))


def property_grid(
    *, ps: np.ndarray, betas: np.ndarray, d_over_sigma: np.ndarray
) -> pd.DataFrame:
    """(#1)-(#3) over a grid (sigma = 1, so d = d/sigma); one row per (p, beta, d)."""
    rows = []
    for ratio in d_over_sigma:
        for beta in betas:
            for p in ps:
                props = properties(float(p), d=float(ratio), beta=float(beta), sigma=1.0)
                rows.append({"d_over_sigma": float(ratio), "beta": float(beta), "p": float(p), **props})
    return pd.DataFrame(rows)


def _centring_matrix(prior: np.ndarray) -> np.ndarray:
    """I_K - 1_{K x 1} prior: the map mu -> mu - prior @ mu of Appendix C.2."""
    k = prior.shape[0]
    return np.eye(k) - np.outer(np.ones(k), prior)


def _check_distribution(name: str, prior: np.ndarray, k: int) -> np.ndarray:
    prior = np.asarray(prior, dtype=float)
    if prior.shape != (k,) or np.any(prior < 0) or not np.isclose(prior.sum(), 1.0):
        raise ValueError(f"{name} must be a distribution over {k} classes, got {prior}")
    return prior


def optimal_W(mu: np.ndarray, p_train: np.ndarray, q_test: np.ndarray) -> np.ndarray:
    """The least-squares W* of Appendix C.2.

    Minimises || mu^T (I - 1 q)^T - mu^T (I - 1 p)^T W ||_F. The paper writes the solution with
    an inverse of (I - 1p) mu mu^T (I - 1p)^T, but that K x K matrix always has rank <= K - 1
    ((I - 1p) annihilates the all-ones vector), so the minimiser is not unique: every
    minimiser differs by p-directed rows that leave all refined logits unchanged (logits of the
    model are orthogonal to p). We return the minimiser closest to the identity,
    W* = I + D^+ (C - D), which equals I when q = p.
    """
    mu = np.asarray(mu, dtype=float)
    k = mu.shape[0]
    p = _check_distribution("p_train", p_train, k)
    q = _check_distribution("q_test", q_test, k)
    adapted = mu.T @ _centring_matrix(p).T  # D: (dim, K)
    target = mu.T @ _centring_matrix(q).T  # C: (dim, K)
    return np.eye(k) + np.linalg.pinv(adapted) @ (target - adapted)


@dataclass(frozen=True)
class LinearLogits:
    """Mean-centred logits of the linear model of Appendix C.2 on a simulated test sample."""

    labels: np.ndarray  # (n,)
    adapted: np.ndarray  # (x - mean) mu^T (I - 1p)^T: test features, training-time classifier
    target: np.ndarray  # (x - mean) mu^T (I - 1q)^T: the paper's approximated target
    source: np.ndarray  # (x - p mu) mu^T (I - 1p)^T: the un-approximated target (source centring)


def simulate_linear_logits(
    mu: np.ndarray, p_train: np.ndarray, q_test: np.ndarray, *, sigma: float, n: int, seed: int
) -> LinearLogits:
    """Sample n points of the K-class mixture N(mu_i, sigma^2 I) under q and form its logits."""
    mu = np.asarray(mu, dtype=float)
    k, dim = mu.shape
    p = _check_distribution("p_train", p_train, k)
    q = _check_distribution("q_test", q_test, k)
    rng = np.random.default_rng(seed)
    labels = rng.choice(k, size=n, p=q)
    x = mu[labels] + sigma * rng.standard_normal((n, dim))
    centred = x - x.mean(axis=0)
    weights_p = mu.T @ _centring_matrix(p).T
    return LinearLogits(
        labels=labels,
        adapted=centred @ weights_p,
        target=centred @ mu.T @ _centring_matrix(q).T,
        source=(x - p @ mu) @ weights_p,
    )


def fit_W(adapted: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Numerical least squares: the W closest to I minimising ||target - adapted W||_F."""
    k = adapted.shape[1]
    delta, *_ = np.linalg.lstsq(adapted, target - adapted, rcond=None)
    return np.eye(k) + delta


def long_tailed_prior(k: int, *, rho: float) -> np.ndarray:
    """q_k proportional to rho^(-k/(K-1)), k = 0..K-1 (the CIFAR-10-LT shape of Appendix A)."""
    weights = float(rho) ** (-np.arange(k) / (k - 1))
    return weights / weights.sum()


def optimal_bias(mu: np.ndarray, p_train: np.ndarray, q_test: np.ndarray) -> np.ndarray:
    """The exact correction of the un-approximated problem of Appendix C.2.

    Centring test features with the test mean q mu instead of the training mean p mu shifts
    every logit vector by the same class-wise offset (p - q) mu mu^T (I - 1p)^T, so adding
    b* = (q - p) mu mu^T (I - 1p)^T (and W = I) restores the training-time logits.
    """
    mu = np.asarray(mu, dtype=float)
    k = mu.shape[0]
    p = _check_distribution("p_train", p_train, k)
    q = _check_distribution("q_test", q_test, k)
    return (q - p) @ mu @ mu.T @ _centring_matrix(p).T
