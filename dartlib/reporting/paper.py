"""Numbers reported in the DART paper, as tidy tables.

Every results table of the paper is transcribed into ``data/paper/<name>.csv`` (see
``data/paper/README.md`` for the conventions).  This module only knows where those files are
and how to read them::

    from dartlib.reporting.paper import TABLES, load_table
    df = load_table("table1_main")

All but one of the files share the results schema ``SCHEMA`` (the same columns as the
reproduced results, plus ``table`` and ``std``).  The test-time cost table ``app_cost`` has its
own columns ``COST_COLUMNS``.

Paths are resolved from the repository root (``dartlib.paths``), so the loader works from any
working directory.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dartlib.paths import PAPER_DATA_DIR as PAPER_DIR

SCHEMA = [
    "table",
    "experiment",
    "dataset",
    "shift",
    "shift_param",
    "corruption",
    "severity",
    "method",
    "refiner",
    "params",
    "seed",
    "n",
    "accuracy",
    "std",
]
COST_COLUMNS = [
    "table",
    "experiment",
    "dataset",
    "method",
    "refiner",
    "params_m",
    "trainable_params_m",
    "flops_g",
    "wall_clock_s",
]

_TEXT = ["table", "experiment", "dataset", "shift", "corruption", "method", "refiner", "params", "seed"]
_FLOAT = ["shift_param", "accuracy", "std"]
_INT = ["severity", "n"]


def _entry(label: str, caption: str, section: str, schema: str = "results") -> dict:
    return {"label": label, "caption": caption, "section": section, "schema": schema}


# name -> file, LaTeX label, short description.  Tables of the "Full results" appendix carry
# no \label in the source; they get a made-up label "unlabeled: <name>".
TABLES: dict[str, dict] = {
    "table1_main": _entry(
        "table: cifar10lt",
        "Main results: nine TTA baselines with/without DART on CIFAR-10C-LT, CIFAR-10.1-LT "
        "(rho 1/10/100), PACS and OfficeHome (averages)",
        "main",
    ),
    "table2_online_imb": _entry(
        "table: onlineimb",
        "BNAdapt with DART / DART-split on CIFAR-100C-imb and ImageNet-C-imb (online imbalance)",
        "main",
    ),
    "table3_ablation_io": _entry(
        "table: ablation",
        "Ablation over the inputs (p_bar, d) and outputs (W, b) of g_phi on CIFAR-10C-LT",
        "main",
    ),
    "table4_ablation_sampling": _entry(
        "table: ablation_dirichlet",
        "Ablation: Dirichlet vs uniform & LT(rho=20) batch sampling at intermediate time",
        "main",
    ),
    "table5_ablation_output": _entry(
        "table: dart_variant_pred_ref",
        "Ablation: affine refinement vs additive-parameter output of g_phi on CIFAR-10C-LT",
        "main",
    ),
    "app_cost": _entry(
        "table: additoinal_cost",
        "Test-time cost (parameters, FLOPs, wall clock) on balanced CIFAR-10C",
        "appendix",
        schema="cost",
    ),
    "app_dart_split_cifar10c_lt": _entry(
        "table: dart-split on cifar10clt",
        "DART vs DART-split applied to BNAdapt on CIFAR-10C-LT",
        "appendix",
    ),
    "app_dart_split_large_scale": _entry(
        "table: cifar-100c-imb",
        "DART-split combined with BNAdapt/TENT/SAR/ODS on CIFAR-100C-imb and ImageNet-C-imb",
        "appendix",
    ),
    "app_alpha": _entry(
        "tab: diff alpha",
        "Sensitivity to the regularisation weight alpha (BNAdapt and TENT with DART), no std",
        "appendix",
    ),
    "app_condensed": _entry(
        "table: condensed_tr_data",
        "DART trained on condensed (distilled) CIFAR-10 data at intermediate time",
        "appendix",
    ),
    "app_mixed": _entry(
        "table: mixed",
        "Mixed-domain CIFAR-10C with and without Dirichlet label shift (BNAdapt, ROID)",
        "appendix",
    ),
    "app_batch_size": _entry(
        "table: small_batch_size",
        "Balanced CIFAR-10C with test batch sizes 4..200",
        "appendix",
    ),
    "app_hyperparameters": _entry(
        "table: hyperparameter",
        "Intermediate batch size x hidden width of g_phi on CIFAR-10C-LT",
        "appendix",
    ),
    "app_epochs": _entry(
        "tab: diff epochs",
        "Number of intermediate-time training epochs on CIFAR-10C-LT, no std",
        "appendix",
    ),
    "app_cifar10c_imb": _entry(
        "table: cifar10c-imb",
        "BNAdapt and TENT with/without DART on CIFAR-10C-imb (online imbalance)",
        "appendix",
    ),
    "app_domainnet": _entry(
        "table: domainnet",
        "BNAdapt with/without DART on the 12 DomainNet-126 scenarios, no std",
        "appendix",
    ),
    "app_memo": _entry(
        "table: memo",
        "MEMO (stored / adapted BN statistics) with and without DART on CIFAR-10C-LT",
        "appendix",
    ),
}

for _rho in (1, 10, 100):
    TABLES[f"full_cifar10c_lt_rho{_rho}"] = _entry(
        f"unlabeled: full_cifar10c_lt_rho{_rho}",
        f"Per-corruption accuracy on CIFAR-10C-LT, rho={_rho}",
        "appendix",
    )
TABLES["full_pacs"] = _entry(
    "unlabeled: full_pacs", "Per-scenario accuracy on PACS (12 source->target pairs + mean)", "appendix"
)
TABLES["full_officehome"] = _entry(
    "unlabeled: full_officehome",
    "Per-scenario accuracy on OfficeHome (12 source->target pairs + mean)",
    "appendix",
)
for _ir in (1, 200, 500, 50000):
    TABLES[f"full_cifar100c_imb_ir{_ir}"] = _entry(
        f"unlabeled: full_cifar100c_imb_ir{_ir}",
        f"Per-corruption accuracy on CIFAR-100C-imb, IR{_ir}",
        "appendix",
    )
for _ir in (1, 1000, 5000, 500000):
    TABLES[f"full_imagenet_c_imb_ir{_ir}"] = _entry(
        f"unlabeled: full_imagenet_c_imb_ir{_ir}",
        f"Per-corruption accuracy on ImageNet-C-imb, IR{_ir}",
        "appendix",
    )

for _name, _meta in TABLES.items():
    _meta["file"] = f"{_name}.csv"


class UnknownTableError(KeyError, ValueError):
    """Raised for a table name that is not in ``TABLES`` (catchable as KeyError or ValueError)."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


def table_path(name: str) -> Path:
    """Absolute path of the CSV file for table ``name``."""
    if name not in TABLES:
        valid = ", ".join(sorted(TABLES))
        raise UnknownTableError(f"unknown paper table {name!r}; valid names: {valid}")
    return PAPER_DIR / TABLES[name]["file"]


def load_table(name: str) -> pd.DataFrame:
    """Read one transcribed paper table.

    Text columns keep empty cells as ``""``; ``shift_param``, ``accuracy`` and ``std`` are
    floats (NaN where the paper prints nothing); ``severity`` and ``n`` are nullable integers.
    The cost table ``app_cost`` is returned with its own numeric columns.
    """
    path = table_path(name)
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    if TABLES[name]["schema"] == "cost":
        for col in COST_COLUMNS[5:]:
            df[col] = pd.to_numeric(df[col]).astype(float)
        return df
    for col in _FLOAT:
        df[col] = pd.to_numeric(df[col].replace("", None), errors="raise").astype(float)
    for col in _INT:
        df[col] = pd.to_numeric(df[col].replace("", None), errors="raise").astype("Int64")
    return df


def load_all() -> pd.DataFrame:
    """All tables in the results schema concatenated (the cost table is left out)."""
    frames = [load_table(n) for n, m in TABLES.items() if m["schema"] == "results"]
    return pd.concat(frames, ignore_index=True)


__all__ = [
    "COST_COLUMNS",
    "PAPER_DIR",
    "SCHEMA",
    "TABLES",
    "UnknownTableError",
    "load_all",
    "load_table",
    "table_path",
]
