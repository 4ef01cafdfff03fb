"""Accuracy figures outside Table 1: ablation gains, sensitivity curves, more settings, online
imbalance and the backbone study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.studies.ablations import VARIANTS
from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import ANNOTATION_SIZE, HALF_WIDTH, WIDTH, row_colours, save_figure
from dartlib.reporting.accuracy_tables import mixed_layout
from dartlib.reporting.tables import row_label, with_row_labels


def plot_variant_gains(*, ours: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Bars of each variant's accuracy minus BNAdapt's (``ours``: refiner x column means), saved
    as ``figures/<profile>/ablations_gain``."""
    gain = ours.drop(index="none") - ours.loc["none"]
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4))
    gain.reindex(list(VARIANTS)).T.plot.bar(ax=ax, width=0.85)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylabel("gain over BNAdapt (points)")
    ax.set_xlabel("")
    ax.set_title(f"DART variants on {settings['corrupted_dataset']} ({settings.profile} profile, "
                 f"{settings['ablation_epochs']} epoch(s))")
    ax.legend(ncol=4)
    save_figure(fig, profile=settings.profile, name="ablations_gain")
    return fig


def plot_sensitivity(*, alpha_frame: pd.DataFrame, batch_frame: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Left: BNAdapt+DART's accuracy per alpha and rho (dotted: BNAdapt); right: each method's
    accuracy per test batch size on balanced streams. The left panel's colours are shades of grey
    by rho, the right panel's the methods' own colours (figures.row_colours): no colour means two
    things. Saved as ``figures/<profile>/sensitivity``."""
    alphas = settings["alpha_values"]
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.4))
    bn = alpha_frame[alpha_frame.method == "bnadapt"].pivot_table(index="refiner", columns="shift_param",
                                                                 values="accuracy")
    shades = plt.cm.Greys(np.linspace(0.45, 0.95, len(bn.columns)))
    for rho, shade, marker in zip(bn.columns, shades, "os^vD"):
        values = [bn.loc[f"DART (alpha={a:g})", rho] for a in alphas]
        axes[0].plot(range(len(alphas)), values, marker=marker, color=shade, label=f"ρ={rho:g}")
        axes[0].axhline(bn.loc["none", rho], ls=":", color=shade)
    axes[0].set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
    axes[0].set_xlabel("alpha (dotted: BNAdapt)")
    axes[0].set_ylabel("BNAdapt+DART accuracy (%)")
    axes[0].legend(title="BNAdapt+DART")
    by_batch = with_row_labels(batch_frame)
    curves = by_batch.pivot_table(index="column", columns="row", values="accuracy")
    colours = row_colours(list(by_batch.row.unique()))
    for label in by_batch.row.unique():  # the grid's order, not A-Z
        axes[1].plot(curves.index, curves[label], marker="o", label=label, color=colours[label])
    axes[1].set_xscale("log")
    axes[1].legend(title=None, loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside: inside it hid curves
    axes[1].set_xlabel("test batch size")
    axes[1].set_ylabel("accuracy (%), balanced stream")
    fig.suptitle(f"sensitivity ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="sensitivity")
    return fig


def _with_corruption_count(frame: pd.DataFrame) -> pd.DataFrame:
    """Each row label followed by how many corruptions its mean covers: the profiles run TENT on
    fewer corruptions than BNAdapt, so the two curves are means over different sets."""
    counts = frame.groupby("row").corruption.nunique()
    return frame.assign(row=[f"{row} ({counts[row]} corruption{'' if counts[row] == 1 else 's'})" for row in frame.row])


def plot_more_settings(*, imb: pd.DataFrame, mixed: pd.DataFrame, settings: Settings) -> plt.Figure:
    """BNAdapt and TENT (+DART) per IR, and every method on both mixed-domain streams; saved as
    ``figures/<profile>/more_settings``."""
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.8))
    curve = _with_corruption_count(with_row_labels(imb[imb.method.isin(["bnadapt", "tent"])]))
    curve.pivot_table(index="shift_param", columns="row", values="accuracy").plot(ax=axes[0], marker="o", logx=True)
    axes[0].set_xlabel("imbalance ratio (IR)")
    axes[0].set_ylabel("accuracy (%), mean over corruptions")
    axes[0].set_title("CIFAR-10C-imb protocol")
    axes[0].legend(title="method (corruptions averaged)")
    bars = with_row_labels(mixed_layout(mixed))
    bars = bars.pivot_table(index="row", columns="column", values="accuracy").reindex(bars.row.unique())
    bars.plot.bar(ax=axes[1])
    axes[1].set_xlabel("method")
    axes[1].set_ylabel("accuracy (%)")
    axes[1].set_title("mixed domains")
    # beside the axes: inside, the legend covered the tallest bars
    axes[1].legend(title="test stream", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{settings['corrupted_dataset']} ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="more_settings")
    return fig


def plot_online_imbalance(*, results: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Accuracy per IR of the BNAdapt family, in the grid's order and each method's colour
    (figures.row_colours); saved as ``figures/<profile>/online_imbalance``."""
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 3.6))
    rows = results[results.method.isin(["noadapt", "bnadapt"])].assign(
        row=lambda f: [row_label(m, r) for m, r in zip(f.method, f.refiner)])
    curves = rows.pivot_table(index="shift_param", columns="row", values="accuracy")[list(rows.row.unique())]
    colours = row_colours(list(curves.columns))
    for label in curves.columns:
        ax.plot(curves.index, curves[label], marker="o", label=label, color=colours[label])
    ax.set_xscale("log")
    ax.legend(title=None)
    ax.set_xlabel("imbalance ratio (IR)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"online imbalance, {settings['corrupted_dataset']} ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="online_imbalance")
    return fig


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
        # two curves share the right panel: the lower one (IR 50) is labelled below its points, the
        # upper one (IR 5000) above, so that two labels of one backbone never sit on each other
        below = ax is axes[1] and column == gains[0] and len(gains) > 1
        for arch, part in points.sort_values("severity").groupby("arch", sort=False):
            ax.plot(part["bnadapt"], part[column], marker=markers.get(arch, "o"), color=colour,
                    ls="-" if len(part) > 1 else "none", label=f"{prefix}{names.get(arch, arch)}")
            for x, y, sev in zip(part["bnadapt"], part[column], part["severity"]):
                ax.annotate(f"s{sev}", (x, y), textcoords="offset points", xytext=(3, -5 if below else 4),
                            va="top" if below else "baseline", fontsize=ANNOTATION_SIZE)
        ax.set_xlabel("BNAdapt accuracy at rho = 1 (%)")
    axes[0].axhline(0.0, color="grey", lw=0.8)
    axes[0].set_ylabel("DART's cost at rho = 1 (points)")
    axes[1].set_ylabel("DART's gain over BNAdapt (points)")
    for ax in axes:
        ax.legend(loc="best", frameon=False)
    fig.suptitle("backbone strength: ResNet-26 width 8 and 64 at severity 5, width 16 at severities 1-5 (s1-s5)")
    save_figure(fig, profile=profile, name="backbone_study")
    return fig
