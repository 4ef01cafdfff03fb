"""Figures of the 4-class Gaussian toy model (Section 2, Appendix C)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from dartlib.analysis import toy

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
    ax.legend(loc="lower left", fontsize=7, markerscale=2, framealpha=0.9)


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
