"""Notebook 08's tables beside the paper's: alpha, intermediate batch x hidden width, intermediate
epochs, test batch size, and the epochs refiners under online imbalance (beyond the paper)."""

from __future__ import annotations

import pandas as pd

from dartlib.experiments.grid import parse_params
from dartlib.experiments.settings import Settings
from dartlib.reporting.notebook_tables import profile_note, show
from dartlib.reporting.paper import load_table


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
