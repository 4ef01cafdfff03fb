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

Its tables and figure: the failing quantities per variant (each a mean over the corruptions with
its standard error, :mod:`dartlib.analysis.noise`; the paper's from its appendix table of
CIFAR-10C-imb, :func:`paper_quantities`), the held-out streams, the batch shapes, and Table 1's
BNAdapt rows over seeds beside the paper's mean +- std (:func:`seed_table`).
"""

from __future__ import annotations

import hashlib
import math
import textwrap
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.analysis.noise import Estimate, Outcomes, difference
from dartlib.dart.refiner import DartConfig
from dartlib.experiments.settings import SHORTCUT, Settings
from dartlib.reporting.figures import WIDTH, save_figure
from dartlib.reporting.paper import load_table


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

VARIANTS: tuple[Variant, ...] = (
    Variant("table1", "reference", "Table 1's refiner"),
    Variant("epochs50", "epochs", "50 (the paper's)", {"epochs": 50}),
    Variant("alpha0.1-epochs50", "epochs", "50 at alpha 0.1 (the paper's both)", {"epochs": 50, "alpha": 0.1}),
    Variant("alpha0", "alpha", "0", {"alpha": 0.0}),
    Variant("alpha0.1", "alpha", "0.1 (the paper's)", {"alpha": 0.1}),
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
    Variant("alpha0.1-epochs50-seed1", "seed", "1 at the paper's alpha and epochs", {"epochs": 50, "alpha": 0.1, "seed": 1}),
    Variant("alpha0.1-epochs50-seed2", "seed", "2 at the paper's alpha and epochs", {"epochs": 50, "alpha": 0.1, "seed": 2}),
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
    from dartlib.experiments.source_setup import prepare_source

    setup = prepare_source(settings=settings)
    configs = [variant_config(settings=settings, name=name) for name in names]
    return load_or_train_refiners(setup.checkpoint, setup.model, setup.train, configs, device=device, progress=progress)


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
    from dartlib.experiments.grid import grid

    names = trained_variants(settings=settings) if names is None else names

    def lt(rhos, seed):
        limit = settings["table1_stream_limit"]
        return dict(dataset=[settings["corrupted_dataset"]], shift=["lt"], shift_param=[float(r) for r in rhos],
                    corruption=list(settings["table1_corruptions"]), severity=[settings["severity"]], seed=[seed],
                    params=[f"limit={limit}"] if limit else [""])

    def imb(irs, seed):
        return dict(dataset=[settings["corrupted_dataset"]], shift=["online-imb"], shift_param=[float(r) for r in irs],
                    corruption=list(settings["online_corruptions"]), severity=[settings["severity"]], seed=[seed],
                    params=[f"subset={settings['imb_subset_size']}"])

    seed0 = settings["seed"]
    cells = grid(**lt([DIAGNOSIS_RHO], seed0), method=["bnadapt"], refiner=["none"])
    cells += grid(**imb(DIAGNOSIS_IRS, seed0), method=["noadapt", "bnadapt"], refiner=["none"])
    for name in names:
        cells += grid(**lt([DIAGNOSIS_RHO], seed0), method=["bnadapt"], refiner=[name])
        cells += grid(**imb(DIAGNOSIS_IRS, seed0), method=["bnadapt"], refiner=[name])
    # what a variant keeps of DART's gains on CIFAR-10C-LT (after the failing quantities: a grid
    # stopped part-way holds those first)
    shifted = [r for r in settings["lt_rhos"] if float(r) != DIAGNOSIS_RHO]
    cells += grid(**lt(shifted, seed0), method=["bnadapt"], refiner=["none"])
    for name in names:
        cells += grid(**lt(shifted, seed0), method=["bnadapt"], refiner=[name])
    for name in (n for n in SEED_VARIANTS if n in names):
        seed = variant_config(settings=settings, name=name).seed
        cells += grid(**lt(settings["lt_rhos"], seed), method=["bnadapt"], refiner=["none", name])
        cells += grid(**imb(settings["online_irs"], seed), method=["noadapt"], refiner=["none"])
        cells += grid(**imb(settings["online_irs"], seed), method=["bnadapt"], refiner=["none", name])
    for name in (n for n in HELDOUT_STREAM_VARIANTS if n in names):
        for seed in HELDOUT_STREAM_SEEDS:
            cells += grid(**lt(settings["lt_rhos"], seed), method=["bnadapt"], refiner=["none", name])
            cells += grid(**imb(settings["online_irs"], seed), method=["noadapt"], refiner=["none"])
            cells += grid(**imb(settings["online_irs"], seed), method=["bnadapt"], refiner=["none", name])
    return list(dict.fromkeys(cells))  # a seed-0 replica cell may already be a failing-quantity cell


# A variant chosen after its seed-0 streams were seen (the mixture of batch kinds) is judged again,
# with the same refiner, on test streams drawn with seeds that played no part in choosing it.
HELDOUT_STREAM_VARIANTS = ("mix-ndir10",)
HELDOUT_STREAM_SEEDS = (1, 2)

# The refiners whose seed varies (g_phi's initialisation and its intermediate batches), per
# configuration: Table 1's (alpha 30, 10 epochs on the cpu profile) and the paper's (alpha 0.1, 50
# epochs); each is measured on test streams drawn with its own seed.
SEED_GROUPS = {"table1": ("table1", "seed1", "seed2"),
               "paper": ("alpha0.1-epochs50", "alpha0.1-epochs50-seed1", "alpha0.1-epochs50-seed2")}
SEED_VARIANTS = tuple(name for group in SEED_GROUPS.values() for name in group)


def prepare_diagnosis_context(*, settings: Settings, device: str | None = None, progress: bool = False,
                              trained_only: bool = False):
    """Table 1's context (no NOTE) with every trained variant's refiner under its variant name.
    Returns (context, source metadata)."""
    from dartlib.dart.intermediate import load_or_train_refiners
    from dartlib.experiments.engine import prepare_context
    from dartlib.paths import cache_root

    context, meta = prepare_context(settings=settings, method_inputs=False, device=device, progress=progress,
                                    trained_only=trained_only)
    names = trained_variants(settings=settings)
    configs = [variant_config(settings=settings, name=name) for name in names]
    refiners = load_or_train_refiners(settings.checkpoint(), context.source, None, configs, progress=progress)
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

    labels_all = load(settings["source_dataset"], split="train").labels if labels is None else labels
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
    labels = load(settings["source_dataset"], split="train").labels
    inputs = inputs_digest(f"batch-shapes@{BATCH_SHAPES_REVISION}", settings["source_dataset"],
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


def _select(rows: pd.DataFrame, *, method: str, refiner: str, shift: str, param: float, seed: int) -> pd.DataFrame:
    at = rows["shift_param"].astype(float).sub(param).abs() < 1e-9
    return rows[(rows["method"] == method) & (rows["refiner"] == refiner) & (rows["shift"] == shift) & at
                & (rows["seed"].astype(int) == seed)]


# Each quantity of a variant: (shift, parameter, the baseline's method) of BNAdapt+variant - baseline.
def _quantity_streams(rhos=(10.0, 100.0)) -> dict[str, tuple[str, float, str]]:
    return {"cost": ("lt", DIAGNOSIS_RHO, "bnadapt"), **{f"IR {ir:g}": ("online-imb", ir, "noadapt") for ir in DIAGNOSIS_IRS},
            **{f"gain rho {rho:g}": ("lt", rho, "bnadapt") for rho in rhos}}


def failing_quantities(*, rows: pd.DataFrame, refiner: str, seed: int = 0,
                       outcomes: Outcomes | None = None) -> dict[str, Estimate]:
    """The cost at rho = 1 and the margins over NoAdapt at each IR for BNAdapt with ``refiner``
    (paired image by image where ``outcomes`` holds the rows' per-image outcomes)."""
    streams = {k: v for k, v in _quantity_streams().items() if not k.startswith("gain")}
    return {name: difference(_select(rows, method="bnadapt", refiner=refiner, shift=shift, param=param, seed=seed),
                             _select(rows, method=base, refiner="none", shift=shift, param=param, seed=seed),
                             outcomes=outcomes) for name, (shift, param, base) in streams.items()}


def lt_gains(*, rows: pd.DataFrame, refiner: str, rhos=(10.0, 100.0), seed: int = 0,
             outcomes: Outcomes | None = None) -> dict[str, Estimate]:
    """BNAdapt+DART − BNAdapt on CIFAR-10C-LT at each of ``rhos``: what a variant keeps of DART's gains."""
    return {f"gain rho {rho:g}": difference(
        _select(rows, method="bnadapt", refiner=refiner, shift="lt", param=rho, seed=seed),
        _select(rows, method="bnadapt", refiner="none", shift="lt", param=rho, seed=seed), outcomes=outcomes)
        for rho in rhos}


def moved_from_table1(*, rows: pd.DataFrame, refiner: str, outcomes: Outcomes | None = None) -> dict[str, Estimate]:
    """How far each quantity of ``refiner`` lies from Table 1's refiner's: both share the baseline,
    so the difference is BNAdapt+variant - BNAdapt+table1 on the same streams, paired (the baseline
    is not counted twice)."""
    return {name: difference(_select(rows, method="bnadapt", refiner=refiner, shift=shift, param=param, seed=0),
                             _select(rows, method="bnadapt", refiner="table1", shift=shift, param=param, seed=0),
                             outcomes=outcomes) for name, (shift, param, _) in _quantity_streams().items()}


def paper_quantities() -> dict[str, float]:
    """The failing quantities as the paper prints them (Table 1; the CIFAR-10C-imb appendix table)."""
    lt = load_table("table1_main")
    imb = load_table("app_cifar10c_imb")

    def acc(frame, shift, param, method, refiner):
        at = frame[(frame["dataset"] == "cifar10c") & (frame["corruption"] == "mean") & (frame["shift"] == shift)
                   & (frame["shift_param"] == param) & (frame["method"] == method) & (frame["refiner"] == refiner)]
        return float(at["accuracy"].iloc[0])

    out = {"cost": acc(lt, "lt", DIAGNOSIS_RHO, "bnadapt", "dart") - acc(lt, "lt", DIAGNOSIS_RHO, "bnadapt", "none")}
    for ir in DIAGNOSIS_IRS:
        out[f"IR {ir:g}"] = acc(imb, "online-imb", ir, "bnadapt", "dart") - acc(imb, "online-imb", ir, "noadapt", "none")
    return out


def _pm(e: Estimate) -> str:
    """``+1.23 ± 0.45``; ``± ≤0.45`` where the SE is an upper bound (rows without per-image outcomes)."""
    return e.text()


def diagnosis_table(*, rows: pd.DataFrame, seconds: dict[str, float] | None = None,
                    outcomes: Outcomes | None = None) -> pd.DataFrame:
    """One row per variant with results: factor, setting, the cost at rho = 1 and the margin over
    NoAdapt at each IR (mean over corruptions ± SE), how far each moved from Table 1's refiner
    (``*``: beyond 2 SE of the paired difference, :func:`moved_from_table1`), and (``seconds``) the
    refiner's training time. ``outcomes``: the rows' per-image outcomes (without them every SE is
    an upper bound, :mod:`dartlib.analysis.noise`)."""
    out = []
    for v in VARIANTS:
        if not (rows["refiner"] == v.name).any():
            continue
        q = {**failing_quantities(rows=rows, refiner=v.name, outcomes=outcomes),
             **lt_gains(rows=rows, refiner=v.name, outcomes=outcomes)}
        moved = moved_from_table1(rows=rows, refiner=v.name, outcomes=outcomes)
        row = {"factor": v.factor, "setting": v.setting, "variant": v.name}
        for name, e in q.items():
            row[name] = _pm(e)
            m = moved[name]
            row[f"{name} vs Table 1"] = "" if v.name == "table1" or math.isnan(m.value) else (
                f"{m.value:+.2f}" + (" *" if abs(m.value) > 2 * m.se else ""))
        if seconds:
            row["training (s)"] = seconds.get(v.name, math.nan)
        out.append(row)
    return pd.DataFrame(out)


def heldout_stream_table(*, rows: pd.DataFrame, outcomes: Outcomes | None = None) -> pd.DataFrame:
    """Each variant of :data:`HELDOUT_STREAM_VARIANTS` (chosen after its seed-0 streams were seen)
    on the streams of every seed it has rows for: the rho = 1 cost and the margin over NoAdapt at each
    IR, each ± SE, beside Table 1's refiner's on seed 0. Seeds other than 0 played no part in the
    choice."""
    out = []
    for name in HELDOUT_STREAM_VARIANTS:
        for seed in (0, *HELDOUT_STREAM_SEEDS):
            q = failing_quantities(rows=rows, refiner=name, seed=seed, outcomes=outcomes)
            if all(math.isnan(e.value) for e in q.values()):
                continue
            out.append({"variant": name, "test streams": f"seed {seed}" + (" (seen)" if seed == 0 else " (held out)"),
                        **{k: _pm(e) for k, e in q.items()}})
    return pd.DataFrame(out)


def batch_shape_table(*, shapes: pd.DataFrame, rows: pd.DataFrame, outcomes: Outcomes | None = None) -> pd.DataFrame:
    """The intermediate batches of each variant (with results) that changes them
    (:func:`dartlib.studies.diagnosis.intermediate_batch_shapes`: D_int, batch, chunk, the largest
    class's share, classes per batch, one-class batches) beside what g_phi then does: the rho = 1
    cost, the IR 5000 margin and the rho = 100 gain (mean over corruptions ± SE), sorted by the
    largest class's share. ``outcomes``: the rows' per-image outcomes (without them every SE is an
    upper bound)."""
    keys = ["d_int", "batch", "chunk", "largest_class_pct", "one_class_pct"]
    reference = shapes.loc[shapes["variant"] == "table1", keys].round(1).to_dict("records")
    out = []
    for shape in shapes.itertuples(index=False):
        same = shape.variant != "table1" and [{k: round(getattr(shape, k), 1) for k in keys}] == reference
        if same or not (rows["refiner"] == shape.variant).any():
            continue  # g_phi's other settings (alpha, seed) leave the batches as Table 1's
        q = {**failing_quantities(rows=rows, refiner=shape.variant, outcomes=outcomes),
             **lt_gains(rows=rows, refiner=shape.variant, outcomes=outcomes)}
        out.append({"variant": shape.variant, "D_int": shape.d_int, "batch": shape.batch, "chunk": shape.chunk,
                    "largest class %": round(shape.largest_class_pct, 1), "classes": round(shape.classes_per_batch, 1),
                    "one-class %": round(shape.one_class_pct, 1), "cost": _pm(q["cost"]), "IR 5000": _pm(q["IR 5000"]),
                    "gain rho 100": _pm(q["gain rho 100"])})
    table = pd.DataFrame(out)
    return table.sort_values("largest class %", kind="stable").reset_index(drop=True) if len(table) else table


def _per_seed(rows: pd.DataFrame, *, method: str, refiner: str, shift: str, param: float,
              group: str = "table1") -> dict[int, float]:
    """Per seed replica of ``group`` (:data:`SEED_GROUPS`) whose cells cover every corruption of seed
    0's: the mean accuracy over the corruptions of ``method`` with ``refiner`` (``"dart"``: the
    seed's own refiner)."""
    whole = set(_select(rows, method=method, refiner="none", shift=shift, param=param, seed=0)["corruption"])
    out = {}
    for name in SEED_GROUPS[group]:
        seed = variant(name).overrides.get("seed", 0)
        sel = _select(rows, method=method, refiner=name if refiner == "dart" else "none", shift=shift, param=param,
                      seed=seed)
        if len(sel) and set(sel["corruption"]) == whole:
            out[seed] = float(sel["accuracy"].mean())
    return out


def _mean_std(values: list[float]) -> str:
    """Mean ± std over seeds (ddof 0, as the paper's std is read), or the one value."""
    if not values:
        return ""
    return f"{np.mean(values):.1f} ± {np.std(values):.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def seed_table(*, rows: pd.DataFrame, lt_rhos, online_irs, group: str = "table1") -> pd.DataFrame:
    """Table 1's BNAdapt rows (CIFAR-10C-LT) and CIFAR-10C-imb's NoAdapt, BNAdapt and BNAdapt+DART
    over the seed replicas of ``group`` (:data:`SEED_GROUPS`: Table 1's refiner or the paper's
    configuration; g_phi's seed and the test stream's), then DART's
    effect seed by seed (BNAdapt+DART − BNAdapt on LT, BNAdapt+DART − NoAdapt on imb: the two
    failing quantities among them): per setting, mean ± std over seeds of the mean over
    corruptions, the number of seeds, and the paper's mean ± std (Table 1; the CIFAR-10C-imb
    appendix table; for an effect, the paper's difference of means)."""
    paper = pd.concat([load_table("table1_main"), load_table("app_cifar10c_imb")])
    paper = paper[(paper["dataset"] == "cifar10c") & (paper["corruption"] == "mean")]

    def paper_row(shift, param, method, refiner):
        p = paper[(paper["shift"] == shift) & (paper["shift_param"] == float(param)) & (paper["method"] == method)
                  & (paper["refiner"] == refiner)]
        return (float(p["accuracy"].iloc[0]), float(p["std"].iloc[0])) if len(p) else (math.nan, math.nan)

    out = []
    for shift, params in (("lt", lt_rhos), ("online-imb", online_irs)):
        for param in params:
            bench = "CIFAR-10C-LT" if shift == "lt" else "CIFAR-10C-imb"
            setting = f"{'rho' if shift == 'lt' else 'IR'} {param:g}"
            seeds = {}
            for method, label in (("noadapt", "NoAdapt"), ("bnadapt", "BNAdapt"), ("bnadapt+dart", "BNAdapt+DART")):
                if shift == "lt" and method == "noadapt":
                    continue
                base, _, dart = method.partition("+")
                seeds[label] = _per_seed(rows, method=base, refiner=dart or "none", shift=shift, param=float(param),
                                         group=group)
                mean, std = paper_row(shift, param, base, "dart" if dart else "none")
                out.append({"benchmark": bench, "setting": setting, "method": label,
                            "ours": _mean_std(list(seeds[label].values())), "seeds": len(seeds[label]),
                            "paper": "" if math.isnan(mean) else f"{mean:.1f} ± {std:.1f}"})
            other = "BNAdapt" if shift == "lt" else "NoAdapt"
            both = sorted(set(seeds["BNAdapt+DART"]) & set(seeds[other]))
            effect = [seeds["BNAdapt+DART"][s] - seeds[other][s] for s in both]
            paper_effect = paper_row(shift, param, "bnadapt", "dart")[0] - paper_row(
                shift, param, other.lower(), "none")[0]
            out.append({"benchmark": bench, "setting": setting, "method": f"BNAdapt+DART − {other}",
                        "ours": "" if not effect else (f"{np.mean(effect):+.1f} ± {np.std(effect):.1f}"
                                                       if len(effect) > 1 else f"{effect[0]:+.1f}"),
                        "seeds": len(effect), "paper": "" if math.isnan(paper_effect) else f"{paper_effect:+.1f}"})
    return pd.DataFrame(out)


def diagnosis_figure(*, rows: pd.DataFrame, profile: str, outcomes: Outcomes | None = None):
    """Per variant, the cost at rho = 1 and the margins over NoAdapt at each IR, ± 2 SE, with
    Table 1's refiner's values as dotted lines and the paper's as grey bands, every mark in the
    legend; in the suite's one figure style (:mod:`dartlib.reporting.figures`: its width, font
    sizes and layout); saved as ``figures/<profile>/diagnosis``. The SE is the one the diagnosis
    table prints (:func:`diagnosis_table`): paired image by image from ``outcomes``, by default the
    per-image outcomes beside the profile's results (``results/<profile>/``); where rows have none
    it is an upper bound and the legend says so."""
    from dartlib.experiments.grid import folder_outcomes
    from dartlib.paths import results_dir

    outcomes = outcomes if outcomes is not None else folder_outcomes(results_dir(profile))
    names = [v.name for v in VARIANTS if (rows["refiner"] == v.name).any()]
    quantities = ["cost", *(f"IR {ir:g}" for ir in DIAGNOSIS_IRS)]
    paper = paper_quantities()
    labels = [textwrap.fill(f"{variant(n).factor}: {variant(n).setting}", 30) for n in names]
    lines = sum(label.count("\n") + 1 for label in labels)
    fig, axes = plt.subplots(1, len(quantities), figsize=(WIDTH, 0.2 * lines + 0.12 * len(names) + 2.2), sharey=True)
    values = {n: failing_quantities(rows=rows, refiner=n, outcomes=outcomes) for n in names}
    kinds = {values[n][q].kind for n in names for q in quantities}
    se_label = "variant, ± 2 SE" + (" (upper bound)" if "bound" in kinds else "")
    for ax, name in zip(axes, quantities):
        shown = [values[n][name] for n in names]
        y = np.arange(len(names))
        ax.errorbar([e.value for e in shown], y, xerr=[2 * e.se for e in shown], fmt="o", color="C0", capsize=2,
                    markersize=4, label=se_label)
        if "table1" in names:
            ax.axvline(values["table1"][name].value, ls=":", color="C0", label="Table 1's refiner")
        ax.axvline(paper[name], color="0.5", lw=3, alpha=0.5, label="the paper")
        ax.axvline(0.0, color="k", lw=0.6)
        # two lines: the stream, then the difference drawn (one line of four panels' titles overlapped)
        ax.set_title("ρ = 1\nBNAdapt+DART − BNAdapt" if name == "cost" else f"{name}\nBNAdapt+DART − NoAdapt")
        ax.set_xlabel("points")
    axes[0].set_yticks(np.arange(len(names)), labels)
    axes[0].invert_yaxis()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    fig.suptitle(f"Diagnosis of DART's cost at ρ = 1 and of its margin over NoAdapt on CIFAR-10C-imb\n"
                 f"one factor of Table 1's g_φ changed at a time ({profile} profile)")
    save_figure(fig, profile=profile, name="diagnosis")
    return fig
