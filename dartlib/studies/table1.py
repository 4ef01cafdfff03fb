"""Table 1 (CIFAR-10C-LT block), read top to bottom: the cells (every method with and without DART
on every (corruption, rho) LT stream of CIFAR-10-C, or the profile's corrupted set), :func:`run`
(the training stage, the context, the cells through :mod:`dartlib.experiments.engine`: the rows)
or :func:`stored` (the rows as committed), and :func:`report` (the rows' tables: our accuracies
per row, DART's gain per method beside the paper's, NOTE's two readings, the block docs/results.md
prints), which the notebook, the results page and the book call; then the rendered table, the
per-corruption tables (Appendix, Tables 19 to 21), the direction of DART's effect per stream and
DART at rho = 1 against BNAdapt's accuracy.

Whether DART's effect "disagrees with the paper" is decided with one threshold,
:data:`dartlib.analysis.effects.FLAT_POINTS`, everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.analysis.effects import FLAT_POINTS, effect_summary, rank_correlation, refiner_effects
from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.sources import HOW_TO_GET, expected_path
from dartlib.experiments.cell_options import CellOptions, options_text
from dartlib.experiments.engine import paired
from dartlib.experiments.grid import Cell, grid, stored_rows
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir
from dartlib.reporting.figures import HALF_WIDTH, WIDTH, save_figure
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label, table_beside_paper, with_row_labels

# The paper's row order (Table 1); NOTE, DELTA and ODS are their TENT combinations (Appendix A).
TABLE1_METHODS = ("noadapt", "bnadapt", "tent", "pl", "note", "delta", "ods", "lame", "sar")
# The other reading of NOTE+DART (docs/deviations.md): DART also refines what NOTE reports. Table 1
# follows the paper's text (Appendix A: DART only decides what NOTE's memory stores).
NOTE_REPORT_OPTION = CellOptions.of(dart_use="report")


def table1_cells(*, dataset: str, corruptions, rhos, methods=TABLE1_METHODS, severity: int = 5, seed: int = 0,
                 refiners=("none", "dart"), limit: int = 0) -> list[Cell]:
    """Every (method, refiner) pair on every (corruption, rho) LT stream; NoAdapt without DART
    only, as in the paper. ``limit`` > 0 keeps the first ``limit`` images of each (shuffled) LT
    stream, which keeps its class distribution in expectation (reduced profiles).

    Ordered method by method (then refiner, rho, corruption), so that a grid stopped part-way
    holds complete rows of the table rather than a few streams of every row."""
    params = [options_text(limit=limit or None)]
    cells = grid(dataset=[dataset], shift=["lt"], method=list(methods), refiner=list(refiners),
                 shift_param=[float(r) for r in rhos], corruption=list(corruptions), severity=[severity],
                 params=params, seed=[seed])
    return paired(cells)


def profile_cells(settings: Settings) -> list[Cell]:
    """The Table 1 grid of a profile's (notebook 06's) settings."""
    return table1_cells(dataset=settings.test.corrupted_dataset, corruptions=settings.table1.corruptions,
                        rhos=settings.test.lt_rhos, methods=[*TABLE1_METHODS, *settings.table1.extra_methods],
                        severity=settings.test.severity, seed=settings.seed, limit=settings.table1.stream_limit)


def note_report_cells(cells: list[Cell]) -> list[Cell]:
    """The NOTE+DART cells of a Table 1 grid (``cells``) with ``dart_use=report``: the row a
    reader sets beside Table 1's default reading (stored in their own results file)."""
    return [replace(c, params=(c.options | NOTE_REPORT_OPTION).text)
            for c in cells if c.method == "note" and c.refiner == "dart"]


def profile_note_report_cells(settings: Settings) -> list[Cell]:
    """:func:`note_report_cells` of a profile's Table 1 grid."""
    return note_report_cells(profile_cells(settings))


@dataclass(frozen=True)
class Table1Rows:
    """Table 1's rows (``results``, each with its ``row`` label) and NOTE+DART's other reading
    (``note_report``, :data:`NOTE_REPORT_OPTION`), as :func:`run` computed or :func:`stored` read
    them; ``meta``: the source checkpoint's metadata where they were computed here."""

    results: pd.DataFrame
    note_report: pd.DataFrame
    meta: dict = field(default_factory=dict)


def run(*, settings: Settings, progress: bool | None = None) -> Table1Rows:
    """Table 1 computed where its rows are missing or stale: the training stage
    (:func:`~dartlib.experiments.training_stage.train_profile_inputs`: source model, test sets,
    notebook 04's g_phi, NOTE's IABN copy), the context loaded once, then the cells of
    :func:`profile_cells` and :func:`note_report_cells` through the one engine (keyed and resumable:
    ``results/<profile>/table1.csv`` and ``note_report.csv``). ``progress``: a line per cell (default:
    on every profile but smoke)."""
    from dartlib.experiments.engine import prepare_context, run_cells
    from dartlib.experiments.training_stage import train_profile_inputs

    train_profile_inputs(settings=settings)
    context, meta = prepare_context(settings=settings)
    progress = settings.profile != "smoke" if progress is None else progress
    folder, cells = results_dir(settings.profile), profile_cells(settings)
    results = run_cells(cells, context, path=folder / "table1.csv", experiment="table1", progress=progress)
    report_rows = run_cells(note_report_cells(cells), context, path=folder / "note_report.csv",
                            experiment="note_report", progress=progress)
    return Table1Rows(results=with_row_labels(results), note_report=report_rows, meta=meta)


def stored(*, settings: Settings) -> Table1Rows:
    """Table 1's rows as stored for ``settings`` (what :func:`run` wrote), computing nothing."""
    folder = results_dir(settings.profile)
    return Table1Rows(results=with_row_labels(stored_rows(profile_cells(settings), path=folder / "table1.csv")),
                      note_report=stored_rows(profile_note_report_cells(settings), path=folder / "note_report.csv"))


@dataclass(frozen=True)
class Table1Report:
    """The tables of Table 1's rows (:func:`report`): ``ours`` (mean accuracy per row and rho),
    ``gain`` (DART's, per method), the paper's (``paper``, ``paper_gain``; None off CIFAR-10-C)."""

    settings: Settings
    rows: Table1Rows
    methods: list[str]
    order: list[str]
    ours: pd.DataFrame
    gain: pd.DataFrame
    paper: pd.DataFrame | None
    paper_gain: pd.DataFrame | None

    def note_readings(self) -> pd.DataFrame:
        """:func:`note_readings` of the rows."""
        return note_readings(self.rows.results, self.rows.note_report)

    def beside_paper_block(self, *, corruptions: Sequence[str] = CORRUPTIONS) -> pd.DataFrame:
        """:func:`beside_paper_block` of the rows over the paper's methods (the rows it has numbers for)."""
        return beside_paper_block(results=self.rows.results, report_rows=self.rows.note_report, methods=TABLE1_METHODS,
                                  corruptions=corruptions)

    def print_gain_beside_paper(self) -> None:
        """:func:`print_gain_beside_paper` of the report's tables."""
        print_gain_beside_paper(self.ours, self.paper, self.gain, self.paper_gain,
                                corrupted_dataset=self.settings.test.corrupted_dataset)


def report(*, settings: Settings, rows: Table1Rows) -> Table1Report:
    """Table 1's tables from its ``rows`` (:func:`run` or :func:`stored`), built once for the
    notebook, the results page and the book: the profile's methods (Table 1's and ``extra_methods``)
    in the paper's row order, our accuracies, DART's gains, and the paper's on CIFAR-10-C."""
    methods = [*TABLE1_METHODS, *settings.table1.extra_methods]
    order = row_order(methods)
    ours = accuracy_by_row(rows.results, order)
    paper = paper_table1(order) if settings.test.corrupted_dataset == "cifar10c" else None
    return Table1Report(settings=settings, rows=rows, methods=methods, order=order, ours=ours,
                        gain=dart_gain(ours, methods), paper=paper,
                        paper_gain=dart_gain(paper, methods) if paper is not None else None)


def row_order(methods: Sequence[str]) -> list[str]:
    """Table 1's rows: each method without and with DART (NoAdapt without only)."""
    return [row_label(m, r) for m in methods for r in ("none", "dart") if not (m == "noadapt" and r == "dart")]


# The corrupted test sets by their names in the paper (a figure's title never shows a file's name).
DATASET_NAMES = {"cifar10c": "CIFAR-10C", "fmnistc": "Fashion-MNIST-C", "cifar100c": "CIFAR-100C", "imagenetc": "ImageNet-C"}


def accuracy_by_row(results: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Mean accuracy per Table 1 row (in ``order``) and rho (columns ``rho=...``)."""
    table = results.pivot_table(index="row", columns="shift_param", values="accuracy", aggfunc="mean").reindex(order)
    table.columns = [f"rho={c:g}" for c in table.columns]
    return table


def paper_table1(order: Sequence[str]) -> pd.DataFrame:
    """The paper's Table 1, CIFAR-10-C block, in the layout of :func:`accuracy_by_row`."""
    paper = load_table("table1_main")
    return accuracy_by_row(with_row_labels(paper[paper.dataset == "cifar10c"]), order)


def dart_gain(table: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """DART's gain (points) per method after NoAdapt (rows named by the method alone) and rho."""
    return pd.DataFrame({row_label(m, "none"): table.loc[row_label(m, "dart")] - table.loc[row_label(m, "none")]
                         for m in methods[1:]}).T


def sign_disagreements(gain: pd.DataFrame, paper_gain: pd.DataFrame) -> list[str]:
    """The (method, rho) cells where DART helps in one table and hurts in the other, by more than
    FLAT_POINTS in at least one of them."""
    disagree = ((np.sign(gain.round(1)) != np.sign(paper_gain.round(1)))
                & ((gain.abs() > FLAT_POINTS) | (paper_gain.abs() > FLAT_POINTS)) & paper_gain.notna())
    return [f"{m} {c}" for m in disagree.index for c in disagree.columns if disagree.loc[m, c]]


def print_gain_beside_paper(ours: pd.DataFrame, paper: pd.DataFrame | None, gain: pd.DataFrame,
                            paper_gain: pd.DataFrame | None, *, corrupted_dataset: str) -> None:
    """Our rows beside the paper's with their difference, DART's gain in both and the cells whose
    sign differs; without the paper's numbers, our gains alone."""
    if paper is None or paper_gain is None:
        print(f"the paper has no {corrupted_dataset} numbers; DART gain (points) on our streams:")
        print(gain.round(1).to_string())
        return
    print(pd.concat({"ours": ours, "paper": paper, "delta": ours - paper}, axis=1).round(1).to_string())
    print("\nDART gain (points), ours | paper:")
    print(pd.concat({"ours": gain, "paper": paper_gain}, axis=1).round(1).to_string())
    print("\ncells where the sign of DART's effect differs:", sign_disagreements(gain, paper_gain) or "none")


def dart_gain_se(rows: pd.DataFrame, methods: Sequence[str], *, outcomes=None) -> pd.DataFrame:
    """The SE of each cell of :func:`dart_gain` (points; :mod:`dartlib.analysis.noise`: paired image by
    image where ``outcomes`` holds the rows' per-image outcomes, else an upper bound), in its layout."""
    from dartlib.analysis.noise import difference

    rhos = sorted(rows["shift_param"].astype(float).unique())
    out = {}
    for m in methods[1:]:
        def at(refiner: str, rho: float) -> pd.DataFrame:
            return rows[(rows.method == m) & (rows.refiner == refiner) & (rows.shift_param.astype(float) == rho)]
        out[row_label(m, "none")] = {f"rho={rho:g}": difference(at("dart", rho), at("none", rho), outcomes=outcomes).se
                                     for rho in rhos}
    return pd.DataFrame(out).T


def show_dart_gain(gain: pd.DataFrame, paper_gain: pd.DataFrame | None, *, rows: pd.DataFrame, corrupted_dataset: str,
                   profile: str, outcomes=None) -> plt.Figure:
    """Bars of our DART gain per method and rho with ± 2 SE (:func:`dart_gain_se` on ``rows``, the
    per-image outcomes beside the profile's results unless ``outcomes`` is given), the paper's as
    black ticks when present."""
    from dartlib.experiments.grid import folder_outcomes

    outcomes = outcomes if outcomes is not None else folder_outcomes(results_dir(profile))
    ids = {row_label(m, "none"): m for m in set(rows.method)}
    se = dart_gain_se(rows, ["noadapt", *(ids[label] for label in gain.index)],
                      outcomes=outcomes).reindex(index=gain.index, columns=gain.columns)
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4))
    width = 0.8 / len(gain.columns)
    xs = np.arange(len(gain))
    for i, col in enumerate(gain.columns):
        ax.bar(xs + i * width, gain[col], width, yerr=2 * se[col], capsize=2, error_kw={"lw": 0.8},
               label=f"ours, {col.replace('rho=', 'ρ = ')}")
        if paper_gain is not None:
            ax.scatter(xs + i * width, paper_gain[col], marker="_", s=200, color="black", zorder=3,
                       label="the paper" if i == 0 else None)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(xs + width * (len(gain.columns) - 1) / 2)
    ax.set_xticklabels(gain.index)
    ax.set_ylabel("DART's gain (points, ± 2 SE)")
    ax.set_title(f"DART's gain per method on {DATASET_NAMES.get(corrupted_dataset, corrupted_dataset)}-LT "
                 f"({profile} profile)")
    # below the axes: inside, the legend covered a bar whatever its corner
    ax.legend(ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    save_figure(fig, profile=profile, name="table1_dart_gain")
    plt.show()
    return fig


def note_readings(results: pd.DataFrame, report_rows: pd.DataFrame) -> pd.DataFrame:
    """NOTE, NOTE+DART as Table 1 computes it (the refined predictions decide what PBRS stores;
    NOTE reports its own) and NOTE+DART with the reported predictions refined too, mean accuracy
    over corruptions per rho; the paper's NOTE rows beside them on CIFAR-10-C (Appendix A)."""
    rows = {"NOTE": results[(results.method == "note") & (results.refiner == "none")],
            "NOTE+DART (memory; Table 1)": results[(results.method == "note") & (results.refiner == "dart")],
            "NOTE+DART (report)": report_rows}
    table = pd.DataFrame({name: frame.groupby("shift_param").accuracy.mean() for name, frame in rows.items()}).T
    table.columns = [f"rho={c:g}" for c in table.columns]
    if set(results.dataset) == {"cifar10c"}:
        paper = paper_table1(["NOTE", "NOTE+DART"])
        table.loc["paper NOTE"], table.loc["paper NOTE+DART"] = paper.loc["NOTE"], paper.loc["NOTE+DART"]
    return table


def _signed(value: float) -> str:
    """A gain with its sign at one decimal; one that rounds to zero is "+0.0", not "-0.0"."""
    return f"{round(value, 1) + 0.0:+.1f}"


def beside_paper_block(*, results: pd.DataFrame, report_rows: pd.DataFrame, methods: Sequence[str],
                       corruptions: Sequence[str] = CORRUPTIONS) -> pd.DataFrame:
    """Table 1's CIFAR-10-C CIFAR-10C-LT block as docs/results.md prints it: per row and rho "ours /
    paper" (our mean over ``corruptions``, the paper's over all 15, one decimal), and on each +DART
    row DART's gain over its method's row at every rho, ours / paper, from the unrounded means. A cell
    whose rows do not cover ``corruptions`` reads "not run (k of K)", and so does a gain with such a
    side. NOTE+DART's other reading (``report_rows``, ``dart_use=report``) follows NOTE+DART as the
    row "NOTE+DART (report)", the paper's NOTE+DART beside it (the paper has one reading)."""
    order = row_order(methods)
    labelled = with_row_labels(results)
    if len(report_rows) and "NOTE+DART" in order:
        at = order.index("NOTE+DART") + 1
        labelled = pd.concat([labelled, with_row_labels(report_rows).assign(row="NOTE+DART (report)")])
        order = [*order[:at], "NOTE+DART (report)", *order[at:]]
    labelled = labelled[labelled.corruption.isin(corruptions)]
    ours = accuracy_by_row(labelled, order)
    covered = labelled.pivot_table(
        index="row", columns="shift_param", values="corruption", aggfunc="nunique").reindex(order).fillna(0)
    covered.columns = ours.columns
    paper = paper_table1([r.replace(" (report)", "") for r in order]).set_axis(order, axis=0)
    bases = {r: r.split("+")[0] for r in order}  # a +DART row's method row; the report row's is NOTE's
    gain = pd.DataFrame({r: ours.loc[r] - ours.loc[b] for r, b in bases.items() if r != b}).T
    paper_gain = pd.DataFrame({r: paper.loc[r] - paper.loc[b] for r, b in bases.items() if r != b}).T
    k = len(corruptions)

    def cell(row: str, column: str) -> str:
        got = int(covered.loc[row, column])
        return f"{ours.loc[row, column]:.1f} / {paper.loc[row, column]:.1f}" if got == k else f"not run ({got} of {k})"

    def gains(row: str) -> str:
        if row not in gain.index:
            return ""
        return "; ".join(f"{_signed(gain.loc[row, c])} / {_signed(paper_gain.loc[row, c])}"
                         if min(covered.loc[row, c], covered.loc[bases[row], c]) == k
                         else f"not run ({int(min(covered.loc[row, c], covered.loc[bases[row], c]))} of {k})"
                         for c in ours.columns)

    out = pd.DataFrame({c.replace("rho=", "rho = "): [cell(r, c) for r in order] for c in ours.columns}, index=order)
    out["DART gain at rho = " + "; ".join(c.removeprefix("rho=") for c in ours.columns) + ", ours / paper"] = [
        gains(r) for r in order]
    return out


def _paper_rows(corrupted_dataset: str) -> pd.DataFrame | None:
    paper_rows = load_table("table1_main") if corrupted_dataset == "cifar10c" else None
    return paper_rows[paper_rows.dataset == "cifar10c"] if paper_rows is not None else None


def rendered_table(results: pd.DataFrame, *, order: Sequence[str], title: str, corrupted_dataset: str,
                   outcomes=None) -> str:
    """The rendered Table 1 in Markdown (mean over corruptions per seed, mean ± std over seeds,
    the paper's value and our delta beside each cell on CIFAR-10-C); nothing written. ``outcomes``:
    the rows' per-image outcomes (:func:`dartlib.experiments.grid.folder_outcomes`), for the SEs."""
    table = table_beside_paper(results, _paper_rows(corrupted_dataset), row_order=list(order), paper_covers=CORRUPTIONS,
                               outcomes=outcomes)
    return render(table, title=title)


class MarkdownText:
    """Markdown that a notebook shows rendered (text/markdown: a table shows as a table) and a
    console or a plain-text reader shows as the Markdown itself (text/plain)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def print_rendered_table(results: pd.DataFrame, *, order: Sequence[str], title: str, corrupted_dataset: str,
                         profile: str) -> None:
    """:func:`rendered_table`, also written to results/<profile>/tables/; displayed as Markdown, so
    a notebook (and the book) shows it as a table."""
    from IPython.display import display

    display(MarkdownText(render(beside_paper(results, _paper_rows(corrupted_dataset), profile=profile, name="table1",
                                             title=title, row_order=list(order), paper_covers=CORRUPTIONS),
                                title=title)))


def print_other_columns(names: Sequence[str] = ("cifar10.1", "pacs", "officehome")) -> None:
    """Whether the data of Table 1's other columns are present, and how to get them."""
    for name in names:
        path = expected_path(name)
        print(f"{name}: {'present at ' + str(path) if path.exists() else 'NOT RUN (data absent)'}")
        if not path.exists():
            print(f"    how to get it: {HOW_TO_GET[name]}")


def per_corruption_table(results: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Accuracy per (rho, Table 1 row) and corruption: the appendix's full CIFAR-10C-LT tables."""
    full = results.pivot_table(index=["shift_param", "row"], columns="corruption", values="accuracy")
    full = full.reindex(pd.MultiIndex.from_product([sorted(results.shift_param.unique()), order]))
    full.index.names = ["rho", "method"]
    return full


def print_dart_effects(results: pd.DataFrame, *, methods: Sequence[str], corrupted_dataset: str, profile: str) -> None:
    """DART's gain per stream ours beside the paper's per-corruption tables, each classed up, flat
    (within FLAT_POINTS) or down; the streams where the two differ in direction are listed and
    every stream is written to results/<profile>/table1_dart_effects.csv."""
    if corrupted_dataset != "cifar10c":
        print(f"the paper has no per-corruption {corrupted_dataset} tables; see the per-corruption accuracies above")
        return
    paper_full = pd.concat([load_table(f"full_cifar10c_lt_rho{r:g}") for r in (1, 10, 100)])
    effects = refiner_effects(results, paper_full)
    effects.to_csv(results_dir(profile) / "table1_dart_effects.csv", index=False, float_format="%.2f")
    summary = effect_summary(effects)
    rhos = sorted(results.shift_param.unique())
    summary = summary.reindex([(m, r) for m in methods for r in rhos if (m, r) in summary.index])
    print(f"DART's gain (points) per stream, mean over corruptions; directions beyond ±{FLAT_POINTS} points")
    print(summary.round(2).to_string())
    opposite = effects[effects.opposite]
    print(f"\nstreams where DART helps in one and hurts in the other: {len(opposite)} of {len(effects)}")
    if len(opposite):
        print(opposite[["method", "shift_param", "corruption", "ours", "paper"]].round(2).to_string(index=False))


def show_rho1_gain(ours: pd.DataFrame, paper: pd.DataFrame, *, label: str, profile: str) -> None:
    """DART's gain at rho = 1 against BNAdapt's accuracy, one point per corruption, ours and the paper's."""
    fig, ax = plt.subplots(figsize=(HALF_WIDTH, 3.6))
    ax.scatter(ours.accuracy, ours.gain, label=label)
    ax.scatter(paper.accuracy, paper.gain, marker="x", color="black", label="paper (ResNet-26, CIFAR-10-C)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("BNAdapt accuracy at ρ=1 (%)")
    ax.set_ylabel("DART gain at ρ=1 (points)")
    ax.set_title("DART at ρ=1, one point per corruption")
    ax.legend()
    save_figure(fig, profile=profile, name="table1_rho1_gain_vs_accuracy")
    plt.show()


def print_rho1_summary(tables: dict[str, pd.DataFrame]) -> None:
    """Per table: the mean gain at rho = 1, its rank correlation with accuracy and the largest losses."""
    for who, table in tables.items():
        rho = rank_correlation(table)
        worst = table.nsmallest(3, "gain")
        print(f"{who}: {len(table)} corruption(s), mean gain {table.gain.mean():+.2f}; Spearman(accuracy, gain) "
              + ("n/a (fewer than 3 corruptions)" if np.isnan(rho) else f"{rho:+.2f}") + "; largest losses: "
              + ", ".join(f"{r.corruption} {r.gain:+.1f} at {r.accuracy:.1f}%" for r in worst.itertuples()))
