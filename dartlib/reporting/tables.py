"""Results tables in the paper's layout: rows = method (+DART), columns = a shift parameter (or a
corruption, a dataset), each cell our mean +- std over seeds with the paper's value and our delta
beside it; the best of ours per column in bold. Written as CSV, Markdown and LaTeX.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pandas as pd

from dartlib.analysis.noise import SE_SENTENCE, Outcomes, mean_estimate
from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.files import write_text_atomic
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir

METHOD_NAMES = {"noadapt": "NoAdapt", "bnadapt": "BNAdapt", "tent": "TENT", "pl": "PL", "note": "NOTE", "delta": "DELTA",
                "ods": "ODS", "lame": "LAME", "sar": "SAR", "memo": "MEMO", "roid": "ROID"}
FORMATS = ("csv", "markdown", "latex")


def row_label(method: str, refiner: str) -> str:
    """``bnadapt``, ``dart`` -> ``BNAdapt+DART``; other refiners keep their names."""
    name = METHOD_NAMES.get(method, method)
    if refiner in ("none", ""):
        return name
    return f"{name}+{ {'dart': 'DART', 'dart-split': 'DART-split'}.get(refiner, refiner)}"


def with_row_labels(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` with a ``row`` column naming each row as the tables do (:func:`row_label`)."""
    return results.assign(row=[row_label(m, r) for m, r in zip(results.method, results.refiner)])


def _column_label(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def summarise(frame: pd.DataFrame, *, columns: str = "shift_param", value: str = "accuracy",
              std: str | None = None) -> pd.DataFrame:
    """Long results (one row per cell and seed) -> mean and std per (row label, column).

    ``std``: a column that already holds the std (the paper's transcriptions); otherwise the std
    over seeds (0 for a single seed)."""
    frame = frame.assign(row=[row_label(m, r) for m, r in zip(frame["method"], frame["refiner"])],
                         col=[_column_label(v) for v in frame[columns]])
    grouped = frame.groupby(["row", "col"], sort=False)
    out = grouped[value].mean().to_frame("mean")
    if std is not None:
        out["std"] = grouped[std].mean()
    else:
        out["std"] = grouped[value].std(ddof=0).fillna(0.0)  # over seeds (population std, as numpy.std)
        out["n"] = grouped[value].count()
        if "se" in frame:  # one seed: the SE of its value (analysis.noise)
            out["se"] = grouped["se"].mean().where(out["n"] == 1)
            out["se_bound"] = grouped["se_bound"].max() if "se_bound" in frame else False
    return out


def compare(ours: pd.DataFrame, paper: pd.DataFrame | None, *, columns: str = "shift_param",
            row_order: list[str] | None = None) -> pd.DataFrame:
    """One row per (row, col): ours, ours_std, ours_n (seeds), paper, paper_std, delta; rows in ``row_order``
    (row labels, see :func:`row_label`; rows not listed follow), else in the order first seen in
    ``ours`` (then any only in the paper)."""
    mine = summarise(ours, columns=columns).rename(columns={"mean": "ours", "std": "ours_std", "n": "ours_n",
                                                            "se": "ours_se",
                                                            "se_bound": "ours_se_bound"})
    if paper is not None and len(paper):
        theirs = summarise(paper, columns=columns, std="std").rename(columns={"mean": "paper", "std": "paper_std"})
        table = mine.join(theirs, how="outer", sort=False)
        order = list(dict.fromkeys([*mine.index, *theirs.index]))
        table = table.reindex(order)
    else:
        table = mine.assign(paper=np.nan, paper_std=np.nan)
    table["delta"] = table["ours"] - table["paper"]
    if row_order is not None:
        rank = {r: i for i, r in enumerate(row_order)}
        table = table.reindex(sorted(table.index, key=lambda rc: rank.get(rc[0], len(rank))))
    return table


def _num(v: float, signed: bool = False, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def render(table: pd.DataFrame, *, fmt: str = "markdown", title: str = "") -> str:
    """Render :func:`compare`'s table in the paper's layout."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    if fmt == "csv":
        return table.reset_index().rename(columns={"level_0": "row", "level_1": "col"}).to_csv(index=False, float_format="%.2f")
    rows = list(dict.fromkeys(table.index.get_level_values(0)))
    cols = list(dict.fromkeys(table.index.get_level_values(1)))
    # a cell with both values and no delta: ours averages over other corruptions (beside_paper)
    other_set = table["delta"].isna() & table["ours"].notna() & table["paper"].notna()
    best = {c: table.xs(c, level=1)["ours"].max() for c in cols}
    lines = []
    if fmt == "markdown":
        if title:
            lines += [f"**{title}**", ""]
        lines.append("| method | " + " | ".join(cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
    else:
        lines.append("\\begin{tabular}{l" + "c" * len(cols) + "}")
        lines.append("\\toprule")
        lines.append("Method & " + " & ".join(cols) + " \\\\ \\midrule")
    for r in rows:
        cells = []
        for c in cols:
            if (r, c) not in table.index:
                cells.append("–")
                continue
            e = table.loc[(r, c)]
            ours = _num(e["ours"])
            if not math.isnan(e["ours"]) and e["ours"] == best[c]:
                ours = f"**{ours}**" if fmt == "markdown" else f"\\textbf{{{ours}}}"
            pm = " ± " if fmt == "markdown" else "$\\pm$"
            if math.isnan(e["ours"]):
                text = "–"
            elif e.get("ours_n", 2) > 1:
                text = f"{ours}{pm}{_num(e['ours_std'])}"
            else:  # one seed: its SE, marked apart from a spread over seeds ("≤": an upper bound, analysis.noise)
                se = e.get("ours_se", math.nan)
                le = ("≤" if fmt == "markdown" else "\\leq ") if bool(e.get("ours_se_bound", False)) else ""
                text = ours if math.isnan(se) else f"{ours}{pm}{le}{_num(se, digits=2)}{' SE' if fmt == 'markdown' else '$^{se}$'}"
            if not math.isnan(e["paper"]):
                delta = "n/c" if other_set.loc[(r, c)] else _num(e["delta"], signed=True)
                text += f" ({_num(e['paper'])}; {delta})" if fmt == "markdown" else f" ({_num(e['paper'])}; ${delta}$)"
            cells.append(text)
        if fmt == "markdown":
            lines.append(f"| {r} | " + " | ".join(cells) + " |")
        else:
            lines.append(f"{r} & " + " & ".join(cells) + " \\\\")
    if fmt == "latex":
        lines += ["\\bottomrule", "\\end{tabular}"]
    else:
        lines += ["", "Cells: ours mean ± std over seeds, or for one seed its value ± its SE (paper's value: mean "
                      "over its seeds; ours − paper); best of ours per column in bold. A difference within 2 SE is "
                      f"within noise. {SE_SENTENCE}."]
        if other_set.any():
            lines.append("n/c: not compared, ours averages over fewer corruptions than the paper's mean over all 15.")
    return "\n".join(lines) + "\n"


def write_tables(table: pd.DataFrame, *, profile: str, name: str, title: str = "") -> dict[str, Path]:
    """``results/<profile>/tables/<name>.{csv,md,tex}``; returns the paths."""
    folder = results_dir(profile) / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fmt, ext in (("csv", "csv"), ("markdown", "md"), ("latex", "tex")):
        path = folder / f"{name}.{ext}"
        write_text_atomic(path, render(table, fmt=fmt, title=title))  # whole or not at all
        paths[fmt] = path
    return paths


def table_beside_paper(results: pd.DataFrame, paper: pd.DataFrame | None, *, columns: str = "shift_param",
                       row_order: list[str] | None = None, paper_covers: Collection[str] | None = None,
                       outcomes: Outcomes | None = None) -> pd.DataFrame:
    """``results`` (one row per cell) averaged per seed over the other axes (corruptions), beside
    ``paper`` (:func:`compare`).

    ``paper_covers``: the corruptions the paper's values average over (its tables print the mean
    over all 15 of CIFAR-10-C). A cell of ours that averages over a different set is shown beside
    the paper's value but gets no delta (rendered "n/c"), since the two means are not of the same
    thing (a row run on a subset of corruptions, or a grid still running). ``outcomes``: the rows'
    per-image outcomes; the SE of a mean over corruptions is clustered by image where they are
    known and an upper bound where not (:mod:`dartlib.analysis.noise`)."""
    keys = ["method", "refiner", columns, "seed"]
    per_seed = results.groupby(keys, as_index=False, sort=False)["accuracy"].mean()
    if "n" in results and "corruption" in results:  # the SE of each per-seed mean over its cells (analysis.noise)
        estimates = [mean_estimate(rows=group, outcomes=outcomes) for _, group in results.groupby(keys, sort=False)]
        per_seed["se"] = [e.se for e in estimates]
        per_seed["se_bound"] = [e.kind == "bound" for e in estimates]
    table = compare(per_seed, paper, columns=columns, row_order=row_order)
    if paper_covers is not None and paper is not None:
        for key in _covering_other_sets(results, columns=columns, covers=paper_covers):
            if key in table.index:
                table.loc[key, "delta"] = np.nan
    return table


def beside_paper(results: pd.DataFrame, paper: pd.DataFrame | None, *, profile: str, name: str, title: str,
                 columns: str = "shift_param", row_order: list[str] | None = None,
                 paper_covers: Collection[str] | None = None) -> pd.DataFrame:
    """A notebook's table (:func:`table_beside_paper`), also written by :func:`write_tables`."""
    from dartlib.experiments.grid import folder_outcomes

    table = table_beside_paper(results, paper, columns=columns, row_order=row_order, paper_covers=paper_covers,
                               outcomes=folder_outcomes(results_dir(profile)))
    write_tables(table, profile=profile, name=name, title=title)
    return table


def _covering_other_sets(results: pd.DataFrame, *, columns: str, covers: Collection[str]) -> list[tuple[str, str]]:
    """(row label, column label) of the cells whose corruptions differ from ``covers``."""
    frame = results.assign(row=[row_label(m, r) for m, r in zip(results["method"], results["refiner"])],
                           col=[_column_label(v) for v in results[columns]])
    sets = frame.groupby(["row", "col"], sort=False)["corruption"].agg(frozenset)
    return [key for key, got in sets.items() if got != frozenset(covers)]


def profile_note(settings: Settings) -> str:
    """What our numbers and the paper's come from, for table titles."""
    s = settings
    return (f"{s.profile} profile: {s.source.arch}, {s.test.corrupted_dataset}, seed {s.seed}; "
            "paper: ResNet-26, CIFAR-10-C, 4 seeds")


def show(name: str, frame: pd.DataFrame, paper: pd.DataFrame, *, settings: Settings, columns: str,
         order: list[str], caption: str, covers: Collection[str] | None = CORRUPTIONS) -> pd.DataFrame:
    """Our table beside the paper's (paper values only on CIFAR-10-C profiles), printed and written
    to ``results/<profile>/tables/``; a row averaged over other corruptions than ``covers`` gets no
    delta."""
    title = f"{caption} ({profile_note(settings)})"
    table = beside_paper(frame, paper if settings.test.corrupted_dataset == "cifar10c" else None,
                         profile=settings.profile, name=name, title=title, columns=columns, row_order=order,
                         paper_covers=covers)
    print(render(table, title=title))
    return table
