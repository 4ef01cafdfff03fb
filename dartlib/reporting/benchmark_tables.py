"""The large benchmarks' results beside the paper's (notebooks 11 and 12): the paper's numbers in
the results schema, and our averaged and full tables beside them."""

from __future__ import annotations

import pandas as pd

from dartlib.experiments.benchmarks import BENCHMARKS
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, row_label


def paper_results(name: str) -> pd.DataFrame:
    """The paper's numbers for a benchmark in the results schema: the averaged rows
    (``corruption == "mean"``; Table 2 with the DART-split table, or Table 1's column / the
    DomainNet table) and the per-corruption or per-scenario rows of the full tables."""
    bench = BENCHMARKS[name]
    if bench.kind == "online":
        means = pd.concat([load_table("table2_online_imb"), load_table("app_dart_split_large_scale")])
        prefix = "full_cifar100c_imb_ir" if bench.test_dataset == "cifar100c" else "full_imagenet_c_imb_ir"
        full = [load_table(f"{prefix}{r:g}") for r in bench.shift_params]
    elif name == "domainnet126":
        means, full = load_table("app_domainnet"), []
    else:
        means, full = load_table("table1_main"), [load_table(f"full_{name}")]
    means = means[(means.dataset == bench.test_dataset) & (means.corruption == "mean")]
    means = means.drop_duplicates(subset=["method", "refiner", "shift_param"])  # Table 2 rows recur in the appendix
    rows = pd.concat([means, *[f[(f.dataset == bench.test_dataset) & (f.corruption != "mean")] for f in full]])
    return rows.reset_index(drop=True)


def report(name: str, results: pd.DataFrame, *, profile: str, describe: str) -> dict[str, pd.DataFrame]:
    """Our tables beside the paper's for a benchmark's results (written under
    ``results/<profile>/tables/``): the averaged table (columns IR, or the benchmark) and the
    full tables (per corruption for each IR, or per scenario). ``describe`` (backbone, seeds,
    data) goes into every title."""
    bench = BENCHMARKS[name]
    paper = paper_results(name)
    order = [row_label(m, r) for m in bench.methods for r in bench.refiners if not (m == "noadapt" and r != "none")]
    means, full = paper[paper.corruption == "mean"], paper[paper.corruption != "mean"]
    tables = {}
    if bench.kind == "online":
        tables[name] = beside_paper(results, means, profile=profile, name=name, row_order=order,
                                    title=f"{name}, mean over corruptions, columns IR ({describe})")
        for ir in sorted(results.shift_param.unique()):
            key = f"{name}_ir{ir:g}"
            tables[key] = beside_paper(results[results.shift_param == ir], full[full.shift_param == ir], profile=profile,
                                       name=key, columns="corruption", row_order=order,
                                       title=f"{name}, IR {ir:g}, per corruption ({describe})")
    else:
        tables[name] = beside_paper(results, means, profile=profile, name=name, columns="dataset", row_order=order,
                                    title=f"{name}, mean over scenarios ({describe})")
        tables[f"{name}_scenarios"] = beside_paper(results, full if len(full) else None, profile=profile,
                                                   name=f"{name}_scenarios", columns="corruption", row_order=order,
                                                   title=f"{name}, per scenario ({describe})")
    return tables
