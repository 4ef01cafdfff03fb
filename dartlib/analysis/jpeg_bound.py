"""The JPEG copy's bound (docs/deviations.md): per method and rho, the mean accuracy over the
corruptions on the streams as they are and after one more JPEG round trip at the copy's quality,
and their paired difference with its SE (:mod:`dartlib.analysis.noise`)."""

from __future__ import annotations

import pandas as pd

from dartlib.analysis.noise import Outcomes, difference, mean_estimate
from dartlib.studies.jpeg_bound import COPY_QUALITY, METHODS


def jpeg_bound_table(*, rows: pd.DataFrame, outcomes: Outcomes | None = None) -> pd.DataFrame:
    """One row per (method, refiner, rho) of :data:`METHODS` that ``rows`` holds on both kinds of
    stream: ``as is``, ``re-JPEG`` (mean over corruptions ± SE) and ``change`` (re-JPEG − as is,
    paired image by image ± SE), over the corruptions both kinds cover."""
    tag = f"jpeg_source={COPY_QUALITY}"
    again = rows["params"].astype(str).str.contains(tag, regex=False)
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
