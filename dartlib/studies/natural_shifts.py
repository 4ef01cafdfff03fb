"""CIFAR-10.1-LT, Table 1's natural-shift column (notebook 12): the profile's CIFAR-10
source model and notebook 04's g_phi on the long-tailed subsets of CIFAR-10.1, every Table 1 method
with and without DART (``results/<profile>/natural_shifts.csv``, resumable).

Its tables beside the paper's: :func:`cifar10_1_table`, :func:`paper_domain_tables`."""

from __future__ import annotations

import pandas as pd

from dartlib.data.sources import HOW_TO_GET, expected_path
from dartlib.experiments.engine import prepare_context, run_cells
from dartlib.experiments.settings import Settings
from dartlib.experiments.training_stage import train_profile_inputs
from dartlib.paths import results_dir
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label
from dartlib.studies.table1 import TABLE1_METHODS, table1_cells


def cifar10_1_not_run(settings: Settings) -> str | None:
    """Why CIFAR-10.1-LT cannot run on this profile or machine (``None`` when it can)."""
    if settings.source.dataset != "cifar10":
        return (f"cifar10.1: NOT RUN (needs a CIFAR-10 source model; the {settings.profile} profile's is "
                f"{settings.source.arch} on {settings.source.dataset})")
    if not expected_path("cifar10.1").exists():
        return (f"cifar10.1: NOT RUN (data absent at {expected_path('cifar10.1')}); "
                f"how to get it: {HOW_TO_GET['cifar10.1']}")
    return None


def run_cifar10_1(settings: Settings) -> pd.DataFrame:
    """Every Table 1 cell on CIFAR-10.1-LT at the profile's rhos."""
    train_profile_inputs(settings=settings)
    context, _ = prepare_context(settings=settings)
    cells = table1_cells(dataset="cifar10.1", corruptions=["clean"], rhos=settings.test.lt_rhos, seed=settings.seed)
    return run_cells(cells, context, path=results_dir(settings.profile) / "natural_shifts.csv",
                     experiment="natural_shifts")


def cifar10_1_table(*, results: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Our CIFAR-10.1-LT rows beside Table 1's, printed and written to ``results/<profile>/tables/``."""
    s = settings
    paper = load_table("table1_main")
    order = [row_label(m, r) for m in TABLE1_METHODS for r in ("none", "dart") if not (m == "noadapt" and r == "dart")]
    title = f"CIFAR-10.1-LT ({s.profile} profile: {s.source.arch}, seed {s.seed}; paper: ResNet-26, 4 seeds)"
    table = beside_paper(results, paper[paper.dataset == "cifar10.1"], profile=s.profile, name="table1_cifar10_1",
                         title=title, row_order=order)
    print(render(table, title=title))
    return table


def paper_domain_tables() -> pd.DataFrame:
    """Table 1's PACS and OfficeHome columns (printed), and how many per-scenario cells of PACS,
    OfficeHome and DomainNet-126 are transcribed; returns those full tables."""
    paper = load_table("table1_main")
    domains = paper[paper.dataset.isin(["pacs", "officehome"])].copy()
    domains["row"] = [row_label(m, r) for m, r in zip(domains.method, domains.refiner)]
    print("the paper's Table 1, PACS and OfficeHome columns (accuracy %, mean over 12 scenarios, ResNet-50):")
    print(domains.pivot_table(index="row", columns="dataset", values="accuracy", sort=False).to_string())
    full = pd.concat([load_table("full_pacs"), load_table("full_officehome"), load_table("app_domainnet")],
                     ignore_index=True)
    scenarios = full[full.corruption != "mean"].groupby("dataset").corruption.nunique().to_dict()
    print(f"\nfull per-scenario tables transcribed: {len(full)} cells; scenarios per benchmark: {scenarios}")
    return full
