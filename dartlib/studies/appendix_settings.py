"""The appendix's further settings (notebook 09): CIFAR-10C-imb, mixed domains,
MEMO with stored or adapted BN, and g_phi trained on a condensed training set. The Table 1 context
(source model and notebook 04's g_phi) serves every cell; cells run through the grid runner
(``results/<profile>/more_settings.csv``, resumable)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from dartlib.data import load, protocols
from dartlib.data.sources import SOURCES, DataMissingError, Dataset
from dartlib.dart.intermediate import load_or_train_refiner
from dartlib.experiments.engine import TestTimeContext, paired, run_cells
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings, dart_config
from dartlib.models.training import train_source
from dartlib.paths import results_dir


def cells_for(settings: Settings, *, shift: str, params: Sequence, corruptions: Sequence[str],
              methods: Sequence[str], refiners: Sequence[str] = ("none", "dart"), extra: str = "") -> list[Cell]:
    """The profile's cells of one table block (NoAdapt only without a refiner)."""
    cells = grid(dataset=[settings["corrupted_dataset"]], shift=[shift], shift_param=params, corruption=corruptions,
                 severity=[settings["severity"]], method=methods, refiner=list(refiners), params=[extra],
                 seed=[settings["seed"]])
    return paired(cells)


def _run(settings: Settings, cells: list[Cell], context_of: Callable[[Cell], TestTimeContext], *, experiment: str,
         reuse: Sequence[Path] = ()) -> pd.DataFrame:
    """``cells`` through the grid runner, each with the context ``context_of`` gives it."""
    return run_cells(cells, context_of, path=results_dir(settings.profile) / "more_settings.csv", experiment=experiment,
                     progress=settings.profile != "smoke", reuse=reuse)


def run_online_imbalance(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """CIFAR-10C-imb: NoAdapt and BNAdapt (+DART) over ``imb_corruptions``, TENT (+DART) over
    ``tent_corruptions``, one IR per column."""
    s = settings
    subset = f"subset={s['imb_subset_size']}"
    irs = [float(r) for r in s["imb_table_irs"]]
    cells = (cells_for(s, shift="online-imb", params=irs, corruptions=s["imb_corruptions"],
                       methods=["noadapt", "bnadapt"], extra=subset)
             + cells_for(s, shift="online-imb", params=irs, corruptions=s["tent_corruptions"], methods=["tent"],
                         extra=subset))
    # notebook 11 runs the same NoAdapt and BNAdapt(+DART) streams: its rows with the same inputs are copied
    return _run(s, cells, lambda c: context, experiment="app_cifar10c_imb",
                reuse=[results_dir(s.profile) / "online_imbalance.csv"])


def run_mixed(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """Mixed domains: one pool of all 15 corruptions, in random and in non-i.i.d. Dirichlet order."""
    s = settings
    pool = f"pool={s['mixed_pool']}" if s["mixed_pool"] else ""
    methods = ["noadapt", "bnadapt", "roid"]
    cells = (cells_for(s, shift="none", params=[None], corruptions=["mixed"], methods=methods, extra=pool)
             + cells_for(s, shift="dirichlet", params=[s["mixed_delta"]], corruptions=["mixed"], methods=methods,
                         extra=pool))
    return _run(s, cells, lambda c: context, experiment="app_mixed")


def run_memo(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """MEMO on the LT streams with stored BN statistics (episodic: restarts from the source weights
    on every batch) and with adapted BN (+DART), beside NoAdapt."""
    s = settings
    limit = f",limit={s['memo_stream_limit']}" if s["memo_stream_limit"] else ""
    rhos = [float(r) for r in s["lt_rhos"]]
    corruptions = s["memo_corruptions"]
    cells = (cells_for(s, shift="lt", params=rhos, corruptions=corruptions, methods=["noadapt"], extra=limit.lstrip(","))
             + cells_for(s, shift="lt", params=rhos, corruptions=corruptions, methods=["memo"], refiners=["none"],
                         extra=f"bn=stored{limit}")
             + cells_for(s, shift="lt", params=rhos, corruptions=corruptions, methods=["memo"],
                         extra=f"bn=adapted{limit}"))
    # the same source model, g_phi and device as ``context``; only MEMO's options and the batch size set here
    contexts = {bn: context.variant(batch_size=s["test_batch_size"],
                                    options={"memo": {"bn": mode, "n_augmentations": s["memo_augmentations"]}})
                for bn, mode in (("stored", "source"), ("adapted", "batch"))}
    return _run(s, cells, lambda c: contexts.get(c.options.get("bn"), context), experiment="app_memo")


def run_condensed(*, settings: Settings, context: TestTimeContext) -> tuple[pd.DataFrame, str]:
    """BNAdapt with g_phi trained on the distilled set (where it exists) and on a random
    class-balanced subset of the same size, beside notebook 04's g_phi, on the LT streams
    (``results/<profile>/condensed.csv``); returns the rows and what became of the distilled set.
    Everything trains and adapts on ``context.device``."""
    s = settings
    model = context.source
    source = s["source_dataset"]
    checkpoint = train_source(dataset=source, arch=s["source_arch"], recipe=s["source_recipe"], seed=s["seed"],
                              device=context.device, progress=False)
    train = load(source, split="train")
    small = dart_config(s.values, n_dir=s["condensed_n_dir"], epochs=s["condensed_epochs"], per_class=None)
    refiners = {}
    if f"{source}-condensed" not in SOURCES:
        status = f"dart-condensed: NOT RUN (the paper's condensed set is CIFAR-10's; there is none for {source})"
    else:
        try:
            distilled = load(f"{source}-condensed", split="train")
            refiners["dart-condensed"] = load_or_train_refiner(checkpoint, model, distilled, small, device=context.device,
                                                                progress=False)[0]
            status = f"dart-condensed: trained on {len(distilled.labels)} distilled images"
        except DataMissingError as err:
            status = f"dart-condensed: NOT RUN ({err})"
    ipc = s["condensed_ipc"]
    keep = protocols.class_balanced(train.labels, per_class=ipc, seed=s["seed"])
    subset = Dataset(f"{train.name}-random{ipc}", "train", train.images[keep], train.labels[keep], train.classes)
    refiners[f"dart-random{ipc}"] = load_or_train_refiner(checkpoint, model, subset, small, device=context.device,
                                                                 progress=False)[0]
    cells = grid(dataset=[s["corrupted_dataset"]], corruption=list(s["condensed_corruptions"]), shift=["lt"],
                 shift_param=[float(r) for r in s["lt_rhos"]], severity=[s["severity"]], method=["bnadapt"],
                 refiner=["none", "dart", *refiners], seed=[s["seed"]])
    frame = run_cells(cells, context.variant(refiners={**context.refiners, **refiners}),
                      path=results_dir(s.profile) / "condensed.csv", experiment="app_condensed",
                      progress=s.profile != "smoke")
    return frame, status
