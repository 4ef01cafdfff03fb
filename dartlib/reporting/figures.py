"""One figure style for the whole suite, and deterministic PDF + PNG output.

Every notebook calls :func:`apply_style` once and saves through :func:`save_figure`, which
writes ``figures/<profile>/<name>.pdf`` and ``.png`` with timestamps and tool versions
stripped, so that the same data gives the same bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from dartlib.paths import figures_dir

PALETTE = "colorblind"
_PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
_PNG_METADATA = {"Software": None}


def apply_style() -> None:
    """Seaborn's paper context on a white grid, colour-blind palette, embedded TrueType fonts."""
    # fontTools warns about the zeroed font timestamps of reproducible PDFs; they are intended.
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE, font_scale=1.1)
    mpl.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "savefig.bbox": "tight",
            "pdf.fonttype": 42,
            "axes.titlesize": "medium",
            "svg.hashsalt": "dartlib",
        }
    )


def save_figure(fig: plt.Figure, *, profile: str, name: str) -> list[Path]:
    """Write ``figures/<profile>/<name>.pdf`` and ``.png``; returns both paths."""
    out = figures_dir(profile)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    fig.savefig(paths[0], metadata=_PDF_METADATA)
    fig.savefig(paths[1], metadata=_PNG_METADATA)
    return paths


def confusion_heatmap(
    ax: plt.Axes,
    matrix: np.ndarray,
    *,
    labels: Sequence[str] | None = None,
    highlight_above: float | None = None,
    annotate: bool = True,
    fmt: str = ".2f",
    title: str | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    cmap: str = "Blues",
    center: float | None = None,
    square: bool = True,
) -> None:
    """A heatmap of a K x K matrix, by default a row-normalised confusion matrix (rows: true
    class, columns: prediction).

    ``highlight_above`` boxes in red the off-diagonal cells above that rate (Figure 1 uses 0.11).
    """
    matrix = np.asarray(matrix, dtype=float)
    k = matrix.shape[0]
    ticks = list(labels) if labels is not None else [str(i) for i in range(k)]
    sns.heatmap(
        matrix,
        ax=ax,
        vmin=vmin,
        vmax=vmax,
        cmap=cmap,
        center=center,
        annot=annotate,
        fmt=fmt,
        annot_kws={"fontsize": 7 if k > 6 else 9},
        cbar=False,
        square=square,
        # a K x 1 column (DART's b) has no class columns: K x-labels would stretch it to K cells
        xticklabels=ticks if matrix.shape[1] == k else False,
        yticklabels=ticks,
    )
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    if title:
        ax.set_title(title)
    if highlight_above is not None:
        for i in range(k):
            for j in range(k):
                if i != j and matrix[i, j] > highlight_above:
                    ax.add_patch(plt.Rectangle((j, i), 1, 1, fill=False, edgecolor="red", lw=1.5))
