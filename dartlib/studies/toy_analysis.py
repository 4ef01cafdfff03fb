"""The checks of the Gaussian toy model (Section 2): the analytic confusion matrix against
a Monte-Carlo simulation (Appendix C.1), and the least-squares W* of Appendix C.2 against a
numerical fit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dartlib.analysis import toy


@dataclass(frozen=True)
class ConfusionCheck:
    """The analytic matrix, the simulated one and their z-scores, with one row per entry."""

    analytic: np.ndarray
    simulated: np.ndarray
    z: np.ndarray
    table: pd.DataFrame


def confusion_check(p: float, *, d: float, beta: float, sigma: float, n: int, seed: int) -> ConfusionCheck:
    """The 4 x 4 confusion matrix of h(Norm(x)) in closed form (Appendix C.1, extended to every
    entry) and simulated with ``n`` samples; each entry's z-score uses the simulation's stderr."""
    analytic = toy.confusion_matrix(p, d=d, beta=beta, sigma=sigma)
    sim = toy.simulate_confusion(p, d=d, beta=beta, sigma=sigma, n=n, seed=seed)
    z = sim.z_scores(analytic)
    table = pd.DataFrame([{"p": p, "d": d, "beta": beta, "sigma": sigma, "n": n, "seed": seed,
                           "true_class": i + 1, "pred_class": j + 1, "analytic": analytic[i, j],
                           "simulated": sim.matrix[i, j], "stderr": sim.stderr[i, j], "z": z[i, j]}
                          for i in range(4) for j in range(4)])
    return ConfusionCheck(analytic=analytic, simulated=sim.matrix, z=z, table=table)


@dataclass(frozen=True)
class OptimalWCheck:
    """W* in closed form, its relative distance to the numerical fit, and the accuracies (%) of
    the adapted, W*-corrected, b*-corrected and training-time logits."""

    w_star: np.ndarray
    rel_err: float
    accuracy: dict[str, float]

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"quantity": "rel_err_W", "value": self.rel_err}]
                            + [{"quantity": f"accuracy {k}", "value": v} for k, v in self.accuracy.items()])


def optimal_w_check(*, k: int = 10, dim: int = 16, rho: float = 100, n: int = 20000, seed: int) -> OptimalWCheck:
    """Appendix C.2 on a linear model with ``k`` random class means in ``dim`` dimensions, a
    uniform training prior and a long-tailed test prior with ratio ``rho``."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(k, dim))
    p_train = np.full(k, 1.0 / k)
    q_test = toy.long_tailed_prior(k, rho=rho)
    w_star = toy.optimal_W(mu, p_train, q_test)
    logits = toy.simulate_linear_logits(mu, p_train, q_test, sigma=1.0, n=n, seed=seed)
    w_fit = toy.fit_W(logits.adapted, logits.target)
    rel_err = float(np.linalg.norm(w_fit - w_star) / np.linalg.norm(w_star))
    if not np.allclose(toy.optimal_W(mu, p_train, p_train), np.eye(k), atol=1e-10):
        raise AssertionError("W* differs from I although the test prior equals the training prior")
    b_star = toy.optimal_bias(mu, p_train, q_test)

    def accuracy(values: np.ndarray) -> float:
        return 100.0 * np.mean(values.argmax(axis=1) == logits.labels)

    acc = {"adapted": accuracy(logits.adapted), "adapted W*": accuracy(logits.adapted @ w_star),
           "adapted + b*": accuracy(logits.adapted + b_star), "training-time": accuracy(logits.source)}
    return OptimalWCheck(w_star=w_star, rel_err=rel_err, accuracy=acc)
