"""The online-imbalance experiment on a profile's own data (notebook 11): CIFAR-10C-imb-style
streams (Section 2: K subsets, each dominated by one class with probability IR / (IR + K - 1))
with NoAdapt, BNAdapt, BNAdapt+DART and BNAdapt+DART-split, and TENT, SAR and ODS with and
without DART-split (the appendix table of DART-split with TTA methods).

The cells and the shared context are built here so that the notebook and the sharded CLI grid
(``python -m dartlib grid online_imbalance``) compute the same cells into the same results file
(``results/<profile>/online_imbalance.csv``, resumable). :func:`run` computes the rows (the training
stage first), :func:`report` builds our table beside the paper's (:func:`online_table`) and the figure
(:func:`plot_online_imbalance`); the paper's Table 2 is :func:`paper_table2`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import pandas as pd

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.experiments.cell_options import options_text
from dartlib.experiments.engine import TestTimeContext, paired, run_cells
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir
from dartlib.reporting.figures import HALF_WIDTH, row_colours, save_figure
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label


# Results files (beside this grid's) whose rows of the same cells, with the same input digests, are
# borrowed rather than computed: notebook 09's CIFAR-10C-imb table runs the same NoAdapt and BNAdapt(+DART) streams.
SHARED_RESULTS = ("more_settings.csv",)

# SAR's model recovery is on "only for the experiments of online imbalance" (Appendix A, "SAR").
METHOD_OPTIONS = {"sar": {"reset": True}}

ROW_ORDER = ["NoAdapt", "BNAdapt", "BNAdapt+DART", "BNAdapt+DART-split", "TENT", "TENT+DART-split", "SAR",
             "SAR+DART-split", "ODS", "ODS+DART-split"]


def online_cells(*, corrupted_dataset: str, severity: int, online_irs, imb_subset_size: int, online_corruptions,
                 split_tta_corruptions, seed: int) -> list[Cell]:
    """The BNAdapt family (NoAdapt; BNAdapt with no refiner, DART, DART-split) on
    ``online_corruptions`` and TENT / SAR / ODS with and without DART-split on
    ``split_tta_corruptions``, at every IR; arguments are notebook 11's parameter names."""
    axes = dict(dataset=[corrupted_dataset], shift=["online-imb"], shift_param=[float(r) for r in online_irs],
                severity=[severity], params=[options_text(subset=imb_subset_size)], seed=[seed])
    cells = paired(grid(**axes, corruption=list(online_corruptions), method=["noadapt", "bnadapt"],
                        refiner=["none", "dart", "dart-split"]))
    return cells + grid(**axes, corruption=list(split_tta_corruptions), method=["tent", "sar", "ods"],
                        refiner=["none", "dart-split"])


def split_config(settings: Settings):
    """DART-split's g_phi1 / g_phi2 configuration: DART's settings (Algorithm 3)."""
    return dataclasses.replace(settings.dart_config(), variant="dart-split")


def train_online_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """The training stage of :func:`prepare_online_context`: notebook 04's inputs
    (:func:`~dartlib.experiments.training_stage.train_profile_inputs`, without the methods') and
    DART-split's g_phi1 / g_phi2, trained where absent with the same intermediate settings."""
    from dartlib.dart.intermediate import load_or_train_refiner
    from dartlib.experiments.training_stage import train_profile_inputs

    source = train_profile_inputs(settings=settings, method_inputs=False, device=device, progress=progress)
    load_or_train_refiner(source.checkpoint, source.model, source.train, split_config(settings),
                          device=device, progress=progress)


def prepare_online_context(
    *, settings: Settings, device: str | None = None, progress: bool = False,
) -> tuple[TestTimeContext, dict, list[dict]]:
    """Notebook 04's context (source model, DART's g_phi) plus DART-split's g_phi1 / g_phi2 (made by
    :func:`train_online_inputs`), loaded and applied with logits multiplied by the profile's
    ``split_temperature`` (1.1 on CIFAR-10C, Appendix B), and the online-imbalance method options
    (:data:`METHOD_OPTIONS`: SAR's reset). Returns the context, the source checkpoint's metadata and
    DART-split's training log."""
    from dartlib.dart.intermediate import load_refiners
    from dartlib.experiments.engine import prepare_context

    context, meta = prepare_context(settings=settings, method_inputs=False, device=device, progress=progress)
    [(split, log)] = load_refiners(settings.checkpoint(), [split_config(settings)],
                                   command=settings.training_command("online_imbalance"))
    split.temperature = settings.methods.split_temperature
    context.refiners["dart-split"] = split
    for method, options in METHOD_OPTIONS.items():
        context.options[method] = {**context.options.get(method, {}), **options}
    return context, meta, log


def profile_cells(settings: Settings) -> list[Cell]:
    """The online-imbalance grid of a profile's (notebook 11's) settings."""
    return online_cells(corrupted_dataset=settings.test.corrupted_dataset, severity=settings.test.severity,
                        online_irs=settings.online.irs, imb_subset_size=settings.test.imb_subset_size,
                        online_corruptions=settings.online.corruptions,
                        split_tta_corruptions=settings.online.split_tta_corruptions, seed=settings.seed)


def run_online_imbalance(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """Every cell of :func:`dartlib.studies.online_imbalance.profile_cells` for the profile."""
    out = results_dir(settings.profile)
    cells = profile_cells(settings)
    # notebook 09's rows of the same streams are copied, not recomputed
    return run_cells(cells, context, path=out / "online_imbalance.csv", experiment="online_imbalance",
                     progress=settings.profile != "smoke", reuse=[out / name for name in SHARED_RESULTS])


@dataclass(frozen=True)
class OnlineRows:
    """The online-imbalance grid's rows (:func:`run`), the source checkpoint's metadata and
    DART-split's training log."""

    results: pd.DataFrame
    meta: dict = field(default_factory=dict)
    split_log: list = field(default_factory=list)


def run(*, settings: Settings) -> OnlineRows:
    """The online-imbalance grid computed where its rows are missing or stale: the training stage
    (:func:`train_online_inputs`), the context (:func:`prepare_online_context`), then every cell of
    :func:`profile_cells` (:func:`run_online_imbalance`)."""
    train_online_inputs(settings=settings)
    context, meta, split_log = prepare_online_context(settings=settings)
    return OnlineRows(results=run_online_imbalance(settings=settings, context=context), meta=meta, split_log=split_log)


@dataclass(frozen=True)
class OnlineReport:
    """Our online-imbalance table and figure from one set of rows (:func:`report`)."""

    settings: Settings
    rows: OnlineRows

    def table(self) -> pd.DataFrame:
        """:func:`online_table` of the rows (printed beside the paper's)."""
        return online_table(results=self.rows.results, settings=self.settings)

    def figure(self) -> plt.Figure:
        """:func:`plot_online_imbalance` of the rows."""
        return plot_online_imbalance(results=self.rows.results, settings=self.settings)


def report(*, settings: Settings, rows: OnlineRows) -> OnlineReport:
    """The table and figure of notebook 11 from ``rows`` (:func:`run`), built by this module's functions only."""
    return OnlineReport(settings=settings, rows=rows)


def online_table(*, results: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Our online-imbalance table, columns IR, beside the paper's CIFAR-10C-imb table on CIFAR-10-C
    profiles (it has DART, not DART-split); printed and written to ``results/<profile>/tables/``."""
    s = settings
    paper = None
    if s.test.corrupted_dataset == "cifar10c":
        paper = load_table("app_cifar10c_imb")
        paper = paper[paper.shift_param.isin([float(r) for r in s.online.irs])]
    title = (f"online imbalance on {s.test.corrupted_dataset}, columns IR; BNAdapt family over "
             f"{len(s.online.corruptions)}, TENT/SAR/ODS over {len(s.online.split_tta_corruptions)} corruption(s), "
             f"subsets of {s.test.imb_subset_size} ({s.profile} profile: {s.source.arch}, seed {s.seed}; "
             "paper: ResNet-26, CIFAR-10-C, 4 seeds)")
    table = beside_paper(results, paper, profile=s.profile, name="online_imbalance", title=title, row_order=ROW_ORDER,
                         paper_covers=CORRUPTIONS)
    print(render(table, title=title))
    return table


def paper_table2() -> pd.DataFrame:
    """The paper's Table 2 (accuracy %, mean over 15 corruptions), printed."""
    paper = load_table("table2_online_imb")
    paper["row"] = [row_label(m, r) for m, r in zip(paper.method, paper.refiner)]
    table = (paper.pivot_table(index="row", columns=["dataset", "shift_param"], values="accuracy")
             .reindex(["NoAdapt", "BNAdapt", "BNAdapt+DART", "BNAdapt+DART-split"]))
    print("the paper's Table 2 (accuracy %, mean over 15 corruptions):")
    print(table.to_string())
    return table


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
    ax.set_title(f"online imbalance, {settings.test.corrupted_dataset} ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="online_imbalance")
    return fig
