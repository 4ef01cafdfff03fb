"""The appendix's further settings (notebook 09): CIFAR-10C-imb, mixed domains,
MEMO with stored or adapted BN, and g_phi trained on a condensed training set. The Table 1 context
(source model and notebook 04's g_phi) serves every cell; cells run through the grid runner
(``results/<profile>/more_settings.csv``, resumable).

:func:`run` computes every table's rows (the training stage first), :func:`report` builds the
tables beside the paper's (:func:`online_imbalance_table`, :func:`mixed_table`, :func:`memo_table`,
:func:`condensed_table`) and the figure (:func:`plot_more_settings`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.dart.intermediate import load_or_train_refiner
from dartlib.data import load, protocols
from dartlib.data.sources import SOURCES
from dartlib.data.dataset import DataMissingError, Dataset
from dartlib.experiments.engine import TestTimeContext, paired, prepare_context, run_cells
from dartlib.experiments.cell_options import cell_options, options_text
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings
from dartlib.models.training import train_source
from dartlib.paths import results_dir
from dartlib.reporting.figures import WIDTH, save_figure
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import show, with_row_labels


def cells_for(settings: Settings, *, shift: str, params: Sequence, corruptions: Sequence[str],
              methods: Sequence[str], refiners: Sequence[str] = ("none", "dart"), extra: str = "") -> list[Cell]:
    """The profile's cells of one table block (NoAdapt only without a refiner)."""
    cells = grid(dataset=[settings.test.corrupted_dataset], shift=[shift], shift_param=params, corruption=corruptions,
                 severity=[settings.test.severity], method=methods, refiner=list(refiners), params=[extra],
                 seed=[settings.seed])
    return paired(cells)


def _run(settings: Settings, cells: list[Cell], context_of: Callable[[Cell], TestTimeContext], *, experiment: str,
         reuse: Sequence[Path] = ()) -> pd.DataFrame:
    """``cells`` through the grid runner, each with the context ``context_of`` gives it."""
    return run_cells(cells, context_of, path=results_dir(settings.profile) / "more_settings.csv", experiment=experiment,
                     progress=settings.profile != "smoke", reuse=reuse)


def run_online_imbalance(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """CIFAR-10C-imb: NoAdapt and BNAdapt (+DART) over ``imb_corruptions``, TENT (+DART) over
    ``tent_corruptions``, one IR per column."""
    s = settings
    subset = options_text(subset=s.test.imb_subset_size)
    irs = [float(r) for r in s.more_settings.imb_table_irs]
    cells = (cells_for(s, shift="online-imb", params=irs, corruptions=s.more_settings.imb_corruptions,
                       methods=["noadapt", "bnadapt"], extra=subset)
             + tent_imb_cells(s, corruptions=s.sensitivity.tent_corruptions))
    # notebook 11 runs the same NoAdapt and BNAdapt(+DART) streams: its rows with the same inputs are copied
    return _run(s, cells, lambda c: context, experiment="app_cifar10c_imb",
                reuse=[results_dir(s.profile) / "online_imbalance.csv"])


def run_mixed(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """Mixed domains: one pool of all 15 corruptions, in random and in non-i.i.d. Dirichlet order."""
    s = settings
    pool = options_text(pool=s.more_settings.mixed_pool or None)
    methods = ["noadapt", "bnadapt", "roid"]
    cells = (cells_for(s, shift="none", params=[None], corruptions=["mixed"], methods=methods, extra=pool)
             + cells_for(s, shift="dirichlet", params=[s.more_settings.mixed_delta], corruptions=["mixed"], methods=methods,
                         extra=pool))
    return _run(s, cells, lambda c: context, experiment="app_mixed")


def tent_imb_cells(settings: Settings, *, corruptions: Sequence[str]) -> list[Cell]:
    """TENT (+DART) on the CIFAR-10C-imb streams of ``corruptions``, one cell per IR of ``imb_table_irs``."""
    irs = [float(r) for r in settings.more_settings.imb_table_irs]
    return cells_for(settings, shift="online-imb", params=irs, corruptions=corruptions, methods=["tent"],
                     extra=options_text(subset=settings.test.imb_subset_size))


def memo_params(settings: Settings, *, bn: str) -> str:
    """The params of a MEMO cell with BN mode ``bn`` ("stored", "adapted") and the profile's stream limit."""
    return options_text(bn=bn, limit=settings.more_settings.memo_stream_limit or None)


def memo_cells(settings: Settings, *, corruptions: Sequence[str]) -> list[Cell]:
    """NoAdapt, MEMO with stored BN, and MEMO with adapted BN (+DART) on the LT streams of
    ``corruptions``; each MEMO cell names its BN mode (``bn=``), which :func:`memo_contexts` maps."""
    s = settings
    rhos = [float(r) for r in s.test.lt_rhos]
    limit = options_text(limit=s.more_settings.memo_stream_limit or None)
    return (cells_for(s, shift="lt", params=rhos, corruptions=corruptions, methods=["noadapt"], extra=limit)
            + cells_for(s, shift="lt", params=rhos, corruptions=corruptions, methods=["memo"], refiners=["none"],
                        extra=memo_params(s, bn="stored"))
            + cells_for(s, shift="lt", params=rhos, corruptions=corruptions, methods=["memo"],
                        extra=memo_params(s, bn="adapted")))


def memo_contexts(settings: Settings, context: TestTimeContext) -> Callable[[Cell], TestTimeContext]:
    """Each cell's context for :func:`memo_cells`: ``context`` with MEMO's options for the cell's BN
    mode and the profile's test batch size (the same source model, g_phi and device); ``context``
    itself for a cell that names none."""
    s = settings
    contexts = {bn: context.variant(batch_size=s.test.batch_size,
                                    options={"memo": {"bn": mode, "n_augmentations": s.methods.memo_augmentations}})
                for bn, mode in (("stored", "source"), ("adapted", "batch"))}
    return lambda c: contexts.get(c.options.get("bn"), context)


def run_memo(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """MEMO on the LT streams of ``memo_corruptions`` with stored BN statistics (episodic: restarts
    from the source weights on every batch) and with adapted BN (+DART), beside NoAdapt."""
    return _run(settings, memo_cells(settings, corruptions=settings.more_settings.memo_corruptions),
                memo_contexts(settings, context), experiment="app_memo")


def run_condensed(*, settings: Settings, context: TestTimeContext) -> tuple[pd.DataFrame, str]:
    """BNAdapt with g_phi trained on the distilled set (where it exists) and on a random
    class-balanced subset of the same size, beside notebook 04's g_phi, on the LT streams
    (``results/<profile>/condensed.csv``); returns the rows and what became of the distilled set.
    Everything trains and adapts on ``context.device``."""
    s = settings
    model = context.source
    source = s.source.dataset
    checkpoint = train_source(dataset=source, arch=s.source.arch, recipe=s.source.recipe, seed=s.seed,
                              device=context.device, progress=False)
    train = load(source, split="train")
    small = s.dart_config(n_dir=s.more_settings.condensed_n_dir, epochs=s.more_settings.condensed_epochs, per_class=None)
    refiners = {}
    if f"{source}-condensed" not in SOURCES:
        status = f"dart-condensed: NOT RUN (the paper's condensed set is CIFAR-10's; there is none for {source})"
    else:
        try:
            distilled = load(f"{source}-condensed", split="train")
            refiners["dart-condensed"] = load_or_train_refiner(checkpoint, model, distilled, small, device=context.device,
                                                                progress=False)[0]
            status = f"dart-condensed: trained on {len(distilled.labels)} distilled images"
        except DataMissingError as err:
            status = f"dart-condensed: NOT RUN ({err})"
    ipc = s.more_settings.condensed_ipc
    keep = protocols.class_balanced(train.labels, per_class=ipc, seed=s.seed)
    subset = Dataset(f"{train.name}-random{ipc}", "train", train.images[keep], train.labels[keep], train.classes)
    refiners[f"dart-random{ipc}"] = load_or_train_refiner(checkpoint, model, subset, small, device=context.device,
                                                                 progress=False)[0]
    cells = grid(dataset=[s.test.corrupted_dataset], corruption=list(s.more_settings.condensed_corruptions), shift=["lt"],
                 shift_param=[float(r) for r in s.test.lt_rhos], severity=[s.test.severity], method=["bnadapt"],
                 refiner=["none", "dart", *refiners], seed=[s.seed])
    frame = run_cells(cells, context.variant(refiners={**context.refiners, **refiners}),
                      path=results_dir(s.profile) / "condensed.csv", experiment="app_condensed",
                      progress=s.profile != "smoke")
    return frame, status


@dataclass(frozen=True)
class MoreSettingsRows:
    """Every table's rows of notebook 09 (:func:`run`): CIFAR-10C-imb, mixed domains, MEMO and the
    condensed set, with what became of the distilled set and the source checkpoint's metadata."""

    imb: pd.DataFrame
    mixed: pd.DataFrame
    memo: pd.DataFrame
    condensed: pd.DataFrame
    condensed_status: str
    meta: dict = field(default_factory=dict)


def run(*, settings: Settings) -> MoreSettingsRows:
    """The further settings computed where their rows are missing or stale: the training stage (the
    source model, test sets and notebook 04's g_phi), the Table 1 context with MEMO's views, then
    every table's cells."""
    from dartlib.experiments.training_stage import train_profile_inputs

    train_profile_inputs(settings=settings, method_inputs=False)
    context, meta = prepare_context(settings=settings, method_inputs=False)
    imb = run_online_imbalance(settings=settings, context=context)
    mixed = run_mixed(settings=settings, context=context)
    memo = run_memo(settings=settings, context=context)
    condensed, status = run_condensed(settings=settings, context=context)
    return MoreSettingsRows(imb=imb, mixed=mixed, memo=memo, condensed=condensed, condensed_status=status, meta=meta)


@dataclass(frozen=True)
class MoreSettingsReport:
    """Notebook 09's tables (each printed beside the paper's as it is built) and figure, from one set
    of rows (:func:`report`)."""

    settings: Settings
    rows: MoreSettingsRows

    def online_imbalance_table(self) -> pd.DataFrame:
        """:func:`online_imbalance_table` of the rows."""
        return online_imbalance_table(frame=self.rows.imb, settings=self.settings)

    def mixed_table(self) -> pd.DataFrame:
        """:func:`mixed_table` of the rows."""
        return mixed_table(frame=self.rows.mixed, settings=self.settings)

    def memo_table(self) -> pd.DataFrame:
        """:func:`memo_table` of the rows."""
        return memo_table(frame=self.rows.memo, settings=self.settings)

    def condensed_table(self) -> pd.DataFrame:
        """:func:`condensed_table` of the rows."""
        return condensed_table(frame=self.rows.condensed, settings=self.settings)

    def figure(self) -> plt.Figure:
        """:func:`plot_more_settings` of the rows."""
        return plot_more_settings(imb=self.rows.imb, mixed=self.rows.mixed, settings=self.settings)


def report(*, settings: Settings, rows: MoreSettingsRows) -> MoreSettingsReport:
    """Notebook 09's tables and figure from ``rows`` (:func:`run`), built by this module's functions only."""
    return MoreSettingsReport(settings=settings, rows=rows)


def online_imbalance_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's CIFAR-10C-imb table, columns IR."""
    s = settings
    return show("app_cifar10c_imb", frame, load_table("app_cifar10c_imb"), settings=s, columns="shift_param",
                order=["NoAdapt", "BNAdapt", "BNAdapt+DART", "TENT", "TENT+DART"],
                caption=f"CIFAR-10C-imb, columns IR; NoAdapt/BNAdapt over {len(s.more_settings.imb_corruptions)}, "
                        f"TENT over {len(s.sensitivity.tent_corruptions)} corruption(s), subsets of {s.test.imb_subset_size}")


def mixed_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns: "no label shift" or "Dirichlet <delta>"."""
    return frame.assign(column=["no label shift" if s == "none" else f"Dirichlet {p:g}"
                                for s, p in zip(frame["shift"], frame.shift_param)])


def mixed_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's mixed-domains table (one stream of all 15 corruptions: every delta is shown)."""
    return show("app_mixed", mixed_layout(frame), mixed_layout(load_table("app_mixed")), settings=settings,
                columns="column", covers=None, order=["NoAdapt", "BNAdapt", "BNAdapt+DART", "ROID", "ROID+DART"],
                caption=f"mixed domains, {settings.more_settings.mixed_pool or 'all'} images of the 15-corruption pool")


def memo_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """MEMO's rows named by their BN mode."""
    bn = [cell_options(p).get("bn") for p in frame.params]
    return frame.assign(method=[f"MEMO ({b} BN)" if m == "memo" else m for m, b in zip(frame.method, bn)])


def memo_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's MEMO table on the LT streams."""
    s = settings
    limit = s.more_settings.memo_stream_limit
    return show("app_memo", memo_layout(frame), memo_layout(load_table("app_memo")), settings=s,
                columns="shift_param",
                order=["NoAdapt", "MEMO (stored BN)", "MEMO (adapted BN)", "MEMO (adapted BN)+DART"],
                caption=f"MEMO on {s.test.corrupted_dataset}-LT, {s.methods.memo_augmentations} views per image, "
                        f"{len(s.more_settings.memo_corruptions)} corruption(s)"
                        f"{', first ' + str(limit) + ' images per stream' if limit else ''}")


def condensed_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's condensed-data table, with the random-subset stand-in as an extra row."""
    ipc = settings.more_settings.condensed_ipc
    return show("app_condensed", frame, load_table("app_condensed"), settings=settings, columns="shift_param",
                order=["BNAdapt", "BNAdapt+DART", "BNAdapt+dart-condensed", f"BNAdapt+dart-random{ipc}"],
                caption=f"g_phi on {ipc} images per class, {len(settings.more_settings.condensed_corruptions)} corruption(s)")


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
    fig.suptitle(f"{settings.test.corrupted_dataset} ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="more_settings")
    return fig
