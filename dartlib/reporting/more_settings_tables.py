"""Notebook 09's tables beside the paper's: CIFAR-10C-imb, mixed domains, MEMO, condensed data."""

from __future__ import annotations

import pandas as pd

from dartlib.experiments.grid import parse_params
from dartlib.experiments.settings import Settings
from dartlib.reporting.notebook_tables import show
from dartlib.reporting.paper import load_table


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
