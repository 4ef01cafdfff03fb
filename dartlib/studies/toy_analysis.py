"""The checks of the Gaussian toy model (Section 2): the analytic confusion matrix against
a Monte-Carlo simulation (Appendix C.1), and the least-squares W* of Appendix C.2 against a
numerical fit.

Its figures: the illustration and class-1 curves, the confusion check and W*."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.analysis import toy
from dartlib.reporting.figures import HALF_WIDTH, SIGNED, WIDTH, confusion_heatmap, save_figure


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


CLASS_NAMES = ("1", "2", "3", "4")


def plot_illustration(
    ax: plt.Axes, p: float, *, d: float, beta: float, sigma: float, n_points: int, seed: int
) -> None:
    """Appendix C's illustration: mean-centred samples, the Bayes boundaries (the axes), the
    centred means mu'_i, and the regions where class 1 is misclassified (hatched)."""
    rng = np.random.default_rng(seed)
    prior = toy.shifted_prior(p)
    centred = toy.centred_means(p, d=d, beta=beta)
    labels = rng.choice(toy.K_TOY, size=n_points, p=prior)
    x = centred[labels] + sigma * rng.standard_normal((n_points, 2))
    lim_x = 1.15 * np.abs(x[:, 0]).max()
    lim_y = 1.15 * np.abs(x[:, 1]).max()
    # Class 1 -> 2 region (x1 < 0, x2 > 0) and class 1 -> 3 region (x1 > 0, x2 < 0).
    ax.fill_between([-lim_x, 0], 0, lim_y, facecolor="none", edgecolor="tab:red", hatch="///",
                    lw=0, label="class 1 predicted as 2")
    ax.fill_between([0, lim_x], -lim_y, 0, facecolor="none", edgecolor="tab:green", hatch="\\\\\\",
                    lw=0, label="class 1 predicted as 3")
    colors = plt.get_cmap("tab10").colors
    for i in range(toy.K_TOY):
        pts = x[labels == i]
        ax.scatter(pts[:, 0], pts[:, 1], s=4, alpha=0.35, color=colors[i],
                   label=f"class {i + 1} (q={prior[i]:.2f})")
        ax.scatter(*centred[i], marker="X", s=90, color=colors[i], edgecolor="black", zorder=5)
        ax.annotate(f"$\\mu'_{i + 1}$", centred[i], xytext=(6, 6), textcoords="offset points")
    ax.axhline(0, color="black", lw=1)
    ax.axvline(0, color="black", lw=1)
    ax.set_xlim(-lim_x, lim_x)
    ax.set_ylim(-lim_y, lim_y)
    ax.set_xlabel("$x_1$ (after mean centring)")
    ax.set_ylabel("$x_2$ (after mean centring)")
    ax.set_title(f"p = {p}, d = {d}, beta = {beta}, sigma = {sigma}")
    ax.legend(loc="lower left", markerscale=2, framealpha=0.9)


def plot_class1_curves(
    ax: plt.Axes, ps: np.ndarray, *, d: float, beta: float, sigma: float
) -> None:
    """Pr[h(Norm(x)) = j | y = 1] against p for j = 2, 3, 4."""
    matrices = np.stack([toy.confusion_matrix(float(p), d=d, beta=beta, sigma=sigma) for p in ps])
    for j, style in zip((1, 2, 3), ("-", "--", ":")):
        ax.plot(ps, matrices[:, 0, j], style, label=f"j = {j + 1}")
    ax.set_yscale("log")
    ax.set_xlabel("p (test prior of class 1)")
    ax.set_ylabel("Pr[prediction = j | y = 1]")
    ax.set_title(f"d = {d}, beta = {beta}, sigma = {sigma}")
    ax.legend()


def show_confusion_check(check: ConfusionCheck, *, p: float, d: float, beta: float, sigma: float, n: int, profile: str) -> None:
    """The analytic and simulated confusion matrices of a :class:`dartlib.studies.toy_analysis.ConfusionCheck`
    side by side."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.6))
    confusion_heatmap(axes[0], check.analytic, labels=CLASS_NAMES, fmt=".4f", title="analytic")
    confusion_heatmap(axes[1], check.simulated, labels=CLASS_NAMES, fmt=".4f", title=f"simulated, n = {n:,}")
    fig.suptitle(f"Pr[h(Norm(x)) = j | y = i], p = {p}, d = {d}, beta = {beta}, sigma = {sigma}")
    save_figure(fig, profile=profile, name="toy_confusion_analytic_vs_simulated")
    plt.show()


def show_illustration_and_curves(p: float, *, d: float, beta: float, sigma: float, seed: int, profile: str) -> None:
    """Appendix C's illustration beside the class-1 confusion curves against p."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.4))
    plot_illustration(axes[0], p, d=d, beta=beta, sigma=sigma, n_points=2000, seed=seed)
    plot_class1_curves(axes[1], np.linspace(0.25, 0.49, 97), d=d, beta=beta, sigma=sigma)
    save_figure(fig, profile=profile, name="toy_illustration_and_curves")
    plt.show()


def show_optimal_w(w_star: np.ndarray, *, profile: str) -> None:
    """Heatmap of Appendix C.2's W*."""
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 4.4))
    confusion_heatmap(ax, w_star, fmt=".2f", scale=SIGNED,
                      title="W* (uniform training prior, long-tailed test prior, rho = 100)")
    ax.set_xlabel("column k")
    ax.set_ylabel("row j")
    save_figure(fig, profile=profile, name="toy_optimal_w")
    plt.show()
