"""The appendix's cost table ("additional cost"): every method's parameters, MACs and wall clock
over one corrupted test stream with notebook 04's g_phi, the time intermediate training takes on
this machine, and the table beside the paper's (its numbers come from its GPU, ours from the
device named beside them)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from dartlib import devices
from dartlib.dart.intermediate import load_or_train_refiner, refiner_path, train_refiner
from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data import load, protocols
from dartlib.experiments.settings import Settings, dart_config
from dartlib.experiments.source_setup import SourceSetup, prepare_source
from dartlib.models.checkpoints import load_weights
from dartlib.paths import results_dir
from dartlib.perf.costs import cost_table
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import row_label


@dataclass(frozen=True)
class CostStudy:
    """What is timed: the device, the source model, notebook 04's g_phi and the test stream's images."""

    settings: Settings
    device: str
    device_name: str
    setup: SourceSetup
    config: DartConfig
    refiner: Refiner
    images: np.ndarray

    def describe(self) -> str:
        """One line naming the backbone, the stream and the device."""
        s = self.settings
        return (f"profile={s.profile}: {s['source_arch']}, {len(self.images)} images of "
                f"{s['corrupted_dataset']}/{s['cost_corruption']}, batch {s['test_batch_size']}; "
                f"device: {self.device_name}")


def prepare_costs(settings: Settings) -> CostStudy:
    """The source model, notebook 04's g_phi (trained if absent) and the first ``cost_stream_limit``
    images of the balanced ``cost_corruption`` stream in i.i.d. order, timed on the machine's device
    (:func:`dartlib.devices.default_device`: ``$DART_DEVICE``, else the GPU when there is one)."""
    device = devices.default_device()
    device_name = (torch.cuda.get_device_name(device) if devices.resident(device)
                   else f"CPU, {torch.get_num_threads()} torch threads")
    setup = prepare_source(settings=settings)
    config = dart_config(settings.values)
    refiner, _ = load_or_train_refiner(setup.checkpoint, setup.model, setup.train, config, device=device,
                                       progress=False)
    test = load(settings["corrupted_dataset"], corruption=settings["cost_corruption"], severity=settings["severity"])
    order = protocols.iid_order(test.labels, seed=settings["seed"])
    limit = settings["cost_stream_limit"]
    order = order[:limit] if limit else order
    return CostStudy(settings=settings, device=device, device_name=device_name, setup=setup, config=config,
                     refiner=refiner, images=test.images[order])


def measure_costs(study: CostStudy) -> pd.DataFrame:
    """:func:`dartlib.perf.costs.cost_table` over the stream, with each wall clock relative to
    BNAdapt's (what transfers between machines); written to ``results/<profile>/costs.csv``."""
    s = study.settings
    ours = cost_table(study.setup.model, study.refiner, study.images, batch_size=s["test_batch_size"],
                      repeats=s["cost_repeats"], device=study.device)
    bnadapt = ours.set_index(["method", "refiner"]).loc[("bnadapt", "none"), "wall_clock_s"]
    ours["wall_clock_vs_bnadapt"] = ours.wall_clock_s / bnadapt
    ours.to_csv(results_dir(s.profile) / "costs.csv", index=False, float_format="%.6g")
    return ours


def intermediate_timing(study: CostStudy) -> str:
    """The time ``intermediate_steps_timed`` steps of Algorithm 1 take here, scaled to one epoch
    and to the profile's epochs, and the time recorded when the profile's refiner was trained."""
    s, config, steps = study.settings, study.config, study.settings["intermediate_steps_timed"]
    start = time.perf_counter()
    train_refiner(study.setup.model, study.setup.train, config, device=study.device, progress=False, max_steps=steps)
    per_step = (time.perf_counter() - start) / steps
    n_int = len(protocols.class_balanced(study.setup.train.labels, per_class=config.per_class, seed=s["seed"]))
    steps_per_epoch = n_int // config.batch_size
    # weights_only (load_weights): a refiner file holds tensors and plain values, never code to run
    recorded = load_weights(refiner_path(study.setup.checkpoint, config), required=("meta",))["meta"]
    return (f"{study.device_name}: {per_step * 1000:.1f} ms per step (a Dirichlet and an i.i.d. batch of "
            f"{config.batch_size}); {steps_per_epoch} steps per epoch over {n_int} images -> about "
            f"{per_step * steps_per_epoch / 60:.1f} min per epoch, {per_step * steps_per_epoch * config.epochs / 60:.1f}"
            f" min for the profile's {config.epochs} epochs\n"
            f"recorded when the refiner was trained: {recorded['seconds'] / 60:.1f} min on {recorded['device']}")


def cost_rows(ours: pd.DataFrame) -> pd.DataFrame:
    """Our cost rows (``results/<profile>/costs.csv``) merged with the paper's (suffix ``_paper``),
    a ``row`` label first and the wall clocks also relative to BNAdapt's."""
    paper = load_table("app_cost")[["method", "refiner", "params_m", "trainable_params_m", "flops_g", "wall_clock_s"]]
    bnadapt = paper.set_index(["method", "refiner"]).loc[("bnadapt", "none"), "wall_clock_s"]
    paper["wall_clock_vs_bnadapt"] = paper.wall_clock_s / bnadapt
    side = ours.merge(paper, on=["method", "refiner"], how="left", suffixes=("", "_paper"))
    side.insert(0, "row", [row_label(m, r) for m, r in zip(side.method, side.refiner)])
    return side


def costs_beside_paper(*, ours: pd.DataFrame, settings: Settings, device_name: str, images: int) -> pd.DataFrame:
    """:func:`cost_rows`, printed with the two devices named."""
    side = cost_rows(ours)
    print(f"ours: {settings['source_arch']} on {device_name}, {images} images ({settings.profile} profile); "
          f"paper: ResNet-26 on its GPU, CIFAR-10-C")
    print(side.drop(columns=["method", "refiner", "device", "images"]).round(4).to_string(index=False))
    return side
