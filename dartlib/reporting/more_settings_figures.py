"""Notebook 09's figure: accuracy against IR on CIFAR-10C-imb, and the mixed-domain streams."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import WIDTH, save_figure
from dartlib.reporting.more_settings_tables import mixed_layout
from dartlib.reporting.tables import with_row_labels


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
