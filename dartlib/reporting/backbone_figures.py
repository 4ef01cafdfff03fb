"""The backbone-strength study's figure (notebook 14, :mod:`dartlib.experiments.backbone_study`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.reporting.figures import ANNOTATION_SIZE, WIDTH, save_figure


def plot_study(points: pd.DataFrame, *, profile: str):
    """Figure: DART's cost at rho = 1 and its gains at IR 50 / 5000 against BNAdapt's accuracy,
    one point per (backbone, severity), labelled."""
    gains = [c for c in points.columns if c.endswith("_gain")]
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.6))
    markers = {"resnet26-w8": "s", "resnet26-w16": "o", "resnet26": "D"}
    names = {"resnet26-w8": "width 8", "resnet26-w16": "width 16", "resnet26": "width 64 (gpu)"}
    panels = [(axes[0], "rho1_cost", "tab:green", "")] + [
        (axes[1], g, c, f"IR {g[2:-5]}, ") for g, c in zip(gains, ["tab:blue", "tab:purple"])]
    for ax, column, colour, prefix in panels:
        for arch, part in points.sort_values("severity").groupby("arch", sort=False):
            ax.plot(part["bnadapt"], part[column], marker=markers.get(arch, "o"), color=colour,
                    ls="-" if len(part) > 1 else "none", label=f"{prefix}{names.get(arch, arch)}")
            for x, y, sev in zip(part["bnadapt"], part[column], part["severity"]):
                ax.annotate(f"s{sev}", (x, y), textcoords="offset points", xytext=(3, 4), fontsize=ANNOTATION_SIZE)
        ax.set_xlabel("BNAdapt accuracy at rho = 1 (%)")
    axes[0].axhline(0.0, color="grey", lw=0.8)
    axes[0].set_ylabel("DART's cost at rho = 1 (points)")
    axes[1].set_ylabel("DART's gain over BNAdapt (points)")
    for ax in axes:
        ax.legend(loc="best", frameon=False)
    fig.suptitle("backbone strength: ResNet-26 width 8 and 64 at severity 5, width 16 at severities 1-5 (s1-s5)")
    save_figure(fig, profile=profile, name="backbone_study")
    return fig
