"""How much the JPEG copy of CIFAR-10 may move our numbers (docs/deviations.md): the profile's test
streams passed through one more JPEG round trip at the copy's quality (75, 4:2:0), NoAdapt, BNAdapt
and BNAdapt+DART, beside the same streams as they are (Table 1's cells, borrowed with their rows).

The copy the profiles train and test on (``../shared/data/cifar10``, SOURCE.md) is JPEG at quality
75; the paper's CIFAR-10 is lossless. A second round trip at the same quality changes the images far
less than the first did (the JPEG grid and quantisation are already in them), so the measured change
is a lower bound on the first round trip's effect at test time, not an upper one; what the first
round trip did to the source model's training cannot be measured without the lossless original.
"""

from __future__ import annotations

import pandas as pd

from dartlib.analysis.noise import Outcomes, difference, mean_estimate
from dartlib.experiments.cell_options import cell_options, options_text
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings

COPY_QUALITY = 75  # the copy's JPEG quality (../shared/data/cifar10/SOURCE.md)
METHODS = (("noadapt", "none"), ("bnadapt", "none"), ("bnadapt", "dart"))
RHOS = (1.0,)  # no label shift: the copy's effect on the images alone
# Table 1's rows of the same cells (the streams as they are) are borrowed, not computed
SHARED_RESULTS = ("table1.csv", "paper_config.csv")


def profile_cells(settings: Settings) -> list[Cell]:
    """Per method of :data:`METHODS`, rho of :data:`RHOS` and corruption of Table 1: the stream as it
    is (Table 1's cell) and after one more JPEG round trip (``jpeg_source=75``)."""
    limit = settings.table1.stream_limit
    cells = []
    for method, refiner in METHODS:
        for params in (options_text(limit=limit or None), options_text(limit=limit or None, jpeg_source=COPY_QUALITY)):
            cells += grid(dataset=[settings.test.corrupted_dataset], shift=["lt"], shift_param=list(RHOS),
                          corruption=list(settings.table1.corruptions), severity=[settings.test.severity],
                          method=[method], refiner=[refiner], params=[params], seed=[settings.seed])
    return cells


def jpeg_bound_table(*, rows: pd.DataFrame, outcomes: Outcomes | None = None) -> pd.DataFrame:
    """One row per (method, refiner, rho) of :data:`METHODS` that ``rows`` holds on both kinds of
    stream: ``as is``, ``re-JPEG`` (mean over corruptions ± SE) and ``change`` (re-JPEG − as is,
    paired image by image ± SE), over the corruptions both kinds cover."""
    again = pd.Series([cell_options(p).get("jpeg_source") == COPY_QUALITY for p in rows["params"].astype(str)],
                      index=rows.index)
    out = []
    for method, refiner in METHODS:
        for rho in sorted(rows["shift_param"].astype(float).unique()):
            sel = ((rows["method"] == method) & (rows["refiner"] == refiner)
                   & (rows["shift_param"].astype(float) == rho))
            a, b = rows[sel & ~again], rows[sel & again]
            common = set(a["corruption"]) & set(b["corruption"])
            if not common:
                continue
            a, b = a[a["corruption"].isin(common)], b[b["corruption"].isin(common)]
            base, moved = mean_estimate(rows=a, outcomes=outcomes), mean_estimate(rows=b, outcomes=outcomes)
            change = difference(b, a, outcomes=outcomes)
            out.append({"method": method, "refiner": refiner, "rho": rho, "corruptions": len(common),
                        "as is": f"{base.value:.2f} ± {base.se:.2f}", "re-JPEG": f"{moved.value:.2f} ± {moved.se:.2f}",
                        "change": f"{change.value:+.2f} ± {change.se:.2f}", "se": change.kind})
    return pd.DataFrame(out)
