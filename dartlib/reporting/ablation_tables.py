"""Notebook 07's tables beside the paper's: Tables 3-5 and the appendix's DART-split table."""

from __future__ import annotations

import pandas as pd

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.experiments.ablation_study import stream_column
from dartlib.experiments.settings import Settings
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label

# paper table -> (rows shown, shifts)
ABLATION_TABLES: dict[str, tuple[list[str], list[str]]] = {
    "table3_ablation_io": (["none", "dart-pbar-only", "dart-w-only", "dart-b-only", "dart"], ["lt"]),
    "table4_ablation_sampling": (["none", "dart-sampling-unif-lt", "dart"], ["lt", "online-imb"]),
    "table5_ablation_output": (["none", "dart-additive", "dart"], ["lt"]),
    "app_dart_split_cifar10c_lt": (["none", "dart-split", "dart"], ["lt"]),
}


def ablation_tables(*, results: pd.DataFrame, settings: Settings) -> dict[str, pd.DataFrame]:
    """Each table of :data:`ABLATION_TABLES`: our rows beside the paper's (paper values only on
    CIFAR-10-C profiles), printed and written to ``results/<profile>/tables/``."""
    s = settings
    rendered = {}
    for name, (rows, shifts) in ABLATION_TABLES.items():
        mine = results[results.refiner.isin(rows) & results["shift"].isin(shifts)]
        paper = None
        if s["corrupted_dataset"] == "cifar10c":
            paper = load_table(name)
            paper = paper.assign(column=stream_column(paper))
            paper = paper[paper.refiner.isin(rows) & paper["shift"].isin(shifts)]
        title = (f"{name} ({s.profile} profile: {s['source_arch']}, {s['corrupted_dataset']}, "
                 f"{len(s['ablation_corruptions'])} corruption(s), {s['ablation_epochs']} intermediate epoch(s), "
                 f"seed {s['seed']}; paper: ResNet-26, CIFAR-10-C, 4 seeds)")
        rendered[name] = beside_paper(mine, paper, profile=s.profile, name=name, title=title, columns="column",
                                      paper_covers=CORRUPTIONS, row_order=[row_label("bnadapt", r) for r in rows])
        print(render(rendered[name], title=title))
    return rendered
