"""Notebook 11's tables: the profile's online-imbalance table beside the paper's CIFAR-10C-imb
table, and the paper's Table 2."""

from __future__ import annotations

import pandas as pd

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.experiments.online import ROW_ORDER
from dartlib.experiments.settings import Settings
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label


def online_table(*, results: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Our online-imbalance table, columns IR, beside the paper's CIFAR-10C-imb table on CIFAR-10-C
    profiles (it has DART, not DART-split); printed and written to ``results/<profile>/tables/``."""
    s = settings
    paper = None
    if s["corrupted_dataset"] == "cifar10c":
        paper = load_table("app_cifar10c_imb")
        paper = paper[paper.shift_param.isin([float(r) for r in s["online_irs"]])]
    title = (f"online imbalance on {s['corrupted_dataset']}, columns IR; BNAdapt family over "
             f"{len(s['online_corruptions'])}, TENT/SAR/ODS over {len(s['split_tta_corruptions'])} corruption(s), "
             f"subsets of {s['imb_subset_size']} ({s.profile} profile: {s['source_arch']}, seed {s['seed']}; "
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
