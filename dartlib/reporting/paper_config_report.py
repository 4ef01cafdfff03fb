"""Table 1 and CIFAR-10C-imb at the paper's g_phi beside the profile's own refiner and the paper's
numbers (notebook 06's section "At the paper's g_phi"; ``rows``: the grid's,
:func:`dartlib.studies.paper_config.paper_config_results`). Every number is a mean over the
corruptions, with its SE from :mod:`dartlib.analysis.noise` (clustered by test image, paired for a
gain, the seed spread added over g_phi seeds); a cell whose rows are not all there reads "not run
(k of K)"."""

from __future__ import annotations

import pandas as pd

from dartlib.analysis.noise import NAN, Estimate, combination
from dartlib.studies.paper_config import PAPER_VARIANTS
from dartlib.experiments.settings import Settings
from dartlib.reporting.paper import load_table

PAPER = PAPER_VARIANTS[0]  # the seed-0 refiner at the paper's configuration; its seeds are PAPER_VARIANTS


def _select(rows: pd.DataFrame, *, shift: str, param: float, method: str, refiners: tuple[str, ...],
            seeds: tuple[int, ...], corruptions: list[str], subset: str | None) -> pd.DataFrame:
    sel = rows[(rows["shift"] == shift) & (rows["shift_param"].astype(float) == float(param))
               & (rows["method"] == method) & rows["refiner"].isin(refiners) & rows["seed"].astype(int).isin(seeds)
               & rows["corruption"].isin(corruptions)]
    if subset is not None:
        sel = sel[sel["params"].fillna("").astype(str) == subset]
    return sel.assign(refiner=refiners[0])  # one cell per stream over the seeds' refiners


def _estimate(terms, *, expected: int, outcomes) -> Estimate | str:
    got = min(len(rows) for _, rows in terms)
    if got < expected:
        return f"not run ({got} of {expected})"
    return combination(terms=terms, outcomes=outcomes)


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if value is NAN or value.se != value.se:
        return f"{value.value:.2f}"
    return f"{value.value:.2f} ± {'≤' if value.kind == 'bound' else ''}{value.se:.2f}"


def _paper(table: str, *, shift: str, param: float, method: str, refiner: str) -> float:
    paper = load_table(table)
    sel = paper[(paper.dataset == "cifar10c") & (paper["shift"] == shift) & (paper.shift_param == float(param))
                & (paper.method == method) & (paper.refiner == refiner) & (paper.corruption == "mean")]
    return float(sel.accuracy.iloc[0]) if len(sel) else float("nan")


def bnadapt_block(*, settings: Settings, rows: pd.DataFrame, outcomes) -> pd.DataFrame:
    """BNAdapt without DART, with the paper's g_phi (seed 0; seeds 0, 1, 2) and with the profile's,
    and DART's gain over BNAdapt for each, on CIFAR-10C-LT (every rho) and CIFAR-10C-imb (every IR
    of ``imb_table_irs``), the paper's beside; one column per stream kind and setting."""
    lt = dict(shift="lt", corruptions=list(settings["table1_corruptions"]),
              subset=f"limit={settings['table1_stream_limit']}" if settings["table1_stream_limit"] else "")
    imb = dict(shift="online-imb", corruptions=list(settings["imb_corruptions"]), subset=f"subset={settings['imb_subset_size']}")
    columns = [(f"rho={r:g}", float(r), lt, "table1_main") for r in settings["lt_rhos"]]
    columns += [(f"IR={r:g}", float(r), imb, "app_cifar10c_imb") for r in settings["imb_table_irs"]]
    seeds3 = tuple(range(len(PAPER_VARIANTS)))
    own = f"{settings.profile} g_phi ({settings['dart_epochs']} ep, alpha {settings['dart_alpha']:g})"
    lines = {
        "NoAdapt": ("noadapt", ("none",), (0,)),
        "BNAdapt": ("bnadapt", ("none",), (0,)),
        "+DART, paper g_phi, seed 0": ("bnadapt", (PAPER,), (0,)),
        "+DART, paper g_phi, seeds 0-2": ("bnadapt", PAPER_VARIANTS, seeds3),
        f"+DART, {own}": ("bnadapt", ("dart",), (0,)),
    }
    table = {}
    for label, param, kind, paper_table in columns:
        col, k = {}, len(kind["corruptions"])
        pick = {name: _select(rows, param=param, method=m, refiners=r, seeds=s, **kind) for name, (m, r, s) in lines.items()}
        for name in lines:
            col[name] = _text(_estimate([(1.0, pick[name])], expected=k * len(lines[name][2]), outcomes=outcomes))
        base3 = _select(rows, param=param, method="bnadapt", refiners=("none",), seeds=seeds3, **kind)
        for name in list(lines)[2:]:
            base = base3 if "seeds 0-2" in name else pick["BNAdapt"]
            col[f"gain{name[5:]}"] = _text(_estimate([(1.0, pick[name]), (-1.0, base)],
                                                     expected=k * len(lines[name][2]), outcomes=outcomes))
        paper = {r: _paper(paper_table, shift=kind["shift"], param=param, method="bnadapt", refiner=r)
                 for r in ("none", "dart")}
        col["paper: BNAdapt"], col["paper: +DART"] = f"{paper['none']:.1f}", f"{paper['dart']:.1f}"
        col["paper: gain"] = f"{paper['dart'] - paper['none']:+.1f}"
        table[label] = col
    return pd.DataFrame(table)


def every_method_block(*, settings: Settings, rows: pd.DataFrame, outcomes, methods: list[str]) -> pd.DataFrame:
    """Per Table 1 method (after NoAdapt) and rho: DART's gain with the paper's g_phi (seed 0), with
    the profile's, and the paper's, on CIFAR-10C-LT."""
    kind = dict(shift="lt", corruptions=list(settings["table1_corruptions"]),
                subset=f"limit={settings['table1_stream_limit']}" if settings["table1_stream_limit"] else "")
    k, out = len(kind["corruptions"]), {}
    for method in methods:
        if method == "noadapt":
            continue
        for rho in settings["lt_rhos"]:
            base = _select(rows, param=rho, method=method, refiners=("none",), seeds=(0,), **kind)
            line = {}
            for label, refiner in (("paper g_phi", PAPER), (f"{settings.profile} g_phi", "dart")):
                dart = _select(rows, param=rho, method=method, refiners=(refiner,), seeds=(0,), **kind)
                line[f"gain, {label}"] = _text(_estimate([(1.0, dart), (-1.0, base)], expected=k, outcomes=outcomes))
            paper = [_paper("table1_main", shift="lt", param=rho, method=method, refiner=r) for r in ("none", "dart")]
            line["gain, paper"] = f"{paper[1] - paper[0]:+.1f}"
            out[(method, f"rho={float(rho):g}")] = line
    return pd.DataFrame(out).T
