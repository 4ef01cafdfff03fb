"""The appendix's cost table ("additional cost"): every method's parameters, MACs and wall clock
over one corrupted test stream with notebook 04's g_phi, the time intermediate training takes on
this machine, and the table beside the paper's (its numbers come from its GPU, ours from the
device named beside them).

Both measurements are keyed tables (:mod:`dartlib.experiments.keyed_tables`): ``costs.csv`` and
``intermediate_timing.csv`` are kept under the digest of what was timed (the settings, the source
model's and g_phi's weights, the test set, the torch version and the kind of device), and each row
names the machine that measured it. A notebook run again reads them; a changed input measures again,
and so does ``remeasure_costs`` (a timing is a record of one machine, not a function of the inputs:
another machine's run shows ours, named, until it is asked to measure its own).

:func:`run` measures (or reads) both after the training stage; :func:`report` puts the cost table
beside the paper's (:func:`costs_beside_paper`)."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dartlib import devices
from dartlib.dart.intermediate import load_refiners, refiner_path
from dartlib.dart.refiner_training import train_refiner
from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data import load, protocols
from dartlib.experiments.keyed_tables import keyed_table, stamp_path, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup, prepare_source
from dartlib.models.checkpoints import load_weights
from dartlib.paths import results_dir
from dartlib.perf.costs import cost_table
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import row_label

# raised when the code changes what is measured
COSTS_REVISION = 1


def machine_name(device: str) -> str:
    """The device a timing was taken on: the GPU's name, else the CPU's model and torch's threads."""
    if devices.resident(device):
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        model = names[0] if names else model
    return f"CPU ({model}), {torch.get_num_threads()} torch threads"


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
        return (f"profile={s.profile}: {s.source.arch}, {len(self.images)} images of "
                f"{s.test.corrupted_dataset}/{s.costs.corruption}, batch {s.test.batch_size}; "
                f"device: {self.device_name}")


def prepare_costs(settings: Settings) -> CostStudy:
    """The source model, notebook 04's g_phi (made by the training stage,
    :func:`~dartlib.experiments.training_stage.train_profile_inputs`) and the first ``cost_stream_limit``
    images of the balanced ``cost_corruption`` stream in i.i.d. order, timed on the machine's device
    (:func:`dartlib.devices.default_device`: ``$DART_DEVICE``, else the GPU when there is one)."""
    device = devices.default_device()
    device_name = machine_name(device)
    setup = prepare_source(settings=settings)
    config = settings.dart_config()
    [(refiner, _)] = load_refiners(setup.checkpoint, [config], command=settings.training_command())
    test = load(settings.test.corrupted_dataset, corruption=settings.costs.corruption, severity=settings.test.severity)
    order = protocols.iid_order(test.labels, seed=settings.seed)
    limit = settings.costs.stream_limit
    order = order[:limit] if limit else order
    return CostStudy(settings=settings, device=device, device_name=device_name, setup=setup, config=config,
                     refiner=refiner, images=test.images[order])


def cost_inputs(study: CostStudy) -> str:
    """The digest of what the cost table times (module docstring)."""
    s = study.settings
    values = (s.costs.corruption, s.costs.stream_limit, s.costs.repeats, s.test.batch_size, s.seed,
              s.costs.intermediate_steps_timed)
    return study_inputs("costs", revision=COSTS_REVISION, values=values, models=(study.setup.model, study.refiner),
                        sets=((s.test.corrupted_dataset, s.costs.corruption, s.test.severity),))


def _keyed(study: CostStudy, name: str, *, remeasure: bool, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    path = results_dir(study.settings.profile) / name
    if remeasure:
        stamp_path(path).unlink(missing_ok=True)
    return keyed_table(path, inputs=cost_inputs(study), compute=compute)


def measure_costs(study: CostStudy, *, remeasure: bool = False) -> pd.DataFrame:
    """:func:`dartlib.perf.costs.cost_table` over the stream, with each wall clock relative to
    BNAdapt's (what transfers between machines) and the machine named: ``results/<profile>/costs.csv``,
    read when current (module docstring), measured when not or when ``remeasure``."""
    s = study.settings

    def measured() -> pd.DataFrame:
        ours = cost_table(study.setup.model, study.refiner, study.images, batch_size=s.test.batch_size,
                          repeats=s.costs.repeats, device=study.device)
        bnadapt = ours.set_index(["method", "refiner"]).loc[("bnadapt", "none"), "wall_clock_s"]
        return ours.assign(wall_clock_vs_bnadapt=ours.wall_clock_s / bnadapt, machine=study.device_name)

    return _keyed(study, "costs.csv", remeasure=remeasure, compute=measured)


def intermediate_timing(study: CostStudy, *, remeasure: bool = False) -> str:
    """The time ``intermediate_steps_timed`` steps of Algorithm 1 take, scaled to one epoch and to
    the profile's epochs, and the time recorded when the profile's refiner was trained; the timing is
    kept in ``results/<profile>/intermediate_timing.csv`` like the cost table."""
    s, config, steps = study.settings, study.config, study.settings.costs.intermediate_steps_timed

    def measured() -> pd.DataFrame:
        start = time.perf_counter()
        train_refiner(study.setup.model, study.setup.train, config, device=study.device, progress=False,
                      max_steps=steps)
        per_step = (time.perf_counter() - start) / steps
        n_int = len(protocols.class_balanced(study.setup.train.labels, per_class=config.per_class, seed=s.seed))
        # weights_only (load_weights): a refiner file holds tensors and plain values, never code to run
        recorded = load_weights(refiner_path(study.setup.checkpoint, config), required=("meta",))["meta"]
        return pd.DataFrame([{"machine": study.device_name, "steps_timed": steps, "per_step_s": per_step,
                              "n_int": n_int, "steps_per_epoch": n_int // config.batch_size, "epochs": config.epochs,
                              "recorded_s": recorded["seconds"], "recorded_device": recorded["device"]}])

    row = _keyed(study, "intermediate_timing.csv", remeasure=remeasure, compute=measured).iloc[0]
    epoch_s = row.per_step_s * row.steps_per_epoch
    return (f"{row.machine}: {row.per_step_s * 1000:.1f} ms per step (a Dirichlet and an i.i.d. batch of "
            f"{config.batch_size}); {row.steps_per_epoch} steps per epoch over {row.n_int} images -> about "
            f"{epoch_s / 60:.1f} min per epoch, {epoch_s * row.epochs / 60:.1f} min for the profile's {row.epochs} "
            f"epochs\nrecorded when the refiner was trained: {row.recorded_s / 60:.1f} min on {row.recorded_device}")


def cost_rows(ours: pd.DataFrame) -> pd.DataFrame:
    """Our cost rows (``results/<profile>/costs.csv``) merged with the paper's (suffix ``_paper``),
    a ``row`` label first and the wall clocks also relative to BNAdapt's."""
    paper = load_table("app_cost")[["method", "refiner", "params_m", "trainable_params_m", "flops_g", "wall_clock_s"]]
    bnadapt = paper.set_index(["method", "refiner"]).loc[("bnadapt", "none"), "wall_clock_s"]
    paper["wall_clock_vs_bnadapt"] = paper.wall_clock_s / bnadapt
    side = ours.merge(paper, on=["method", "refiner"], how="left", suffixes=("", "_paper"))
    side.insert(0, "row", [row_label(m, r) for m, r in zip(side.method, side.refiner)])
    return side


def costs_beside_paper(*, ours: pd.DataFrame, settings: Settings, images: int) -> pd.DataFrame:
    """:func:`cost_rows`, printed with the two devices named (ours: the machine that measured them)."""
    side = cost_rows(ours)
    machine = ", ".join(sorted(set(ours.machine.astype(str)))) if "machine" in ours else "an unnamed machine"
    print(f"ours: {settings.source.arch} on {machine}, {images} images ({settings.profile} profile); "
          f"paper: ResNet-26 on its GPU, CIFAR-10-C")
    print(side.drop(columns=["method", "refiner", "device", "images", "machine"], errors="ignore").round(4)
          .to_string(index=False))
    return side


@dataclass(frozen=True)
class CostRows:
    """The cost table's rows and the intermediate-training timing (:func:`run`), with what was timed
    (``describe``) and over how many test images."""

    costs: pd.DataFrame
    timing: str
    describe: str
    images: int


def run(*, settings: Settings) -> CostRows:
    """The training stage (the source model, test sets and notebook 04's g_phi, made where absent),
    then :func:`measure_costs` and :func:`intermediate_timing`, read where current and timed again
    where not or where ``remeasure_costs`` asks."""
    from dartlib.experiments.training_stage import train_profile_inputs

    train_profile_inputs(settings=settings, method_inputs=False)
    study = prepare_costs(settings)
    remeasure = settings.costs.remeasure
    return CostRows(costs=measure_costs(study, remeasure=remeasure),
                    timing=intermediate_timing(study, remeasure=remeasure), describe=study.describe(),
                    images=len(study.images))


@dataclass(frozen=True)
class CostReport:
    """The cost table beside the paper's from one set of rows (:func:`report`)."""

    settings: Settings
    rows: CostRows

    def beside_paper(self) -> pd.DataFrame:
        """:func:`costs_beside_paper` of the rows (printed)."""
        return costs_beside_paper(ours=self.rows.costs, settings=self.settings, images=self.rows.images)


def report(*, settings: Settings, rows: CostRows) -> CostReport:
    """Notebook 10's table from ``rows`` (:func:`run`)."""
    return CostReport(settings=settings, rows=rows)
