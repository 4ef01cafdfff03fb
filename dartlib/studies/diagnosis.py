"""The diagnosis of the two claims that fail on the cpu profile (notebook 15): Table 1's refiner
varied one factor at a time.

The failing quantities (Section 4, Table 1 and the CIFAR-10C-imb table):
- DART's cost without label shift: BNAdapt+DART minus BNAdapt at rho = 1;
- BNAdapt+DART minus NoAdapt on CIFAR-10C-imb at IR 20, 50 and 5000.

Every variant is the refiner the diagnosis was made of (:data:`DIAGNOSED`: the profile's g_phi
settings, :meth:`Settings.dart_config`, at the cpu profile's former Table 1 shortcut of 10 epochs at
alpha 30) with the overrides of one :class:`Variant` (DartConfig fields). The shortcut is pinned
here so that the diagnosis, its refiners and its rows stay what they are when a profile's own g_phi
is the paper's. The refiners train in one pass per set of shared
intermediate batches (:func:`dartlib.dart.intermediate.load_or_train_refiners`), resumable.

Here: the variants, the grid's cells, its context, its rows, the variants' batch shapes and their
refiners' provenance; its tables and figure are in :mod:`dartlib.studies.diagnosis_report`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dartlib.dart.refiner import PAPER_CIFAR10, DartConfig
from dartlib.experiments.settings import SHORTCUT, Settings


@dataclass(frozen=True)
class Variant:
    """One setting of one factor: ``overrides`` are DartConfig fields applied to Table 1's refiner;
    ``epochs_factor`` multiplies its epochs (the profile's ``dart_epochs``), for a control that
    takes as many optimiser steps as Table 1's refiner where the variant changes the steps per epoch."""

    name: str
    factor: str
    setting: str
    overrides: dict[str, Any] = field(default_factory=dict)
    epochs_factor: float = 1.0


# The refiner the diagnosis varies: the cpu profile's Table 1 g_phi when the two claims failed on it
# (results/cpu/diagnosis.csv), named "table1" among the variants.
DIAGNOSED: dict[str, Any] = {"epochs": SHORTCUT["dart_epochs"], "alpha": SHORTCUT["dart_alpha"]}

# The paper's g_phi (:data:`~dartlib.dart.refiner.PAPER_CIFAR10`) as a change of the diagnosed refiner:
# its epochs and alpha, and the variant's name derived from them.
PAPER_CHANGES: dict[str, Any] = {"epochs": PAPER_CIFAR10.epochs, "alpha": PAPER_CIFAR10.alpha}
PAPER_VARIANT = f"alpha{PAPER_CIFAR10.alpha:g}-epochs{PAPER_CIFAR10.epochs}"
_EPOCHS, _ALPHA = PAPER_CIFAR10.epochs, PAPER_CIFAR10.alpha

VARIANTS: tuple[Variant, ...] = (
    Variant("table1", "reference", "Table 1's refiner"),
    Variant(f"epochs{_EPOCHS}", "epochs", f"{_EPOCHS} (the paper's)", {"epochs": _EPOCHS}),
    Variant(PAPER_VARIANT, "epochs", f"{_EPOCHS} at alpha {_ALPHA:g} (the paper's both)", PAPER_CHANGES),
    Variant("alpha0", "alpha", "0", {"alpha": 0.0}),
    Variant(f"alpha{_ALPHA:g}", "alpha", f"{_ALPHA:g} (the paper's)", {"alpha": _ALPHA}),
    Variant("alpha1", "alpha", "1", {"alpha": 1.0}),
    Variant("alpha10", "alpha", "10", {"alpha": 10.0}),
    Variant("delta1", "Dirichlet delta", "1 (more imbalanced chunks; 0.1 admits no split of 250 chunks)", {"delta": 1.0}),
    Variant("ndir10", "N_dir", "10 (chunks of 5,000: single-class batches)", {"n_dir": 10}),
    Variant("shuffled", "order inside a chunk", "shuffled (not class blocks)", {"chunk_order": "shuffled"}),
    Variant("mix-ndir10", "mixture of batch kinds", "every other batch from N_dir 10 (not the paper's)", {"mix_n_dir": 10}),
    Variant("batch200", "intermediate batch size", "200 (the test batch's)", {"batch_size": 200}),
    # as many steps as Table 1's refiner (batch 64: 781 a CIFAR-10 epoch; batch 200: 250)
    Variant("batch200-steps", "intermediate batch size", "200 at Table 1's number of steps (3.1 times the epochs)",
            {"batch_size": 200}, epochs_factor=200 / 64),
    Variant("perclass1000", "class-balanced D_int", "1,000 per class (not all 5,000)", {"per_class": 1000}),
    # as many steps as Table 1's refiner: CIFAR-10 has 5,000 training images per class
    Variant("perclass1000-steps", "class-balanced D_int", "1,000 per class at Table 1's number of steps (5 times the epochs)",
            {"per_class": 1000}, epochs_factor=5000 / 1000),
    Variant("seed1", "seed", "1 (g_phi's init and its batches)", {"seed": 1}),
    Variant("seed2", "seed", "2 (g_phi's init and its batches)", {"seed": 2}),
    *(Variant(f"{PAPER_VARIANT}-seed{k}", "seed", f"{k} at the paper's alpha and epochs", {**PAPER_CHANGES, "seed": k})
      for k in (1, 2)),
)


def variant(name: str) -> Variant:
    """The variant called ``name``."""
    for v in VARIANTS:
        if v.name == name:
            return v
    raise KeyError(f"unknown diagnosis variant {name!r}; valid: {', '.join(v.name for v in VARIANTS)}")


def variant_config(*, settings: Settings, name: str) -> DartConfig:
    """The diagnosed refiner's config under ``settings`` (:data:`DIAGNOSED`) with the overrides of
    variant ``name`` (its epochs scaled by the variant's ``epochs_factor``, rounded)."""
    v = variant(name)
    overrides = {**DIAGNOSED, **v.overrides}
    if v.epochs_factor != 1.0:
        overrides["epochs"] = round(settings.dart_config(**overrides).epochs * v.epochs_factor)
    return settings.dart_config(**overrides)


def train_variants(*, settings: Settings, names: list[str], device: str | None = None, progress: bool = True) -> list:
    """Train (or load, or resume) the refiners of variants ``names``, one pass per set of shared
    intermediate batches, in the order the names first need them. Returns (refiner, log) per name."""
    from dartlib.dart.intermediate import load_or_train_refiners
    from dartlib.experiments.training_stage import train_source_inputs

    source = train_source_inputs(settings=settings, device=device)
    configs = [variant_config(settings=settings, name=name) for name in names]
    return load_or_train_refiners(source.checkpoint, source.model, source.train, configs, device=device, progress=progress)


def trained_variants(*, settings: Settings) -> list[str]:
    """The variants whose refiner is saved beside the profile's source checkpoint."""
    from dartlib.dart.intermediate import refiner_path

    checkpoint = settings.checkpoint()
    return [v.name for v in VARIANTS if refiner_path(checkpoint, variant_config(settings=settings, name=v.name)).is_file()]


# The failing quantities' streams: CIFAR-10C-LT at rho = 1 and CIFAR-10C-imb at these IRs.
DIAGNOSIS_RHO = 1.0
DIAGNOSIS_IRS = (20.0, 50.0, 5000.0)


def diagnosis_cells(settings: Settings, *, names: list[str] | None = None) -> list:
    """The grid of notebook 15, ordered so that a grid stopped part-way holds whole rows:

    - the failing quantities' streams (CIFAR-10C-LT at rho = 1, CIFAR-10C-imb at each IR of
      :data:`DIAGNOSIS_IRS`, seed 0): BNAdapt and NoAdapt (the cells of Table 1 and of the
      online-imbalance grid, same keys), then BNAdapt with each trained variant's refiner, named
      after the variant; then the same on CIFAR-10C-LT's other rhos (``lt_rhos``), what a variant
      keeps of DART's gains there;
    - the seed replicas (Section 5.1's "mean and std over seeds"): for each seed variant
      (:data:`SEED_VARIANTS`) with a trained refiner, NoAdapt, BNAdapt and BNAdapt with that
      refiner on every rho of ``lt_rhos`` and IR of ``online_irs``, the test streams drawn with the
      same seed as the refiner (seed 0 is Table 1's refiner on Table 1's streams);
    - the held-out streams (:data:`HELDOUT_STREAM_VARIANTS`): such a variant's seed-0 refiner on the
      streams of :data:`HELDOUT_STREAM_SEEDS`, beside NoAdapt and BNAdapt on the same streams.

    ``names``: the variants to include (default: every trained one)."""
    from dartlib.experiments.cell_options import options_text
    from dartlib.experiments.grid import grid

    names = trained_variants(settings=settings) if names is None else names

    def lt(rhos, seed):
        limit = settings.table1.stream_limit
        return dict(dataset=[settings.test.corrupted_dataset], shift=["lt"], shift_param=[float(r) for r in rhos],
                    corruption=list(settings.table1.corruptions), severity=[settings.test.severity], seed=[seed],
                    params=[options_text(limit=limit or None)])

    def imb(irs, seed):
        return dict(dataset=[settings.test.corrupted_dataset], shift=["online-imb"], shift_param=[float(r) for r in irs],
                    corruption=list(settings.online.corruptions), severity=[settings.test.severity], seed=[seed],
                    params=[options_text(subset=settings.test.imb_subset_size)])

    seed0 = settings.seed
    cells = grid(**lt([DIAGNOSIS_RHO], seed0), method=["bnadapt"], refiner=["none"])
    cells += grid(**imb(DIAGNOSIS_IRS, seed0), method=["noadapt", "bnadapt"], refiner=["none"])
    for name in names:
        cells += grid(**lt([DIAGNOSIS_RHO], seed0), method=["bnadapt"], refiner=[name])
        cells += grid(**imb(DIAGNOSIS_IRS, seed0), method=["bnadapt"], refiner=[name])
    # what a variant keeps of DART's gains on CIFAR-10C-LT (after the failing quantities: a grid
    # stopped part-way holds those first)
    shifted = [r for r in settings.test.lt_rhos if float(r) != DIAGNOSIS_RHO]
    cells += grid(**lt(shifted, seed0), method=["bnadapt"], refiner=["none"])
    for name in names:
        cells += grid(**lt(shifted, seed0), method=["bnadapt"], refiner=[name])
    for name in (n for n in SEED_VARIANTS if n in names):
        seed = variant_config(settings=settings, name=name).seed
        cells += grid(**lt(settings.test.lt_rhos, seed), method=["bnadapt"], refiner=["none", name])
        cells += grid(**imb(settings.online.irs, seed), method=["noadapt"], refiner=["none"])
        cells += grid(**imb(settings.online.irs, seed), method=["bnadapt"], refiner=["none", name])
    for name in (n for n in HELDOUT_STREAM_VARIANTS if n in names):
        for seed in HELDOUT_STREAM_SEEDS:
            cells += grid(**lt(settings.test.lt_rhos, seed), method=["bnadapt"], refiner=["none", name])
            cells += grid(**imb(settings.online.irs, seed), method=["noadapt"], refiner=["none"])
            cells += grid(**imb(settings.online.irs, seed), method=["bnadapt"], refiner=["none", name])
    return list(dict.fromkeys(cells))  # a seed-0 replica cell may already be a failing-quantity cell


# A variant chosen after its seed-0 streams were seen (the mixture of batch kinds) is judged again,
# with the same refiner, on test streams drawn with seeds that played no part in choosing it.
HELDOUT_STREAM_VARIANTS = ("mix-ndir10",)
HELDOUT_STREAM_SEEDS = (1, 2)

# The refiners whose seed varies (g_phi's initialisation and its intermediate batches), per
# configuration: Table 1's (alpha 30, 10 epochs on the cpu profile) and the paper's (alpha 0.1, 50
# epochs); each is measured on test streams drawn with its own seed.
SEED_GROUPS = {"table1": ("table1", "seed1", "seed2"),
               "paper": (PAPER_VARIANT, f"{PAPER_VARIANT}-seed1", f"{PAPER_VARIANT}-seed2")}
SEED_VARIANTS = tuple(name for group in SEED_GROUPS.values() for name in group)


def train_diagnosis_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """The training stage of :func:`prepare_diagnosis_context`: the source model and test sets
    (:func:`~dartlib.experiments.training_stage.train_source_inputs`). The variants' refiners are
    hours of a CPU core each, trained by name (``python -m dartlib train-refiners --profile P
    --variants NAME``, :func:`train_variants`); the grid runs the variants found."""
    from dartlib.experiments.training_stage import train_source_inputs

    train_source_inputs(settings=settings, device=device, progress=progress)


def prepare_diagnosis_context(*, settings: Settings, device: str | None = None, progress: bool = False):
    """Table 1's context (no NOTE) with every trained variant's refiner under its variant name, loaded.
    Returns (context, source metadata)."""
    from dartlib.dart.intermediate import load_refiners
    from dartlib.experiments.engine import prepare_context
    from dartlib.paths import cache_root

    context, meta = prepare_context(settings=settings, method_inputs=False, device=device, progress=progress)
    names = trained_variants(settings=settings)
    refiners = load_refiners(settings.checkpoint(), [variant_config(settings=settings, name=name) for name in names])
    context.refiners.update({name: refiner for name, (refiner, _) in zip(names, refiners)})
    context.logits_store = cache_root()  # BNAdapt's logits, shared by every variant and run
    return context, meta


# Results files whose rows of the same cells, with the same input digests, are borrowed: the baselines, and the
# paper-configuration seeds' rows that the paper_config grid computes first.
SHARED_RESULTS = ("table1.csv", "online_imbalance.csv", "paper_config.csv")


def diagnosis_results(*, profile: str, compute: bool, names: list[str], progress: bool = False):
    """Notebook 15's rows (``results/<profile>/diagnosis.csv``) and its refiners' provenance
    (``diagnosis_refiners.csv``: file, sha256, training seconds of the pass and how many refiners
    shared it). ``compute``: first train the refiners of ``names`` that are missing (hours on a
    CPU, resumable: an interrupted pass continues from its last epoch) and compute the grid's
    missing or stale cells; otherwise read the stored rows. Returns (rows, provenance)."""
    from dartlib.experiments.engine import run_cells
    from dartlib.experiments.grid import read_results, stored_rows
    from dartlib.paths import results_dir

    settings = Settings.from_profile(profile)
    folder = results_dir(profile)
    path, provenance = folder / "diagnosis.csv", folder / "diagnosis_refiners.csv"
    if compute:
        train_variants(settings=settings, names=names, progress=progress)
        context, _ = prepare_diagnosis_context(settings=settings, progress=progress)
        cells = diagnosis_cells(settings, names=names)
        run_cells(cells, context, path=path, experiment="diagnosis", progress=progress,
                  reuse=[folder / name for name in SHARED_RESULTS])
        context.save_shared_source()
        refiner_provenance(settings=settings, names=names).to_csv(provenance, index=False)
    rows = stored_rows(diagnosis_cells(settings, names=names), path=path) if compute else read_results(path)
    return rows, pd.read_csv(provenance) if provenance.is_file() else pd.DataFrame()


def intermediate_batch_shapes(*, settings: Settings, names: list[str], epochs: int = 2,
                              labels: np.ndarray | None = None):
    """What g_phi's Dirichlet batches look like under each variant of ``names`` (Algorithm 1's
    imbalanced stream over ``epochs`` epochs, drawn as :func:`dartlib.dart.refiner_training.train_refiners`
    draws it): D_int's size, the batch size, the images per Dirichlet chunk, the mean share of a
    batch's largest class, the mean number of classes in a batch, the share of one-class batches
    and the steps per epoch. Reads the source's training labels only (``labels``, when the caller
    has them already)."""
    from dartlib.dart.intermediate_batches import _imbalanced_batches
    from dartlib.data.protocols import batch_class_counts, class_balanced
    from dartlib.data.sources import load

    labels_all = load(settings.source.dataset, split="train").labels if labels is None else labels
    rows = []
    for name in names:
        config = variant_config(settings=settings, name=name)
        labels = labels_all[class_balanced(labels_all, per_class=config.per_class, seed=config.seed)]
        steps = len(labels) // config.batch_size
        counts = batch_class_counts([b for epoch in range(epochs) for b in _imbalanced_batches(labels, config, epoch, steps)],
                                    labels, k=int(labels_all.max()) + 1)
        rows.append({"variant": name, "d_int": len(labels), "batch": config.batch_size,
                     "chunk": round(len(labels) / config.n_dir), "largest_class_pct": 100 * (counts.max(1) / counts.sum(1)).mean(),
                     "classes_per_batch": (counts > 0).sum(1).mean(),
                     "one_class_pct": 100 * (counts.max(1) == counts.sum(1)).mean(), "steps_per_epoch": steps})
    return pd.DataFrame(rows)


# Changed when :func:`intermediate_batch_shapes` changes what it computes (its stored table goes stale).
BATCH_SHAPES_REVISION = 1


def batch_shape_results(*, profile: str, compute: bool, names: list[str]):
    """``results/<profile>/diagnosis_batches.csv`` (:func:`intermediate_batch_shapes` of ``names``):
    with ``compute``, computed unless it is current (keyed by the variants' settings, the source's
    training labels and the code's revision: :func:`dartlib.experiments.keyed_tables.keyed_table`),
    else read; an empty table where it has not been computed."""
    from dartlib.data.sources import load
    from dartlib.experiments.keyed_tables import inputs_digest, keyed_table
    from dartlib.paths import results_dir

    path = results_dir(profile) / "diagnosis_batches.csv"
    if not compute:
        return pd.read_csv(path) if path.is_file() else pd.DataFrame()
    settings = Settings.from_profile(profile)
    labels = load(settings.source.dataset, split="train").labels
    inputs = inputs_digest(f"batch-shapes@{BATCH_SHAPES_REVISION}", settings.source.dataset,
                           hashlib.sha256(labels.astype("<i8").tobytes()).hexdigest(),
                           *(repr(variant_config(settings=settings, name=name)) for name in names))
    return keyed_table(path, inputs=inputs,
                       compute=lambda: intermediate_batch_shapes(settings=settings, names=names, labels=labels))


def refiner_provenance(*, settings: Settings, names: list[str]):
    """Per trained variant of ``names``: its refiner file, sha256, the seconds of the pass that
    trained it, how many refiners shared that pass, and the seconds per refiner."""
    from dartlib.dart.intermediate import refiner_path
    from dartlib.models.artefacts import sha256_of
    from dartlib.models.checkpoints import load_weights

    rows = []
    for name in names:
        path = refiner_path(settings.checkpoint(), variant_config(settings=settings, name=name))
        if not path.is_file():
            continue
        meta = load_weights(path, required=("meta",))["meta"]
        seconds, shared = meta.get("seconds", float("nan")), meta.get("trained_with", 1)
        rows.append({"variant": name, "file": path.name, "sha256": sha256_of(path), "pass_seconds": seconds,
                     "refiners_in_pass": shared, "seconds_per_refiner": seconds / shared})
    return pd.DataFrame(rows)


