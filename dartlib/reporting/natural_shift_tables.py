"""Notebook 12's tables: CIFAR-10.1-LT beside Table 1's column, and the paper's domain-benchmark
numbers."""

from __future__ import annotations

import pandas as pd

from dartlib.experiments.settings import Settings
from dartlib.experiments.table1 import TABLE1_METHODS
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label


def cifar10_1_table(*, results: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Our CIFAR-10.1-LT rows beside Table 1's, printed and written to ``results/<profile>/tables/``."""
    s = settings
    paper = load_table("table1_main")
    order = [row_label(m, r) for m in TABLE1_METHODS for r in ("none", "dart") if not (m == "noadapt" and r == "dart")]
    title = f"CIFAR-10.1-LT ({s.profile} profile: {s['source_arch']}, seed {s['seed']}; paper: ResNet-26, 4 seeds)"
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
