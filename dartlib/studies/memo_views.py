"""A measured bound on what MEMO's number of AugMix views changes in the MEMO table (Appendix,
"Applying DART to MEMO"): the profile's MEMO cells run with ``memo_augmentations`` views per test
image; the MEMO authors' CIFAR-10 code uses :data:`AUTHORS_VIEWS`. The grid ``memo_views``
recomputes MEMO's cells (stored BN, adapted BN, adapted BN + DART) on :data:`CORRUPTIONS` at that
count, on the same streams as the profile's rows (``all_corruptions.csv``), and
:func:`views_block` puts the two side by side with their difference, paired image by image
(:mod:`dartlib.analysis.noise`); :func:`report` builds it from a profile's stored rows, for notebook 09
and the results page."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

from dartlib.experiments.engine import TestTimeContext
from dartlib.experiments.cell_options import CellOptions, cell_options
from dartlib.experiments.grid import Cell, folder_outcomes, stored_rows
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir
from dartlib.studies.appendix_settings import cells_for, memo_cells, memo_contexts, memo_params
from dartlib.studies.paper_config import estimate_or_count, estimate_text, select_streams

# zhangmarvin/memo, cifar-10-exps/test_calls/test_adapt.py: `--batch_size 32` augmented copies of each test image
AUTHORS_VIEWS = 32
# one corruption bounds the cost: 9 cells at 8 times the views of the profile's (about 10 core-minutes each)
CORRUPTIONS = ("gaussian_noise",)
LINES = (("MEMO (stored BN)", "stored", "none"), ("MEMO (adapted BN)", "adapted", "none"),
         ("MEMO (adapted BN)+DART", "adapted", "dart"))


def views_params(settings: Settings, *, bn: str) -> str:
    """The params of a MEMO cell with :data:`AUTHORS_VIEWS` views (``bn=adapted,views=32``)."""
    return (cell_options(memo_params(settings, bn=bn)) | CellOptions.of(views=AUTHORS_VIEWS)).text


def profile_cells(settings: Settings) -> list[Cell]:
    """MEMO with stored BN, with adapted BN and with adapted BN + DART at :data:`AUTHORS_VIEWS` views,
    on the LT streams of :data:`CORRUPTIONS`, rho by rho from the largest (the shortest streams first: a run
    stopped part-way has finished whole columns, the cheapest first)."""
    s, rhos = settings, sorted((float(r) for r in settings.test.lt_rhos), reverse=True)
    cells = [c for rho in rhos for bn, refiners in (("stored", ["none"]), ("adapted", ["none", "dart"]))
             for c in cells_for(s, shift="lt", params=[rho], corruptions=list(CORRUPTIONS), methods=["memo"],
                                refiners=refiners, extra=views_params(s, bn=bn))]
    return cells


def context_of(settings: Settings, context: TestTimeContext) -> Callable[[Cell], TestTimeContext]:
    """Each cell's context: MEMO's for its BN mode, with the number of views its params name."""
    memo = memo_contexts(settings, context)

    def of(cell: Cell) -> TestTimeContext:
        base = memo(cell)
        views = cell.options["views"]
        return base.variant(options={"memo": {**base.options["memo"], "n_augmentations": views}})
    return of


def stored(*, profile: str) -> pd.DataFrame:
    """The grid's rows and the profile's MEMO rows of the same streams (``all_corruptions.csv``), each
    read through the checked reader (:func:`~dartlib.experiments.grid.stored_rows`)."""
    settings, folder = Settings.from_profile(profile), results_dir(profile)
    ours = [c for c in memo_cells(settings, corruptions=list(CORRUPTIONS)) if c.method == "memo"]
    return pd.concat([stored_rows(profile_cells(settings), path=folder / "memo_views.csv"),
                      stored_rows(ours, path=folder / "all_corruptions.csv")], ignore_index=True)


def views_block(*, settings: Settings, rows: pd.DataFrame, outcomes) -> pd.DataFrame:
    """Per MEMO line and rho on :data:`CORRUPTIONS`: the accuracy ± SE with the profile's views and
    with :data:`AUTHORS_VIEWS`, and their difference, paired image by image; "not run" where a cell
    is missing."""
    s, theirs, n = settings, f"{AUTHORS_VIEWS} views", len(CORRUPTIONS)
    ours = f"{s.methods.memo_augmentations} views"
    out = {}
    for label, bn, refiner in LINES:
        for rho in s.test.lt_rhos:
            pick = dict(shift="lt", param=rho, method="memo", seeds=(s.seed,), corruptions=list(CORRUPTIONS),
                        refiners=(refiner,))
            few = select_streams(rows, subset=memo_params(s, bn=bn), **pick)
            many = select_streams(rows, subset=views_params(s, bn=bn), **pick)
            out[(label, f"rho={float(rho):g}")] = {
                ours: estimate_text(estimate_or_count([(1.0, few)], expected=n, outcomes=outcomes)),
                theirs: estimate_text(estimate_or_count([(1.0, many)], expected=n, outcomes=outcomes)),
                f"{theirs} - {ours}": estimate_text(estimate_or_count([(1.0, many), (-1.0, few)], expected=n,
                                                                       outcomes=outcomes))}
    return pd.DataFrame(out).T


@dataclass(frozen=True)
class MemoViewsReport:
    """The views block of ``profile``'s stored rows (:func:`report`)."""

    profile: str
    settings: Settings
    outcomes: Mapping

    def block(self) -> pd.DataFrame:
        """:func:`views_block` of :func:`stored`."""
        return views_block(settings=self.settings, rows=stored(profile=self.profile), outcomes=self.outcomes)


def report(*, profile: str, outcomes: Mapping | None = None) -> MemoViewsReport:
    """The block of ``profile``'s stored rows, its SEs from ``outcomes`` (default: the per-image
    outcomes beside the profile's results)."""
    return MemoViewsReport(profile=profile, settings=Settings.from_profile(profile),
                           outcomes=folder_outcomes(results_dir(profile)) if outcomes is None else outcomes)
