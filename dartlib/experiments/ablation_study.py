"""Notebook 07's experiment (Tables 3-5, Appendix B): every DART variant of
:data:`dartlib.experiments.ablations.VARIANTS` trained with the same intermediate settings, then
BNAdapt with each on the same LT and online-imbalance streams."""

from __future__ import annotations

import pandas as pd

from dartlib.dart.intermediate import load_or_train_refiners
from dartlib.dart.refiner import Refiner
from dartlib.experiments.ablations import VARIANTS, bnadapt_streams, evaluate_refiners, variant_config
from dartlib.experiments.settings import Settings, dart_config
from dartlib.experiments.source_setup import SourceSetup
from dartlib.paths import results_dir


def ablation_base_config(settings: Settings):
    """The g_phi settings every variant starts from: the profile's, with the ``ablation_*`` values
    (weight of L_bal, Dirichlet chunks, epochs, D_int per class) in place of DART's own."""
    return dart_config(settings.values, alpha=settings["ablation_alpha"], n_dir=settings["ablation_n_dir"],
                       epochs=settings["ablation_epochs"], per_class=settings["ablation_per_class"] or None)


def train_variants(*, settings: Settings, setup: SourceSetup) -> dict[str, Refiner]:
    """Every variant's g_phi by name (loaded when saved beside the checkpoint); DART-split's with
    the profile's test-time temperature (Appendix B)."""
    base = ablation_base_config(settings)
    # variants that read the same intermediate batches train together, one pass of the frozen classifier
    trained = load_or_train_refiners(setup.checkpoint, setup.model, setup.train,
                                     [variant_config(name, base) for name in VARIANTS], progress=False)
    refiners = {name: refiner for name, (refiner, _) in zip(VARIANTS, trained)}
    refiners["dart-split"].temperature = settings["split_temperature"]
    return refiners


def stream_column(frame: pd.DataFrame) -> list[str]:
    """The table column of each row: "LT <rho>" or "imb <IR>"."""
    return [f"{'LT' if s == 'lt' else 'imb'} {p:g}" for s, p in zip(frame["shift"], frame.shift_param)]


def run_ablations(*, settings: Settings, setup: SourceSetup, refiners: dict[str, Refiner]) -> pd.DataFrame:
    """BNAdapt alone and with every variant on the LT and online-imbalance streams, one row per
    cell (written to ``results/<profile>/ablations.csv``), with each row's table ``column``."""
    dataset, severity, seed = settings["corrupted_dataset"], settings["severity"], settings["seed"]
    streams = bnadapt_streams(setup.model, dataset=dataset, corruptions=settings["ablation_corruptions"],
                              shifts={"lt": settings["lt_rhos"], "online-imb": settings["imb_irs"]},
                              severity=severity, seed=seed, batch_size=settings["test_batch_size"],
                              subset_size=settings["imb_subset_size"])
    results = evaluate_refiners(streams, {"none": None, **refiners}, dataset=dataset, experiment="ablations",
                                severity=severity, seed=seed)
    results["column"] = stream_column(results)
    results.drop(columns="column").to_csv(results_dir(settings.profile) / "ablations.csv", index=False,
                                          float_format="%.4f")
    return results


def mean_accuracy(results: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per refiner (rows) and stream column, averaged over corruptions."""
    columns = list(dict.fromkeys(results.column))
    return results.pivot_table(index="refiner", columns="column", values="accuracy", aggfunc="mean")[columns]
