"""The appendix's TENT and MEMO cells over every corruption of Table 1, where a profile's tables run
them on ``tent_corruptions`` and ``memo_corruptions`` (the cpu profile: the three of Figure 1, to
bound compute). The paper's tables average all 15 corruptions (Appendix B), so the
three-corruption rows are a subsample of its streams.

Two grids, each resumable and borrowing the equal rows of the files its notebook writes:

* ``all_corruptions`` (notebook 09; :func:`profile_cells`): TENT (+DART, the profile's g_phi) on
  CIFAR-10C-imb, IR by IR, then MEMO (stored BN, adapted BN, +DART) on CIFAR-10C-LT, rho by rho;
* ``sensitivity_all_corruptions`` (notebook 08; :func:`sensitivity_cells`): the alpha table's TENT
  cells on CIFAR-10C-LT, then the test batch-size table's cells (NoAdapt, BNAdapt, TENT, +DART).

:func:`all_corruptions_block` and :func:`sensitivity_block` put each line's mean over all
corruptions beside the mean over the profile's subset and the paper's, with the SEs of
:mod:`dartlib.analysis.noise` (clustered by test image, a gain paired image by image);
:func:`report` builds them from a profile's stored rows, for notebooks 08 and 09 and the results
page."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from dartlib.experiments.engine import TestTimeContext
from dartlib.experiments.cell_options import CellOptions, options_text
from dartlib.experiments.grid import Cell, folder_outcomes, stored_rows
from dartlib.experiments.settings import Settings, study_of
from dartlib.paths import results_dir
from dartlib.studies.appendix_settings import memo_cells, memo_contexts, memo_params, tent_imb_cells
from dartlib.studies.paper_config import estimate_or_count, estimate_text, paper_row, select_streams
from dartlib.studies.sensitivity import (SensitivityStudy, alpha_tent_cells, prepare_sensitivity, stream_limit,
                                         test_batch_cells)

SHARED_RESULTS = ("more_settings.csv", "table1.csv")
SENSITIVITY_SHARED_RESULTS = ("sensitivity_tent.csv", "sensitivity_batch.csv")


def profile_cells(settings: Settings) -> list[Cell]:
    """TENT (+DART) on CIFAR-10C-imb, then MEMO's cells (:func:`~dartlib.studies.appendix_settings.memo_cells`)
    on CIFAR-10C-LT, each over ``table1_corruptions``; in that order a grid stopped part-way has
    finished whole columns."""
    corruptions = list(settings.table1.corruptions)
    memo = memo_cells(settings, corruptions=corruptions)
    by_rho = sorted(memo, key=lambda c: float(c.shift_param))  # stable: each rho's cells in their order
    return list(dict.fromkeys(tent_imb_cells(settings, corruptions=corruptions) + by_rho))


def context_of(settings: Settings, context: TestTimeContext) -> Callable[[Cell], TestTimeContext]:
    """Each cell's context: MEMO's by its BN mode, ``context`` (Table 1's) for the others."""
    return memo_contexts(settings, context)


def sensitivity_cells(settings: Settings) -> list[Cell]:
    """Notebook 08's cells of :func:`~dartlib.studies.sensitivity.alpha_tent_cells` and
    :func:`~dartlib.studies.sensitivity.test_batch_cells` over ``table1_corruptions``, in that order."""
    every = list(settings.table1.corruptions)
    return list(dict.fromkeys(alpha_tent_cells(settings, corruptions=every) + test_batch_cells(settings, corruptions=every)))


def prepare_sensitivity_context(*, settings: Settings, device: str | None = None,
                                progress: bool = False) -> tuple[TestTimeContext, dict]:
    """Notebook 08's context (the source model, the ``base`` refiner; the study's refiners, loaded:
    :func:`~dartlib.studies.sensitivity.train_sensitivity_inputs` makes them) with the alpha refiners
    under their names, and the source's metadata. ``device`` is the grid command's; the study runs on
    the machine's device."""
    from dartlib.experiments.source_setup import prepare_source

    setup = prepare_source(settings=settings)
    study = prepare_sensitivity(settings=settings, setup=setup)
    return study.context.variant(refiners={**study.context.refiners, **study.named("alpha")}), setup.meta


def sensitivity_context_of(settings: Settings, context: TestTimeContext) -> Callable[[Cell], TestTimeContext]:
    """Each cell's context as notebook 08 gives it: an alpha cell (LT streams) the refiner its
    params name (:meth:`~dartlib.studies.sensitivity.SensitivityStudy.contexts`), a test batch-size
    cell ``context`` itself (the ``base`` refiner)."""
    study = SensitivityStudy(settings=settings, setup=None, refiners=dict(context.refiners), context=context)
    alpha = study.contexts("alpha")
    return lambda c: alpha(c) if c.shift == "lt" else context


def stored(*, profile: str, cells: Sequence[Cell] | None = None, grid: str = "all_corruptions",
           shared: Sequence[str] = SHARED_RESULTS) -> pd.DataFrame:
    """Grid ``grid``'s rows as stored (``results/<profile>/<grid>.csv``), with the equal rows of
    ``shared``, for ``cells`` (default: :func:`profile_cells` of the profile)."""
    settings = Settings.from_profile(profile).for_study(study_of(grid))
    folder = results_dir(profile)
    cells = profile_cells(settings) if cells is None else list(cells)
    frames = [stored_rows(cells, path=folder / name) for name in (f"{grid}.csv", *shared)]
    frames = [f for f in frames if len(f)]
    if not frames:  # no rows, with the columns a block selects on
        return pd.DataFrame(columns=["shift", "shift_param", "corruption", "method", "refiner", "params", "seed", "key"])
    return pd.concat(frames, ignore_index=True).drop_duplicates("key")


def stored_sensitivity(*, profile: str) -> pd.DataFrame:
    """:func:`stored` of the ``sensitivity_all_corruptions`` grid."""
    settings = Settings.from_profile(profile).for_study(study_of("sensitivity_all_corruptions"))
    return stored(profile=profile, cells=sensitivity_cells(settings),
                  grid="sensitivity_all_corruptions", shared=SENSITIVITY_SHARED_RESULTS)


def _paper(table: str, *, shift: str, param, method: str, refiner: str, params: str) -> str:
    row = paper_row(table, shift=shift, param=param, method=method, refiner=refiner, params=params)
    return "" if row is None else f"{float(row.accuracy):.1f}"


class Line(NamedTuple):
    """One method line of a block, a row per shift parameter."""

    label: str
    shift: str
    shift_params: Sequence
    method: str
    refiner: str
    params: str  # our cells' params
    paper_params: str  # the paper table's
    paper_table: str
    subset: Sequence[str]  # the profile's corruptions for these cells
    base_params: str | None  # the params of the baseline of DART's gain (None: no gain)


def _block(*, settings: Settings, rows: pd.DataFrame, outcomes, lines: Sequence[Line]) -> pd.DataFrame:
    every = list(settings.table1.corruptions)
    out, widths = {}, []
    for label, shift, params, method, refiner, ours, theirs, table, few, base_params in lines:
        for param in params:
            name = "balanced" if param is None else f"{'IR' if shift == 'online-imb' else 'rho'}={float(param):g}"
            line = {}
            for corruptions in (every, list(few)):
                column = f"{len(corruptions)} corruptions"
                widths.append(len(corruptions))
                pick = dict(shift=shift, param=param, method=method, seeds=(settings.seed,),
                            corruptions=corruptions)
                dart = select_streams(rows, refiners=(refiner,), subset=ours, **pick)
                line[column] = estimate_text(estimate_or_count([(1.0, dart)], expected=len(corruptions), outcomes=outcomes))
                if base_params is not None:
                    base = select_streams(rows, refiners=("none",), subset=base_params, **pick)
                    line[f"gain, {column}"] = estimate_text(estimate_or_count(
                        [(1.0, dart), (-1.0, base)], expected=len(corruptions), outcomes=outcomes))
            line["paper"] = _paper(table, shift=shift, param=param, method=method, refiner=refiner, params=theirs)
            out[(label, name)] = line
    sizes = list(dict.fromkeys(widths))
    order = [f"{pre}{n} corruptions" for n in sizes for pre in ("", "gain, ")] + ["paper"]
    return pd.DataFrame(out).T.reindex(columns=order).fillna("")


def all_corruptions_block(*, settings: Settings, rows: pd.DataFrame, outcomes) -> pd.DataFrame:
    """Per line (TENT, TENT+DART and its gain on CIFAR-10C-imb per IR; MEMO with stored BN, with
    adapted BN, +DART and its gain on CIFAR-10C-LT per rho): the mean over all of Table 1's
    corruptions ± SE, the mean over the profile's subset (``tent_corruptions``,
    ``memo_corruptions``) ± SE, and the paper's; "not run (k of K)" where cells are missing."""
    s = settings
    imb = ("online-imb", s.more_settings.imb_table_irs)
    subset = options_text(subset=s.test.imb_subset_size)
    stored_bn, adapted = memo_params(s, bn="stored"), memo_params(s, bn="adapted")
    lt = ("lt", s.test.lt_rhos)
    lines = [Line("TENT", *imb, "tent", "none", subset, "", "app_cifar10c_imb", s.sensitivity.tent_corruptions, None),
             Line("TENT+DART", *imb, "tent", "dart", subset, "", "app_cifar10c_imb", s.sensitivity.tent_corruptions, subset),
             Line("MEMO (stored BN)", *lt, "memo", "none", stored_bn, options_text(bn="stored"), "app_memo", s.more_settings.memo_corruptions, None),
             Line("MEMO (adapted BN)", *lt, "memo", "none", adapted, options_text(bn="adapted"), "app_memo", s.more_settings.memo_corruptions, None),
             Line("MEMO (adapted BN)+DART", *lt, "memo", "dart", adapted, options_text(bn="adapted"), "app_memo", s.more_settings.memo_corruptions,
              adapted)]
    return _block(settings=s, rows=rows, outcomes=outcomes, lines=lines)


def sensitivity_block(*, settings: Settings, rows: pd.DataFrame, outcomes) -> pd.DataFrame:
    """Per line (TENT without DART and with each alpha's refiner on CIFAR-10C-LT per rho, DART's
    gain beside; NoAdapt, BNAdapt and TENT with and without DART per test batch size on balanced
    streams): as :func:`all_corruptions_block`, the profile's subset ``tent_corruptions``."""
    s = settings
    limit = stream_limit(s)
    few, lt = s.sensitivity.tent_corruptions, ("lt", s.test.lt_rhos)
    lines = [Line("TENT", *lt, "tent", "none", limit.text, "", "app_alpha", few, None)]
    lines += [Line(f"TENT+DART (alpha={a:g})", *lt, "tent", "dart", (CellOptions.of(alpha=a) | limit).text,
                   options_text(alpha=a), "app_alpha", few, limit.text) for a in s.sensitivity.alpha_values]
    ours = {b: (CellOptions.of(test_batch=b) | limit).text for b in s.sensitivity.test_batches}
    for method, name in (("noadapt", "NoAdapt"), ("bnadapt", "BNAdapt"), ("tent", "TENT")):
        for refiner in ("none", "dart") if method != "noadapt" else ("none",):
            label = f"{name}{'+DART' if refiner == 'dart' else ''}, test batch"
            lines += [Line(f"{label} {b}", "none", [None], method, refiner, ours[b], options_text(test_batch=b),
                           "app_batch_size", few, ours[b] if refiner == "dart" else None)
                      for b in s.sensitivity.test_batches]
    return _block(settings=s, rows=rows, outcomes=outcomes, lines=lines)


@dataclass(frozen=True)
class AllCorruptionsReport:
    """Both grids' blocks from ``profile``'s stored rows (:func:`report`); ``settings`` are the
    profile's, as the ``all_corruptions`` grid runs with them."""

    profile: str
    settings: Settings
    outcomes: Mapping

    def block(self) -> pd.DataFrame:
        """:func:`all_corruptions_block` of the ``all_corruptions`` grid's stored rows."""
        return all_corruptions_block(settings=self.settings, rows=stored(profile=self.profile), outcomes=self.outcomes)

    def sensitivity_block(self) -> pd.DataFrame:
        """:func:`sensitivity_block` of the ``sensitivity_all_corruptions`` grid's stored rows."""
        settings = Settings.from_profile(self.profile).for_study(study_of("sensitivity_all_corruptions"))
        return sensitivity_block(settings=settings, rows=stored_sensitivity(profile=self.profile), outcomes=self.outcomes)


def report(*, profile: str, outcomes: Mapping | None = None) -> AllCorruptionsReport:
    """The blocks of ``profile``'s stored rows, their SEs from ``outcomes`` (default: the per-image
    outcomes beside the profile's results)."""
    return AllCorruptionsReport(profile=profile,
                                settings=Settings.from_profile(profile).for_study(study_of("all_corruptions")),
                                outcomes=folder_outcomes(results_dir(profile)) if outcomes is None else outcomes)
