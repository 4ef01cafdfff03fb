"""The appendix's sensitivity tables (notebook 08): g_phi trained with alpha (the
weight of L_bal, Eq. 3), the intermediate batch size x hidden width and the number of
intermediate epochs changed one at a time, BNAdapt (+DART) on the LT streams, TENT (+DART) through
the grid runner, and every method per test batch size on balanced streams."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pandas as pd

from dartlib.dart.intermediate import load_or_train_refiners
from dartlib.dart.refiner import Refiner
from dartlib.experiments.engine import TestTimeContext, machine_device, paired, run_cells
from dartlib.experiments.grid import Cell, grid, parse_params
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup
from dartlib.paths import results_dir
from dartlib.studies.ablations import ablation_base_config


def refiner_changes(settings: Settings) -> dict[str, dict]:
    """Every g_phi of the notebook by name: the ablation base config changed as given."""
    return {**{f"alpha={a:g}": {"alpha": a} for a in settings["alpha_values"]},
            **{f"int_batch={b};hidden={h}": {"batch_size": b, "hidden": h}
               for b in settings["hyper_int_batches"] for h in settings["hyper_hidden"]},
            **{f"epochs={e}": {"epochs": e} for e in settings["epochs_grid"]}, "base": {}}


@dataclass(frozen=True)
class SensitivityStudy:
    """The profile's settings, source model, every named refiner and the test-time context every
    cell derives from (the source model, the ``base`` refiner, the test batch size and the
    machine's device)."""

    settings: Settings
    setup: SourceSetup
    refiners: dict[str, Refiner]
    context: TestTimeContext

    def named(self, prefix: str) -> dict[str, Refiner]:
        """The refiners whose name starts with ``prefix``."""
        return {name: refiner for name, refiner in self.refiners.items() if name.startswith(prefix)}

    def contexts(self, prefix: str) -> Callable[[Cell], TestTimeContext]:
        """Each cell's context: without a refiner for refiner "none", else with the refiner named
        ``prefix...`` whose settings the cell's params carry (``alpha=0.1,limit=1000`` reads
        ``alpha=0.1``); the variants share one f_theta0_bar memo."""
        named = {name: self.context.variant(refiner=r) for name, r in self.named(prefix).items()}
        plain = self.context.variant(refiner=None)

        def context(cell: Cell) -> TestTimeContext:
            if cell.refiner == "none":
                return plain
            matches = [c for name, c in named.items() if parse_params(name).items() <= cell.options.items()]
            if len(matches) != 1:
                raise ValueError(f"{cell.label()} ({cell.params}): {len(matches)} refiners of {', '.join(named)} match")
            return matches[0]

        return context

    def bnadapt_rows(self, prefix: str) -> pd.DataFrame:
        """BNAdapt alone and with each refiner named ``prefix...`` on the LT streams of
        ``sensitivity_corruptions`` (``results/<profile>/sensitivity.csv``, keyed and resumable);
        ``params`` names each refiner's setting, ``refiner`` is "none" or "dart"."""
        s = self.settings
        axes = dict(dataset=[s["corrupted_dataset"]], shift=["lt"], shift_param=[float(r) for r in s["lt_rhos"]],
                    corruption=list(s["sensitivity_corruptions"]), severity=[s["severity"]], method=["bnadapt"],
                    seed=[s["seed"]])
        cells = grid(**axes, refiner=["none"]) + grid(**axes, refiner=["dart"], params=list(self.named(prefix)))
        return run_cells(cells, self.contexts(prefix), path=results_dir(s.profile) / "sensitivity.csv",
                         experiment="sensitivity", progress=s.profile != "smoke")

    def stream_limit(self) -> str:
        """The ``limit=`` option of the TENT cells ("" when streams are whole)."""
        limit = self.settings["tent_stream_limit"]
        return f",limit={limit}" if limit else ""


def prepare_sensitivity(*, settings: Settings, setup: SourceSetup) -> SensitivityStudy:
    """Every refiner of :func:`refiner_changes` (those not saved beside the checkpoint yet train
    together, one pass of the frozen classifier per intermediate batch size), the LT streams and the
    context the cells derive from, all on the machine's device (:func:`dartlib.experiments.engine.machine_device`)."""
    device = machine_device()
    base = ablation_base_config(settings)
    changes = refiner_changes(settings)
    trained = load_or_train_refiners(setup.checkpoint, setup.model, setup.train,
                                     [replace(base, **c) for c in changes.values()], device=device, progress=False)
    refiners = {name: refiner for name, (refiner, _) in zip(changes, trained)}
    context = TestTimeContext(source=setup.model, refiner=refiners["base"], batch_size=settings["test_batch_size"],
                              device=device)
    return SensitivityStudy(settings=settings, setup=setup, refiners=refiners, context=context)


def run_alpha(study: SensitivityStudy) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The alpha table's cells: BNAdapt (+DART) rows, and both methods' rows with ``refiner``
    "none" or "DART (alpha=...)"; TENT's run through the grid runner
    (``results/<profile>/sensitivity_tent.csv``, resumable)."""
    s = study.settings
    alpha_refiners = study.named("alpha=")
    alpha_bn = study.bnadapt_rows("alpha=")
    limit = study.stream_limit()
    rhos = [float(r) for r in s["lt_rhos"]]

    def tent(refiner: str, params: list[str]):
        return grid(dataset=[s["corrupted_dataset"]], shift=["lt"], shift_param=rhos, corruption=s["tent_corruptions"],
                    severity=[s["severity"]], method=["tent"], refiner=[refiner], params=params, seed=[s["seed"]])

    tent_cells = tent("none", [limit.lstrip(",")]) + tent("dart", [f"{k}{limit}" for k in alpha_refiners])
    alpha_tent = run_cells(tent_cells, study.contexts("alpha="), path=results_dir(s.profile) / "sensitivity_tent.csv",
                           experiment="sensitivity_alpha", progress=s.profile != "smoke")
    frame = pd.concat([alpha_bn, alpha_tent], ignore_index=True)
    frame["refiner"] = [r if r == "none" else f"DART (alpha={parse_params(p)['alpha']})"
                        for r, p in zip(frame.refiner, frame.params)]
    return alpha_bn, frame


def run_hyper(study: SensitivityStudy) -> pd.DataFrame:
    """The intermediate batch x hidden width cells; BNAdapt alone is repeated once per hidden
    width so that it fills each column group."""
    frame = study.bnadapt_rows("int_batch=")
    return pd.concat([frame[frame.refiner == "none"].assign(params=f"hidden={h}")
                      for h in study.settings["hyper_hidden"]]
                     + [frame[frame.refiner != "none"]], ignore_index=True)


def run_epochs_imb(study: SensitivityStudy) -> pd.DataFrame:
    """BNAdapt with the epochs table's refiners on CIFAR-10C-imb streams (beyond the paper's table),
    ``results/<profile>/sensitivity_epochs_imb.csv`` (keyed and resumable)."""
    s = study.settings
    subset = f"subset={s['imb_subset_size']}"
    axes = dict(dataset=[s["corrupted_dataset"]], shift=["online-imb"],
                shift_param=[float(r) for r in s["epochs_imb_irs"]], corruption=list(s["sensitivity_corruptions"]),
                severity=[s["severity"]], method=["bnadapt"], seed=[s["seed"]])
    cells = (grid(**axes, refiner=["none"], params=[subset])
             + grid(**axes, refiner=["dart"], params=[f"{subset},{name}" for name in study.named("epochs=")]))
    return run_cells(cells, study.contexts("epochs="), path=results_dir(s.profile) / "sensitivity_epochs_imb.csv",
                     experiment="sensitivity_epochs_imb", progress=s.profile != "smoke")


def run_test_batches(study: SensitivityStudy) -> pd.DataFrame:
    """NoAdapt, BNAdapt and TENT (+DART with the ``base`` refiner) per test batch size on balanced
    streams, through the grid runner (``results/<profile>/sensitivity_batch.csv``); ``column``
    holds the test batch size."""
    s = study.settings
    context = study.context  # the ``base`` refiner at the profile's test batch size (cells set their own)
    limit = study.stream_limit()
    cells = paired(grid(dataset=[s["corrupted_dataset"]], shift=["none"], shift_param=[None],
                        corruption=s["tent_corruptions"], severity=[s["severity"]],
                        method=["noadapt", "bnadapt", "tent"], refiner=["none", "dart"],
                        params=[f"test_batch={b}{limit}" for b in s["test_batches"]], seed=[s["seed"]]))
    frame = run_cells(cells, context, path=results_dir(s.profile) / "sensitivity_batch.csv",
                      experiment="sensitivity_batch", progress=s.profile != "smoke")
    frame["column"] = [int(parse_params(p)["test_batch"]) for p in frame.params]
    return frame
