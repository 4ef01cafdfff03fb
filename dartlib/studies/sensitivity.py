"""The appendix's sensitivity tables (notebook 08): g_phi trained with alpha (the
weight of L_bal, Eq. 3), the intermediate batch size x hidden width and the number of
intermediate epochs changed one at a time, BNAdapt (+DART) on the LT streams, TENT (+DART) through
the grid runner, and every method per test batch size on balanced streams.

:func:`run` computes every table's rows (the training stage first), :func:`report` builds the
tables beside the paper's (:func:`alpha_table`, :func:`hyper_table`, :func:`equal_steps_table`,
:func:`epochs_table`, :func:`epochs_imb_table`, :func:`batch_size_table`) and the figure
(:func:`plot_sensitivity`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.analysis.noise import SE_SENTENCE, difference
from dartlib.dart.intermediate import load_or_train_refiners, load_refiners
from dartlib.dart.refiner import Refiner
from dartlib.experiments.engine import TestTimeContext, machine_device, paired, run_cells, source_context
from dartlib.experiments.cell_options import CellOptions, cell_options, options_text
from dartlib.experiments.grid import Cell, folder_outcomes, grid
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup
from dartlib.paths import results_dir
from dartlib.reporting.figures import WIDTH, row_colours, save_figure
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import profile_note, show, with_row_labels
from dartlib.studies.ablations import ablation_base_config


# The option naming the equal-steps controls of the batch x width table (:func:`equal_steps_changes`):
# one of its own, so that a check or table reading ``int_batch`` never mixes them in.
EQUAL_STEPS = "equal_steps_batch"


def refiner_changes(settings: Settings) -> dict[str, dict]:
    """Every g_phi of the notebook by name: the ablation base config changed as given. A refiner's
    name is the cell options it is written as in its cells' params (``alpha=0.1``,
    ``int_batch=64;hidden=1000``: :func:`~dartlib.experiments.cell_options.options_text`), "base" the
    unchanged one."""
    return {**{options_text(alpha=a): {"alpha": a} for a in settings.sensitivity.alpha_values},
            **{options_text(int_batch=b, hidden=h): {"batch_size": b, "hidden": h}
               for b in settings.sensitivity.int_batches for h in settings.sensitivity.hidden},
            **{options_text(epochs=e): {"epochs": e} for e in settings.sensitivity.epochs_grid}, "base": {},
            **equal_steps_changes(settings)}


def equal_steps_changes(settings: Settings) -> dict[str, dict]:
    """The batch x width table's controls for "robust to the hyperparameters" (Appendix F): each
    intermediate batch size other than the default trained for as many optimiser steps as the
    default (epochs scaled by batch / default batch; at a fixed epoch count a batch of 128 takes
    half the steps of 64), every hidden width. None where ``hyper_equal_steps`` is false."""
    if not settings.sensitivity.equal_steps:
        return {}
    base = ablation_base_config(settings)
    changes = {}
    for b in settings.sensitivity.int_batches:
        epochs = base.epochs * b / base.batch_size
        if b == base.batch_size:
            continue
        if epochs != int(epochs):
            raise ValueError(f"notebooks/profiles/{settings.profile}.yaml: hyper_equal_steps needs whole epochs, but "
                             f"ablation_epochs {base.epochs} x batch {b} / int_batch_size {base.batch_size} = {epochs:g}; "
                             "set `hyper_equal_steps: false` or an ablation_epochs that divides evenly")
        changes.update({options_text(**{EQUAL_STEPS: b}, hidden=h): {"batch_size": b, "hidden": h, "epochs": int(epochs)}
                        for h in settings.sensitivity.hidden})
    return changes


@dataclass(frozen=True)
class SensitivityStudy:
    """The profile's settings, source model, every named refiner and the test-time context every
    cell derives from (the source model, the ``base`` refiner, the test batch size and the
    machine's device)."""

    settings: Settings
    setup: SourceSetup
    refiners: dict[str, Refiner]
    context: TestTimeContext

    def named(self, option: str) -> dict[str, Refiner]:
        """The refiners whose name's first option is ``option`` (``alpha``, ``int_batch``, ``epochs``,
        :data:`EQUAL_STEPS`)."""
        return {name: refiner for name, refiner in self.refiners.items()
                if "=" in name and next(iter(cell_options(name))) == option}

    def contexts(self, option: str) -> Callable[[Cell], TestTimeContext]:
        """Each cell's context: without a refiner for refiner "none", else with the refiner of
        :meth:`named` whose options the cell's carry (``alpha=0.1,limit=1000`` holds ``alpha=0.1``);
        the variants share one f_theta0_bar memo."""
        named = {name: self.context.variant(refiner=r) for name, r in self.named(option).items()}
        plain = self.context.variant(refiner=None)

        def context(cell: Cell) -> TestTimeContext:
            if cell.refiner == "none":
                return plain
            matches = [c for name, c in named.items() if cell_options(name).items() <= cell.options.items()]
            if len(matches) != 1:
                raise ValueError(f"{cell.label()} ({cell.params}): {len(matches)} refiners of {', '.join(named)} match")
            return matches[0]

        return context

    def bnadapt_rows(self, option: str) -> pd.DataFrame:
        """BNAdapt alone and with each refiner of :meth:`named` ``option`` on the LT streams of
        ``sensitivity_corruptions`` (``results/<profile>/sensitivity.csv``, keyed and resumable);
        ``params`` names each refiner's setting, ``refiner`` is "none" or "dart"."""
        s = self.settings
        axes = dict(dataset=[s.test.corrupted_dataset], shift=["lt"], shift_param=[float(r) for r in s.test.lt_rhos],
                    corruption=list(s.sensitivity.corruptions), severity=[s.test.severity], method=["bnadapt"],
                    seed=[s.seed])
        cells = grid(**axes, refiner=["none"]) + grid(**axes, refiner=["dart"], params=list(self.named(option)))
        return run_cells(cells, self.contexts(option), path=results_dir(s.profile) / "sensitivity.csv",
                         experiment="sensitivity", progress=s.profile != "smoke")


def sensitivity_configs(settings: Settings) -> dict:
    """Each refiner of :func:`refiner_changes` by name: the ablations' base g_phi with its change."""
    base = ablation_base_config(settings)
    return {name: replace(base, **change) for name, change in refiner_changes(settings).items()}


def train_sensitivity_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """The training stage of :func:`prepare_sensitivity`: the source model and test sets
    (:func:`~dartlib.experiments.training_stage.train_source_inputs`) and every refiner of
    :func:`refiner_changes` where absent (trained together, one pass of the frozen classifier per
    intermediate batch size), on the machine's device unless ``device`` names one."""
    from dartlib.experiments.training_stage import train_source_inputs

    source = train_source_inputs(settings=settings, device=device, progress=progress)
    load_or_train_refiners(source.checkpoint, source.model, source.train, list(sensitivity_configs(settings).values()),
                           device=device or machine_device(), progress=progress)


def prepare_sensitivity(*, settings: Settings, setup: SourceSetup) -> SensitivityStudy:
    """Every refiner of :func:`refiner_changes`, loaded (made by :func:`train_sensitivity_inputs`), the
    LT streams and the context the cells derive from (:func:`~dartlib.experiments.engine.source_context`
    around the loaded source model, with the ``base`` refiner), all on the machine's device
    (:func:`dartlib.experiments.engine.machine_device`)."""
    device = machine_device()
    changes = sensitivity_configs(settings)
    trained = load_refiners(setup.checkpoint, list(changes.values()), command=settings.training_command("sensitivity"))
    refiners = {name: refiner for name, (refiner, _) in zip(changes, trained)}
    context = source_context(settings=settings, source=setup.model, refiner=refiners["base"], device=device)
    return SensitivityStudy(settings=settings, setup=setup, refiners=refiners, context=context)


def stream_limit(settings: Settings) -> CellOptions:
    """The ``limit`` option of the TENT and test-batch cells (none when streams are whole)."""
    return CellOptions.of(limit=settings.sensitivity.tent_stream_limit or None)


def alpha_tent_cells(settings: Settings, *, corruptions: list[str]) -> list[Cell]:
    """The alpha table's TENT cells on the LT streams of ``corruptions``: without DART, then with
    each alpha's refiner (named in ``params``, as :meth:`SensitivityStudy.contexts` reads it)."""
    s = settings
    limit = stream_limit(s)
    names = [name for name in refiner_changes(s) if "=" in name and next(iter(cell_options(name))) == "alpha"]

    def tent(refiner: str, params: list[str]):
        return grid(dataset=[s.test.corrupted_dataset], shift=["lt"], shift_param=[float(r) for r in s.test.lt_rhos],
                    corruption=list(corruptions), severity=[s.test.severity], method=["tent"], refiner=[refiner],
                    params=params, seed=[s.seed])

    return tent("none", [limit.text]) + tent("dart", [(cell_options(k) | limit).text for k in names])


def test_batch_cells(settings: Settings, *, corruptions: list[str]) -> list[Cell]:
    """The test batch-size table's cells: NoAdapt, BNAdapt and TENT (+DART with the ``base``
    refiner) per test batch size on the balanced streams of ``corruptions``."""
    s = settings
    return paired(grid(dataset=[s.test.corrupted_dataset], shift=["none"], shift_param=[None],
                       corruption=list(corruptions), severity=[s.test.severity],
                       method=["noadapt", "bnadapt", "tent"], refiner=["none", "dart"],
                       params=[(CellOptions.of(test_batch=b) | stream_limit(s)).text for b in s.sensitivity.test_batches],
                       seed=[s.seed]))


def run_alpha(study: SensitivityStudy) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The alpha table's cells: BNAdapt (+DART) rows, and both methods' rows with ``refiner``
    "none" or "DART (alpha=...)"; TENT's run through the grid runner
    (``results/<profile>/sensitivity_tent.csv``, resumable)."""
    s = study.settings
    alpha_bn = study.bnadapt_rows("alpha")
    tent_cells = alpha_tent_cells(s, corruptions=s.sensitivity.tent_corruptions)
    alpha_tent = run_cells(tent_cells, study.contexts("alpha"), path=results_dir(s.profile) / "sensitivity_tent.csv",
                           experiment="sensitivity_alpha", progress=s.profile != "smoke")
    frame = pd.concat([alpha_bn, alpha_tent], ignore_index=True)
    frame["refiner"] = [r if r == "none" else f"DART (alpha={cell_options(p)['alpha']:g})"
                        for r, p in zip(frame.refiner, frame.params)]
    return alpha_bn, frame


def run_hyper(study: SensitivityStudy) -> pd.DataFrame:
    """The intermediate batch x hidden width cells; BNAdapt alone is repeated once per hidden
    width so that it fills each column group."""
    frame = study.bnadapt_rows("int_batch")
    return pd.concat([frame[frame.refiner == "none"].assign(params=options_text(hidden=h))
                      for h in study.settings.sensitivity.hidden]
                     + [frame[frame.refiner != "none"]], ignore_index=True)


def run_hyper_equal_steps(study: SensitivityStudy) -> pd.DataFrame:
    """BNAdapt with the equal-steps controls (:func:`equal_steps_changes`) on the batch x width
    table's streams, beside BNAdapt alone (``results/<profile>/sensitivity.csv``); no rows where the
    profile trains none."""
    if not equal_steps_changes(study.settings):
        return pd.DataFrame()
    return study.bnadapt_rows(EQUAL_STEPS)


def run_epochs_imb(study: SensitivityStudy) -> pd.DataFrame:
    """BNAdapt with the epochs table's refiners on CIFAR-10C-imb streams (beyond the paper's table),
    ``results/<profile>/sensitivity_epochs_imb.csv`` (keyed and resumable)."""
    s = study.settings
    subset = CellOptions.of(subset=s.test.imb_subset_size)
    axes = dict(dataset=[s.test.corrupted_dataset], shift=["online-imb"],
                shift_param=[float(r) for r in s.sensitivity.epochs_imb_irs], corruption=list(s.sensitivity.corruptions),
                severity=[s.test.severity], method=["bnadapt"], seed=[s.seed])
    cells = (grid(**axes, refiner=["none"], params=[subset.text])
             + grid(**axes, refiner=["dart"], params=[(subset | cell_options(name)).text for name in study.named("epochs")]))
    return run_cells(cells, study.contexts("epochs"), path=results_dir(s.profile) / "sensitivity_epochs_imb.csv",
                     experiment="sensitivity_epochs_imb", progress=s.profile != "smoke")


def run_test_batches(study: SensitivityStudy) -> pd.DataFrame:
    """NoAdapt, BNAdapt and TENT (+DART with the ``base`` refiner) per test batch size on balanced
    streams, through the grid runner (``results/<profile>/sensitivity_batch.csv``); ``column``
    holds the test batch size."""
    s = study.settings
    context = study.context  # the ``base`` refiner at the profile's test batch size (cells set their own)
    cells = test_batch_cells(s, corruptions=s.sensitivity.tent_corruptions)
    frame = run_cells(cells, context, path=results_dir(s.profile) / "sensitivity_batch.csv",
                      experiment="sensitivity_batch", progress=s.profile != "smoke")
    frame["column"] = [cell_options(p)["test_batch"] for p in frame.params]
    return frame


@dataclass(frozen=True)
class SensitivityRows:
    """Every sensitivity table's rows (:func:`run`): ``alpha_bn`` BNAdapt (+DART) per alpha and
    ``alpha`` with TENT's, ``hyper`` the batch x width table's (BNAdapt repeated per width),
    ``equal_steps`` its equal-steps controls (empty where the profile trains none), ``epochs`` and
    ``epochs_imb`` the epochs refiners on LT and CIFAR-10C-imb streams, ``batch`` the test batch
    sizes; ``source`` names the source model and its clean accuracy."""

    alpha_bn: pd.DataFrame
    alpha: pd.DataFrame
    hyper: pd.DataFrame
    equal_steps: pd.DataFrame
    epochs: pd.DataFrame
    epochs_imb: pd.DataFrame
    batch: pd.DataFrame
    source: str


def run(*, settings: Settings) -> SensitivityRows:
    """The sensitivity study computed where its rows are missing or stale: the training stage
    (:func:`train_sensitivity_inputs`), the study's refiners and context (:func:`prepare_sensitivity`),
    then each table's cells."""
    from dartlib.experiments.source_setup import prepare_source

    train_sensitivity_inputs(settings=settings)
    study = prepare_sensitivity(settings=settings, setup=prepare_source(settings=settings))
    alpha_bn, alpha = run_alpha(study)
    return SensitivityRows(alpha_bn=alpha_bn, alpha=alpha, hyper=run_hyper(study), equal_steps=run_hyper_equal_steps(study),
                           epochs=study.bnadapt_rows("epochs"), epochs_imb=run_epochs_imb(study),
                           batch=run_test_batches(study), source=study.setup.describe(settings))


@dataclass(frozen=True)
class SensitivityReport:
    """The sensitivity tables (each printed beside the paper's as it is built) and the figure, from
    one set of rows (:func:`report`)."""

    settings: Settings
    rows: SensitivityRows

    def alpha_table(self) -> pd.DataFrame:
        """:func:`alpha_table` of the rows."""
        return alpha_table(frame=self.rows.alpha, settings=self.settings)

    def hyper_table(self) -> pd.DataFrame:
        """:func:`hyper_table` of the rows."""
        return hyper_table(frame=self.rows.hyper, settings=self.settings)

    def equal_steps_table(self) -> pd.DataFrame:
        """:func:`equal_steps_table` of the rows."""
        return equal_steps_table(hyper_frame=self.rows.hyper, equal_frame=self.rows.equal_steps, settings=self.settings)

    def epochs_table(self) -> pd.DataFrame:
        """:func:`epochs_table` of the rows."""
        return epochs_table(frame=self.rows.epochs, settings=self.settings)

    def epochs_imb_table(self) -> pd.DataFrame:
        """:func:`epochs_imb_table` of the rows."""
        return epochs_imb_table(frame=self.rows.epochs_imb, settings=self.settings)

    def batch_size_table(self) -> pd.DataFrame:
        """:func:`batch_size_table` of the rows."""
        return batch_size_table(frame=self.rows.batch, settings=self.settings)

    def figure(self) -> plt.Figure:
        """:func:`plot_sensitivity` of the rows."""
        return plot_sensitivity(alpha_frame=self.rows.alpha, batch_frame=self.rows.batch, settings=self.settings)


def report(*, settings: Settings, rows: SensitivityRows) -> SensitivityReport:
    """The sensitivity tables and figure from ``rows`` (:func:`run`), built by this module's functions
    only, for notebook 08."""
    return SensitivityReport(settings=settings, rows=rows)


def alpha_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's alpha table: BNAdapt and TENT, alone and with DART per alpha."""
    alphas = settings.sensitivity.alpha_values
    paper = load_table("app_alpha")
    paper["refiner"] = [f"DART (alpha={cell_options(p)['alpha']:g})" for p in paper.params]
    dart_rows = [f"{m}+DART (alpha={a:g})" for m in ("BNAdapt", "TENT") for a in alphas]
    order = ["BNAdapt", *dart_rows[: len(alphas)], "TENT", *dart_rows[len(alphas):]]
    return show("app_alpha", frame, paper, settings=settings, columns="shift_param", order=order,
                caption=f"alpha; BNAdapt over {len(settings.sensitivity.corruptions)}, "
                        f"TENT over {len(settings.sensitivity.tent_corruptions)} corruption(s)")


def hyper_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows: the intermediate batch (BNAdapt alone is one row); columns: hidden width x rho."""
    p = [cell_options(v) for v in frame.params]
    return frame.assign(method=[f"int batch {q['int_batch']}" if "int_batch" in q else "bnadapt" for q in p],
                        refiner=["none"] * len(frame),
                        column=[f"hidden {q['hidden']}, rho={r:g}" for q, r in zip(p, frame.shift_param)])


def hyper_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's intermediate batch size x hidden width table, BNAdapt+DART."""
    order = ["BNAdapt", *[f"int batch {b}" for b in settings.sensitivity.int_batches]]
    return show("app_hyperparameters", hyper_layout(frame), hyper_layout(load_table("app_hyperparameters")),
                settings=settings, columns="column", order=order,
                caption="intermediate batch size x hidden width, BNAdapt+DART")


def equal_steps_table(*, hyper_frame: pd.DataFrame, equal_frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """BNAdapt+DART's gain over BNAdapt per intermediate batch x hidden width with every refiner
    trained for the default's optimiser steps (the batch-64 refiners of the batch x width table and
    the controls of :func:`equal_steps_changes`), and each gain minus the default's (batch 64,
    width 1000), as "value ± SE" (:mod:`dartlib.analysis.noise`, paired on the same streams, from
    the rows' per-image outcomes); printed with its profile. What "robust to the hyperparameters"
    (Appendix F) is judged on."""
    s = settings
    if equal_frame.empty:
        print(f"not run on the {s.profile} profile (hyper_equal_steps: false): the batch x width table's refiners "
              "train for a fixed number of epochs, so their batch sizes take different numbers of steps")
        return pd.DataFrame()
    base, outcomes = ablation_base_config(s), folder_outcomes(results_dir(s.profile))
    rows = pd.concat([hyper_frame[hyper_frame.refiner != "none"], equal_frame], ignore_index=True)
    plain = equal_frame[equal_frame.refiner == "none"]

    def refined(b: int, h: int) -> pd.DataFrame:
        name = options_text(**{"int_batch" if b == base.batch_size else EQUAL_STEPS: b}, hidden=h)
        return rows[(rows.refiner == "dart") & (rows.params == name)]

    default = refined(base.batch_size, base.hidden)
    table = {}
    for b in s.sensitivity.int_batches:
        epochs = base.epochs * b // base.batch_size
        for h in s.sensitivity.hidden:
            for rho in (r for r in s.test.lt_rhos if float(r) != 1.0):
                mine = _at(refined(b, h), rho)
                gain = difference(mine, _at(plain, rho), outcomes=outcomes)
                gap = difference(mine, _at(default, rho), outcomes=outcomes)
                row = table.setdefault(f"hidden {h}, rho={rho:g}", {})
                row[f"batch {b} ({epochs} ep.): gain"] = gain.text(missing="not run")
                row[f"batch {b}: minus default"] = gap.text(missing="not run")
    frame = pd.DataFrame(table).T
    print(f"BNAdapt+DART's gain over BNAdapt at equal optimiser steps (every batch size trained for {base.epochs} "
          f"epoch(s) x {base.batch_size} / batch; the default: batch {base.batch_size}, width {base.hidden}), points, "
          f"{len(s.sensitivity.corruptions)} corruption(s) ({profile_note(s)}); {SE_SENTENCE}")
    print(frame.to_string())
    return frame


def _at(frame: pd.DataFrame, rho: float) -> pd.DataFrame:
    return frame[frame.shift_param.astype(float) == float(rho)]


def epochs_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows named by the refiner's intermediate epochs (BNAdapt alone: "bnadapt")."""
    return frame.assign(method=[f"{cell_options(p)['epochs']} epochs" if p else "bnadapt" for p in frame.params],
                        refiner="none")


def epochs_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's intermediate-epochs table, BNAdapt+DART."""
    order = ["BNAdapt", *[f"{e} epochs" for e in settings.sensitivity.epochs_grid]]
    return show("app_epochs", epochs_layout(frame), epochs_layout(load_table("app_epochs")), settings=settings,
                columns="shift_param", order=order, caption="intermediate epochs, BNAdapt+DART")


def epochs_imb_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """BNAdapt(+DART) per epochs refiner on CIFAR-10C-imb, mean over corruptions, printed; on
    CIFAR-10-C profiles with the paper's BNAdapt and 50-epoch BNAdapt+DART rows of its
    CIFAR-10C-imb table."""
    s = settings
    means = frame.assign(row=[f"+DART, {cell_options(p)['epochs']} epochs" if r == "dart" else "BNAdapt"
                              for r, p in zip(frame.refiner, frame.params)])
    means = means.pivot_table(index="row", columns="shift_param", values="accuracy")
    means = means.reindex(["BNAdapt", *[f"+DART, {e} epochs" for e in s.sensitivity.epochs_grid]])
    if s.test.corrupted_dataset == "cifar10c":
        paper = load_table("app_cifar10c_imb")
        paper = paper[(paper.method == "bnadapt") & paper.shift_param.isin(s.sensitivity.epochs_imb_irs)]
        means.loc["paper: BNAdapt"] = paper[paper.refiner == "none"].set_index("shift_param").accuracy
        means.loc["paper: +DART, 50 epochs"] = paper[paper.refiner == "dart"].set_index("shift_param").accuracy
    means.columns = [f"IR {c:g}" for c in means.columns]
    print(f"BNAdapt(+DART) on {s.test.corrupted_dataset}-imb, accuracy (%), mean over "
          f"{len(s.sensitivity.corruptions)} corruption(s), subsets of {s.test.imb_subset_size} "
          f"({profile_note(s)})")
    print(means.round(1).to_string())
    return means


def batch_size_table(*, frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The appendix's test-batch-size table on balanced streams (columns: the batch sizes)."""
    paper = load_table("app_batch_size")
    paper["column"] = [cell_options(p)["test_batch"] for p in paper.params]
    paper = paper[paper.column.isin(settings.sensitivity.test_batches)]
    return show("app_batch_size", frame, paper, settings=settings, columns="column",
                order=["NoAdapt", "BNAdapt", "BNAdapt+DART", "TENT", "TENT+DART"],
                caption=f"test batch size, balanced {settings.test.corrupted_dataset}, "
                        f"{len(settings.sensitivity.tent_corruptions)} corruption(s)")


def plot_sensitivity(*, alpha_frame: pd.DataFrame, batch_frame: pd.DataFrame, settings: Settings,
                     outcomes=None) -> plt.Figure:
    """Left: BNAdapt+DART's accuracy per alpha and rho, ± 2 SE, on a symmetric-log alpha axis (linear
    below 0.01, so that alpha 0 has its place left of 0.01), BNAdapt dotted (in the legend); right:
    each method's accuracy per test batch size on balanced streams, ± 2 SE. The SE is the suite's
    (:mod:`dartlib.analysis.noise`), from ``outcomes``, by default the per-image outcomes beside the
    profile's results (an upper bound for rows without them). The left panel's colours are shades
    of grey by rho, the right panel's the methods' own colours (figures.row_colours): no colour
    means two things. Saved as ``figures/<profile>/sensitivity``."""
    from matplotlib.lines import Line2D

    from dartlib.analysis.noise import mean_estimate

    outcomes = outcomes if outcomes is not None else folder_outcomes(results_dir(settings.profile))
    alphas = settings.sensitivity.alpha_values
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.2))
    bn = alpha_frame[alpha_frame.method == "bnadapt"]
    rhos = sorted(bn.shift_param.astype(float).unique())
    shades = plt.cm.Greys(np.linspace(0.45, 0.95, len(rhos)))

    def point(rows: pd.DataFrame):
        return mean_estimate(rows=rows, outcomes=outcomes)

    for rho, shade, marker in zip(rhos, shades, "os^vD"):
        at = bn[bn.shift_param.astype(float) == rho]
        estimates = [point(at[at.refiner == f"DART (alpha={a:g})"]) for a in alphas]
        axes[0].errorbar(alphas, [e.value for e in estimates], yerr=[2 * e.se for e in estimates], marker=marker,
                         color=shade, capsize=2, label=f"ρ = {rho:g}")
        axes[0].axhline(point(at[at.refiner == "none"]).value, ls=":", color=shade)
    axes[0].set_xscale("symlog", linthresh=0.01, linscale=0.5)
    axes[0].set_xticks(alphas, [f"{a:g}" for a in alphas])
    axes[0].set_xlim(-0.002, max(alphas) * 1.4)
    axes[0].set_xlabel("alpha (symmetric log scale: linear below 0.01)")
    axes[0].set_ylabel("BNAdapt+DART accuracy (%, ± 2 SE)")
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Line2D([], [], ls=":", color="0.4"))
    labels.append("BNAdapt (the ρ's shade)")
    # below the panel: inside, it covered a BNAdapt line whatever its corner
    axes[0].legend(handles, labels, title="BNAdapt+DART", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
                   frameon=False)
    by_batch = with_row_labels(batch_frame)
    curves = by_batch.pivot_table(index="column", columns="row", values="accuracy")
    colours = row_colours(list(by_batch.row.unique()))
    for label in by_batch.row.unique():  # the grid's order, not A-Z
        rows = by_batch[by_batch.row == label]
        estimates = [point(rows[rows.column == size]) for size in curves.index]
        axes[1].errorbar(curves.index, [e.value for e in estimates], yerr=[2 * e.se for e in estimates], marker="o",
                         capsize=2, label=label, color=colours[label])
    axes[1].set_xscale("log")
    axes[1].set_xticks(list(curves.index), [f"{size:g}" for size in curves.index])
    axes[1].minorticks_off()
    axes[1].legend(title=None, loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside: inside it hid curves
    axes[1].set_xlabel("test batch size")
    axes[1].set_ylabel("accuracy (%, ± 2 SE), balanced stream")
    fig.suptitle(f"Sensitivity to alpha and to the test batch size ({settings.profile} profile)")
    save_figure(fig, profile=settings.profile, name="sensitivity")
    return fig
