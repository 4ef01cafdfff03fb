"""Accuracy tables beside the paper's, outside Table 1: ablations (Table 4), sensitivity (Appendix D),
more settings, online imbalance (Table 2), natural shifts (Table 3) and the large benchmarks of
Tables 2 and 3 (run where their data are present, else listed as NOT RUN with what to download),
each titled with what our numbers and the paper's come from."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pandas as pd

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.studies.large_benchmarks import BENCHMARKS, missing_data, run_benchmark
from dartlib.studies.ablations import stream_column
from dartlib.experiments.grid import parse_params
from dartlib.studies.online_imbalance import ROW_ORDER
from dartlib.experiments.settings import Settings
from dartlib.studies.table1 import TABLE1_METHODS
from dartlib.paths import results_dir
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label


def profile_note(settings: Settings) -> str:
    """What our numbers and the paper's come from, for table titles."""
    s = settings
    return (f"{s.profile} profile: {s['source_arch']}, {s['corrupted_dataset']}, seed {s['seed']}; "
            "paper: ResNet-26, CIFAR-10-C, 4 seeds")


def show(name: str, frame: pd.DataFrame, paper: pd.DataFrame, *, settings: Settings, columns: str,
         order: list[str], caption: str, covers: Collection[str] | None = CORRUPTIONS) -> pd.DataFrame:
    """Our table beside the paper's (paper values only on CIFAR-10-C profiles), printed and written
    to ``results/<profile>/tables/``; a row averaged over other corruptions than ``covers`` gets no
    delta."""
    title = f"{caption} ({profile_note(settings)})"
    table = beside_paper(frame, paper if settings["corrupted_dataset"] == "cifar10c" else None,
                         profile=settings.profile, name=name, title=title, columns=columns, row_order=order,
                         paper_covers=covers)
    print(render(table, title=title))
    return table


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


def alpha_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's alpha table: BNAdapt and TENT, alone and with DART per alpha."""
    alphas = settings["alpha_values"]
    paper = load_table("app_alpha")
    paper["refiner"] = [f"DART (alpha={parse_params(p)['alpha']})" for p in paper.params]
    dart_rows = [f"{m}+DART (alpha={a:g})" for m in ("BNAdapt", "TENT") for a in alphas]
    order = ["BNAdapt", *dart_rows[: len(alphas)], "TENT", *dart_rows[len(alphas):]]
    return show("app_alpha", frame, paper, settings=settings, columns="shift_param", order=order,
                caption=f"alpha; BNAdapt over {len(settings['sensitivity_corruptions'])}, "
                        f"TENT over {len(settings['tent_corruptions'])} corruption(s)")


def hyper_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows: the intermediate batch (BNAdapt alone is one row); columns: hidden width x rho."""
    p = [parse_params(v) for v in frame.params]
    return frame.assign(method=[f"int batch {q['int_batch']}" if "int_batch" in q else "bnadapt" for q in p],
                        refiner=["none"] * len(frame),
                        column=[f"hidden {q['hidden']}, rho={r:g}" for q, r in zip(p, frame.shift_param)])


def hyper_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's intermediate batch size x hidden width table, BNAdapt+DART."""
    order = ["BNAdapt", *[f"int batch {b}" for b in settings["hyper_int_batches"]]]
    return show("app_hyperparameters", hyper_layout(frame), hyper_layout(load_table("app_hyperparameters")),
                settings=settings, columns="column", order=order,
                caption="intermediate batch size x hidden width, BNAdapt+DART")


def epochs_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows named by the refiner's intermediate epochs (BNAdapt alone: "bnadapt")."""
    return frame.assign(method=[f"{parse_params(p)['epochs']} epochs" if p else "bnadapt" for p in frame.params],
                        refiner="none")


def epochs_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's intermediate-epochs table, BNAdapt+DART."""
    order = ["BNAdapt", *[f"{e} epochs" for e in settings["epochs_grid"]]]
    return show("app_epochs", epochs_layout(frame), epochs_layout(load_table("app_epochs")), settings=settings,
                columns="shift_param", order=order, caption="intermediate epochs, BNAdapt+DART")


def epochs_imb_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """BNAdapt(+DART) per epochs refiner on CIFAR-10C-imb, mean over corruptions, printed; on
    CIFAR-10-C profiles with the paper's BNAdapt and 50-epoch BNAdapt+DART rows of its
    CIFAR-10C-imb table."""
    s = settings
    means = frame.assign(row=[f"+DART, {parse_params(p)['epochs']} epochs" if r == "dart" else "BNAdapt"
                              for r, p in zip(frame.refiner, frame.params)])
    means = means.pivot_table(index="row", columns="shift_param", values="accuracy")
    means = means.reindex(["BNAdapt", *[f"+DART, {e} epochs" for e in s["epochs_grid"]]])
    if s["corrupted_dataset"] == "cifar10c":
        paper = load_table("app_cifar10c_imb")
        paper = paper[(paper.method == "bnadapt") & paper.shift_param.isin(s["epochs_imb_irs"])]
        means.loc["paper: BNAdapt"] = paper[paper.refiner == "none"].set_index("shift_param").accuracy
        means.loc["paper: +DART, 50 epochs"] = paper[paper.refiner == "dart"].set_index("shift_param").accuracy
    means.columns = [f"IR {c:g}" for c in means.columns]
    print(f"BNAdapt(+DART) on {s['corrupted_dataset']}-imb, accuracy (%), mean over "
          f"{len(s['sensitivity_corruptions'])} corruption(s), subsets of {s['imb_subset_size']} "
          f"({profile_note(s)})")
    print(means.round(1).to_string())
    return means


def batch_size_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's test-batch-size table on balanced streams (columns: the batch sizes)."""
    paper = load_table("app_batch_size")
    paper["column"] = [int(parse_params(p)["test_batch"]) for p in paper.params]
    paper = paper[paper.column.isin(settings["test_batches"])]
    return show("app_batch_size", frame, paper, settings=settings, columns="column",
                order=["NoAdapt", "BNAdapt", "BNAdapt+DART", "TENT", "TENT+DART"],
                caption=f"test batch size, balanced {settings['corrupted_dataset']}, "
                        f"{len(settings['tent_corruptions'])} corruption(s)")


def online_imbalance_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's CIFAR-10C-imb table, columns IR."""
    s = settings
    return show("app_cifar10c_imb", frame, load_table("app_cifar10c_imb"), settings=s, columns="shift_param",
                order=["NoAdapt", "BNAdapt", "BNAdapt+DART", "TENT", "TENT+DART"],
                caption=f"CIFAR-10C-imb, columns IR; NoAdapt/BNAdapt over {len(s['imb_corruptions'])}, "
                        f"TENT over {len(s['tent_corruptions'])} corruption(s), subsets of {s['imb_subset_size']}")


def mixed_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns: "no label shift" or "Dirichlet <delta>"."""
    return frame.assign(column=["no label shift" if s == "none" else f"Dirichlet {p:g}"
                                for s, p in zip(frame["shift"], frame.shift_param)])


def mixed_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's mixed-domains table (one stream of all 15 corruptions: every delta is shown)."""
    return show("app_mixed", mixed_layout(frame), mixed_layout(load_table("app_mixed")), settings=settings,
                columns="column", covers=None, order=["NoAdapt", "BNAdapt", "BNAdapt+DART", "ROID", "ROID+DART"],
                caption=f"mixed domains, {settings['mixed_pool'] or 'all'} images of the 15-corruption pool")


def memo_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """MEMO's rows named by their BN mode."""
    bn = [parse_params(p).get("bn") for p in frame.params]
    return frame.assign(method=[f"MEMO ({b} BN)" if m == "memo" else m for m, b in zip(frame.method, bn)])


def memo_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's MEMO table on the LT streams."""
    s = settings
    limit = s["memo_stream_limit"]
    return show("app_memo", memo_layout(frame), memo_layout(load_table("app_memo")), settings=s,
                columns="shift_param",
                order=["NoAdapt", "MEMO (stored BN)", "MEMO (adapted BN)", "MEMO (adapted BN)+DART"],
                caption=f"MEMO on {s['corrupted_dataset']}-LT, {s['memo_augmentations']} views per image, "
                        f"{len(s['memo_corruptions'])} corruption(s)"
                        f"{', first ' + str(limit) + ' images per stream' if limit else ''}")


def condensed_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's condensed-data table, with the random-subset stand-in as an extra row."""
    ipc = settings["condensed_ipc"]
    return show("app_condensed", frame, load_table("app_condensed"), settings=settings, columns="shift_param",
                order=["BNAdapt", "BNAdapt+DART", "BNAdapt+dart-condensed", f"BNAdapt+dart-random{ipc}"],
                caption=f"g_phi on {ipc} images per class, {len(settings['condensed_corruptions'])} corruption(s)")


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


def benchmark_report(name: str, results: pd.DataFrame, *, profile: str, describe: str) -> dict[str, pd.DataFrame]:
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


def print_benchmarks(*, names: Sequence[str], settings: Settings, per_source_domain: bool = False) -> None:
    """For each benchmark: what is missing, or its cells run (``results/<profile>/<name>.csv``,
    resumable) and every table of :func:`benchmark_report` printed.
    ``per_source_domain``: the titles say the source model is one per domain (the domain benchmarks)."""
    for name in names:
        missing = missing_data(name)
        if missing:
            print(f"{name}: NOT RUN, missing:\n" + "\n".join(f"    {line}" for line in missing))
            continue
        bench = BENCHMARKS[name]
        results = run_benchmark(name, path=results_dir(settings.profile) / f"{name}.csv", seed=settings["seed"])
        model = f"{bench.arch} per source domain ({bench.recipe} recipe)" if per_source_domain else bench.arch
        describe = f"{settings.profile} profile: {model}, seed {settings['seed']}; paper: 4 seeds"
        for key, table in benchmark_report(name, results, profile=settings.profile, describe=describe).items():
            print(render(table, title=key))
