"""One figure style for the whole suite, and deterministic PDF + PNG output.

Every notebook calls :func:`apply_style` once and saves through :func:`save_figure`, which
writes ``figures/<profile>/<name>.pdf`` and ``.png`` with timestamps and tool versions
stripped, so that the same data gives the same bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from dartlib.paths import figures_dir

PALETTE = "colorblind"
_PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
_PNG_METADATA = {"Software": None}

# The one figure style. Sizes in inches: a figure is WIDTH wide (two or more panels side by side)
# or HALF_WIDTH (one panel); heights vary with the panels. Fonts in points, the same in every
# figure; the book shows each PNG at the same scale (width / WIDTH of the text column), so a
# 9-point label reads the same size in every figure. Layout: matplotlib's constrained layout for
# every figure (suptitles, panel titles, tick labels and outside legends kept apart).
WIDTH = 10.0
HALF_WIDTH = 5.5
SAVE_DPI = 150
FONT_SIZES = {"font.size": 9.0, "axes.titlesize": 10.0, "axes.labelsize": 9.0, "xtick.labelsize": 8.0,
              "ytick.labelsize": 8.0, "legend.fontsize": 8.0, "legend.title_fontsize": 8.0,
              "figure.titlesize": 11.0}
ANNOTATION_SIZE = 7.0  # numbers and labels written inside a panel (heatmap cells, point labels)
LAYOUT = "constrained"

# One colour per method row wherever a figure draws methods (Figure 3's caption: BNAdapt orange,
# BNAdapt+DART green; NoAdapt blue as in Figure 2); indices into the colour-blind palette.
_ROW_COLOUR_INDEX = {"NoAdapt": 0, "BNAdapt": 1, "BNAdapt+DART": 2, "TENT": 3, "BNAdapt+DART-split": 4,
                     "TENT+DART": 6, "PL": 5, "PL+DART": 8}


def row_colours(labels: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """A colour for each method row label: the fixed colour of the rows above, the palette's unused
    colours for any other row (in the order given)."""
    palette = sns.color_palette(PALETTE, 10)
    spare = [c for i, c in enumerate(palette) if i not in _ROW_COLOUR_INDEX.values()]
    out = {}
    for label in labels:
        if label in _ROW_COLOUR_INDEX:
            out[label] = palette[_ROW_COLOUR_INDEX[label]]
        else:
            out[label] = spare[len([lab for lab in out if lab not in _ROW_COLOUR_INDEX]) % len(spare)]
    return out


def apply_style() -> None:
    """Seaborn's white grid, colour-blind palette, the fixed font sizes above, constrained layout,
    embedded TrueType fonts."""
    # fontTools warns about the zeroed font timestamps of reproducible PDFs; they are intended.
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE)
    mpl.rcParams.update(
        {
            **FONT_SIZES,
            "figure.dpi": 100,
            "figure.constrained_layout.use": True,
            "savefig.dpi": SAVE_DPI,
            "savefig.bbox": "tight",
            "pdf.fonttype": 42,
            "svg.hashsalt": "dartlib",
        }
    )


def save_figure(fig: plt.Figure, *, profile: str, name: str) -> list[Path]:
    """Write ``figures/<profile>/<name>.pdf`` and ``.png``; returns both paths. Run by a page of
    the runner, each is recorded with its sha256 in the page's ``metadata.dart.outputs``
    (:func:`dartlib.provenance.record_output`)."""
    if fig.get_layout_engine() is None or type(fig.get_layout_engine()).__name__ != "ConstrainedLayoutEngine":
        fig.set_layout_engine(LAYOUT)  # a figure made before apply_style: the same layout as the rest
    out = figures_dir(profile)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    from dartlib.data.files import atomic_path

    from dartlib.provenance import record_output

    for path, metadata in zip(paths, (_PDF_METADATA, _PNG_METADATA)):
        with atomic_path(path) as tmp:  # whole or not at all (a full disk leaves the previous figure)
            fig.savefig(tmp, metadata=metadata)
        record_output(path)  # the page that drew it keeps its sha256
    return paths


@dataclass(frozen=True)
class HeatScale:
    """How a heatmap maps values to colours: the range (None: the data's), the colour map and, for
    a diverging map, the value at its centre."""

    vmin: float | None = 0.0
    vmax: float | None = 1.0
    cmap: str = "Blues"
    center: float | None = None


RATES = HeatScale()  # rates in [0, 1]: confusion matrices, transition matrices
SIGNED = HeatScale(vmin=None, vmax=None, cmap="vlag", center=0.0)  # signed weights around 0, the data's range


def confusion_heatmap(
    ax: plt.Axes,
    matrix: np.ndarray,
    *,
    labels: Sequence[str] | None = None,
    highlight_above: float | None = None,
    annotate: bool = True,
    fmt: str = ".2f",
    title: str | None = None,
    scale: HeatScale = RATES,
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
        vmin=scale.vmin,
        vmax=scale.vmax,
        cmap=scale.cmap,
        center=scale.center,
        annot=annotate,
        fmt=fmt,
        annot_kws={"fontsize": ANNOTATION_SIZE},
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
