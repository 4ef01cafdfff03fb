"""The ablation variants of DART (Tables 3-5, Appendix "DART-split on CIFAR-10C-LT") and their
evaluation with BNAdapt.

Every variant is a named change of :class:`dartlib.dart.refiner.DartConfig`, trained by the same
intermediate-time code (:func:`prepare_ablation_context`). BNAdapt with each variant, and BNAdapt
alone, on the LT and online-imbalance streams (:func:`ablation_cells`, ``python -m dartlib grid
ablations``) are cells of the engine: keyed, resumable rows with per-image outcomes, where the
variants of a stream share one forward of the frozen BN-adapted source model (its memo).

:func:`bnadapt_streams` keeps that model's per-batch logits and penultimate features of whole
streams for analyses that read the features themselves (HOC, Appendix E).

:func:`run` (the training stage, the context, the cells: the rows) or :func:`stored` (the rows as
committed) and :func:`report` (its tables beside the paper's, :func:`ablation_tables`; the gains
beside the former shortcut's, :func:`gains_beside_shortcut`; the gain figure,
:func:`plot_variant_gains`), which notebook 07 and the results page call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import nn
import torch
from tqdm import tqdm

from dartlib import devices
from dartlib.dart.intermediate import load_or_train_refiners, load_refiners
from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data import load, protocols
from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.protocols import TEST_BATCH_SIZE
from dartlib.experiments.cell_options import options_text
from dartlib.experiments.engine import TestTimeContext, prepare_context, run_cells
from dartlib.experiments.training_stage import train_source_inputs
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings
from dartlib.models.backbones import frozen_bn_adapted
from dartlib.models.evaluation import logits_accuracy, stream_features
from dartlib.paths import results_dir
from dartlib.registry import UnknownNameError, unknown_name_message
from dartlib.reporting.figures import WIDTH, save_figure
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label


# refiner label (the paper's rows, as transcribed in data/paper/) -> change of the DART config
VARIANTS: dict[str, dict] = {
    "dart": {},
    "dart-pbar-only": {"inputs": "pbar"},  # Table 3: g_phi reads p_bar only
    "dart-w-only": {"outputs": "w"},  # Table 3: W only (b = 0)
    "dart-b-only": {"outputs": "b"},  # Table 3: b only (W = I)
    "dart-sampling-unif-lt": {"sampling": "unif-lt"},  # Table 4: uniform, LT and inverse LT batches
    "dart-additive": {"outputs": "additive"},  # Table 5: additive parameters of the last layers
    "dart-split": {"variant": "dart-split"},  # Appendix B / the DART-split appendix table
}


def variant_config(name: str, base: DartConfig) -> DartConfig:
    """``base`` changed as variant ``name`` prescribes."""
    if name not in VARIANTS:
        raise UnknownNameError(unknown_name_message("DART variant", name, list(VARIANTS)))
    return replace(base, **VARIANTS[name])


@dataclass
class Stream:
    """One test stream: labels in stream order and, per batch, f_theta0_bar's logits and features."""

    shift: str
    shift_param: float
    corruption: str
    labels: np.ndarray
    logits: list[torch.Tensor]
    features: list[torch.Tensor]
    batch_size: int


def stream_order(labels: np.ndarray, *, shift: str, shift_param: float, seed: int, subset_size: int = 0) -> np.ndarray:
    """The test order of the ablation tables' shifts: ``lt`` (CIFAR-10C-LT, rho = ``shift_param``)
    or ``online-imb`` (CIFAR-10C-imb, IR = ``shift_param``, subsets of ``subset_size``)."""
    if shift not in ("lt", "online-imb"):
        raise ValueError(f"unknown shift {shift!r}; valid: lt, online-imb")
    return protocols.test_order(labels, shift=shift, shift_param=shift_param, seed=seed, subset_size=subset_size)


@torch.no_grad()
def bnadapt_streams(
    model: nn.Module, *, dataset: str, corruptions: Sequence[str], shifts: Mapping[str, Sequence[float]],
    severity: int = 5, seed: int = 0, batch_size: int = TEST_BATCH_SIZE, subset_size: int = 0,
    device: str | None = None, progress: bool = False,
) -> list[Stream]:
    """f_theta0_bar's per-batch features and logits on every (corruption, shift, parameter) stream
    (``subset_size``: images per subset of the online-imbalance streams; 0: the paper's N / K),
    computed on ``device`` (None: the machine's, :func:`dartlib.devices.default_device`) and kept
    on the CPU."""
    device = device or devices.default_device()
    frozen = frozen_bn_adapted(model).to(device)
    jobs = [(c, s, float(p)) for c in corruptions for s, params in shifts.items() for p in params]
    out = []
    for corruption, shift, param in tqdm(jobs, desc="BN-adapted streams",
                                         **({} if progress else {"disable": True})):  # TQDM_DISABLE=1 silences it
        data = load(dataset, corruption=corruption, severity=severity)
        order = stream_order(data.labels, shift=shift, shift_param=param, seed=seed, subset_size=subset_size)
        feats = stream_features(frozen, data.images, order, batch_size=batch_size, device=device)
        logits = [frozen.head(f.to(device)).cpu() for f in feats]
        out.append(Stream(shift, param, corruption, data.labels[order], logits, feats, batch_size))
    return out


def refined_accuracy(stream: Stream, refiner: Refiner | None) -> float:
    """Accuracy (%) of BNAdapt (``refiner`` None) or BNAdapt + refiner on one stream (its logits,
    its features and the refiner on one device)."""
    return logits_accuracy(stream.logits, stream.labels, np.arange(len(stream.labels)), batch_size=stream.batch_size,
                           refiner=refiner, features=stream.features)


def ablation_base_config(settings: Settings):
    """The g_phi settings every variant starts from: the profile's, with the ``ablation_*`` values
    (weight of L_bal, Dirichlet chunks, epochs, D_int per class) in place of DART's own."""
    return settings.dart_config(alpha=settings.ablations.alpha, n_dir=settings.ablations.n_dir,
                       epochs=settings.ablations.epochs, per_class=settings.ablations.per_class or None)


def train_ablation_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """The training stage of :func:`prepare_ablation_context`: the source model and test sets
    (:func:`~dartlib.experiments.training_stage.train_source_inputs`) and every variant's g_phi,
    trained where absent with the same intermediate settings (variants that read the same
    intermediate batches train in one pass of the frozen classifier)."""
    source = train_source_inputs(settings=settings, device=device, progress=progress)
    load_or_train_refiners(source.checkpoint, source.model, source.train, ablation_configs(settings),
                           device=device, progress=progress)


def ablation_configs(settings: Settings) -> list:
    """Every variant's g_phi configuration (:data:`VARIANTS`), in that order."""
    base = ablation_base_config(settings)
    return [variant_config(name, base) for name in VARIANTS]


def prepare_ablation_context(
    *, settings: Settings, device: str | None = None, progress: bool = False,
) -> tuple[TestTimeContext, dict]:
    """The profile's context (:func:`dartlib.experiments.engine.prepare_context`, without NOTE's
    IABN model or notebook 04's refiner) with every variant's g_phi by name, loaded (made by
    :func:`train_ablation_inputs`); DART-split's applied with the profile's test-time temperature
    (Appendix B)."""
    context, meta = prepare_context(settings=settings, method_inputs=False, with_refiner=False, device=device,
                                    progress=progress)
    trained = load_refiners(settings.checkpoint(), ablation_configs(settings),
                            command=settings.training_command("ablations"))
    refiners = {name: refiner for name, (refiner, _) in zip(VARIANTS, trained)}
    refiners["dart-split"].temperature = settings.methods.split_temperature
    return context.variant(refiners=refiners), meta


def ablation_cells(settings: Settings) -> list[Cell]:
    """BNAdapt alone and with every variant of :data:`VARIANTS` on the CIFAR-10C-LT (``lt_rhos``)
    and CIFAR-10C-imb (``imb_irs``, subsets of ``imb_subset_size``) streams of every
    ``ablation_corruptions``, stream by stream."""
    common = dict(dataset=[settings.test.corrupted_dataset], severity=[settings.test.severity], method=["bnadapt"],
                  refiner=["none", *VARIANTS], seed=[settings.seed])
    cells = []
    for corruption in settings.ablations.corruptions:
        cells += grid(corruption=[corruption], shift=["lt"], shift_param=[float(r) for r in settings.test.lt_rhos],
                      **common)
        cells += grid(corruption=[corruption], shift=["online-imb"],
                      shift_param=[float(r) for r in settings.ablations.imb_irs],
                      params=[options_text(subset=settings.test.imb_subset_size)], **common)
    return cells


def stream_column(frame: pd.DataFrame) -> list[str]:
    """The table column of each row: "LT <rho>" or "imb <IR>"."""
    return [f"{'LT' if s == 'lt' else 'imb'} {p:g}" for s, p in zip(frame["shift"], frame.shift_param)]


def run_ablations(*, settings: Settings, context: TestTimeContext) -> pd.DataFrame:
    """Every cell of :func:`ablation_cells` (``results/<profile>/ablations.csv``, keyed and
    resumable), with each row's table ``column``."""
    results = run_cells(ablation_cells(settings), context, path=results_dir(settings.profile) / "ablations.csv",
                        experiment="ablations", progress=settings.profile != "smoke")
    return results.assign(column=stream_column(results))


@dataclass(frozen=True)
class AblationRows:
    """The ablation grid's rows (each with its table ``column``) and, where computed here, the source
    checkpoint's metadata and the number of variants trained."""

    results: pd.DataFrame
    meta: dict = field(default_factory=dict)
    variants: int = 0


def run(*, settings: Settings) -> AblationRows:
    """The ablations computed where their rows are missing or stale: the training stage
    (:func:`train_ablation_inputs`), the context (:func:`prepare_ablation_context`), then every cell of
    :func:`ablation_cells` (:func:`run_ablations`)."""
    train_ablation_inputs(settings=settings)
    context, meta = prepare_ablation_context(settings=settings)
    return AblationRows(results=run_ablations(settings=settings, context=context), meta=meta,
                        variants=len(context.refiners))


def stored(*, settings: Settings) -> AblationRows:
    """The ablation grid's rows as stored for ``settings`` (what :func:`run` wrote), computing nothing."""
    from dartlib.experiments.grid import stored_rows

    results = stored_rows(ablation_cells(settings), path=results_dir(settings.profile) / "ablations.csv")
    return AblationRows(results=results.assign(column=stream_column(results)))


@dataclass(frozen=True)
class AblationReport:
    """The ablations' tables and figure from one set of rows (:func:`report`)."""

    settings: Settings
    rows: AblationRows

    def mean_accuracy(self) -> pd.DataFrame:
        """:func:`mean_accuracy` of the rows."""
        return mean_accuracy(self.rows.results)

    def tables(self) -> dict[str, pd.DataFrame]:
        """:func:`ablation_tables` of the rows (printed and written to ``results/<profile>/tables/``)."""
        return ablation_tables(results=self.rows.results, settings=self.settings)

    def gains_beside_shortcut(self) -> pd.DataFrame | None:
        """:func:`gains_beside_shortcut` of the rows."""
        return gains_beside_shortcut(results=self.rows.results, settings=self.settings)

    def figure(self) -> plt.Figure:
        """:func:`plot_variant_gains` of the rows' means."""
        return plot_variant_gains(ours=self.mean_accuracy(), settings=self.settings)


def report(*, settings: Settings, rows: AblationRows) -> AblationReport:
    """The ablations' tables and figure from ``rows`` (:func:`run` or :func:`stored`), built by the
    functions of this module only, for notebook 07 and the results page."""
    return AblationReport(settings=settings, rows=rows)


def mean_accuracy(results: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per refiner (rows) and stream column, averaged over corruptions."""
    columns = list(dict.fromkeys(results.column))
    return results.pivot_table(index="refiner", columns="column", values="accuracy", aggfunc="mean")[columns]


# paper table -> (rows shown, shifts)
ABLATION_TABLES: dict[str, tuple[list[str], list[str]]] = {
    "table3_ablation_io": (["none", "dart-pbar-only", "dart-w-only", "dart-b-only", "dart"], ["lt"]),
    "table4_ablation_sampling": (["none", "dart-sampling-unif-lt", "dart"], ["lt", "online-imb"]),
    "table5_ablation_output": (["none", "dart-additive", "dart"], ["lt"]),
    "app_dart_split_cifar10c_lt": (["none", "dart-split", "dart"], ["lt"]),
}


def ablation_tables(*, results: pd.DataFrame, settings: Settings) -> dict[str, pd.DataFrame]:
    """Each table of :data:`ABLATION_TABLES`: our rows beside the paper's (paper values only on
    CIFAR-10-C profiles), printed and written to ``results/<profile>/tables/``."""
    s = settings
    rendered = {}
    for name, (rows, shifts) in ABLATION_TABLES.items():
        mine = results[results.refiner.isin(rows) & results["shift"].isin(shifts)]
        paper = None
        if s.test.corrupted_dataset == "cifar10c":
            paper = load_table(name)
            paper = paper.assign(column=stream_column(paper))
            paper = paper[paper.refiner.isin(rows) & paper["shift"].isin(shifts)]
        title = (f"{name} ({s.profile} profile: {s.source.arch}, {s.test.corrupted_dataset}, "
                 f"{len(s.ablations.corruptions)} corruption(s), {s.ablations.epochs} intermediate epoch(s), "
                 f"seed {s.seed}; paper: ResNet-26, CIFAR-10-C, 4 seeds)")
        rendered[name] = beside_paper(mine, paper, profile=s.profile, name=name, title=title, columns="column",
                                      paper_covers=CORRUPTIONS, row_order=[row_label("bnadapt", r) for r in rows])
        print(render(rendered[name], title=title))
    return rendered


def _paper_gains() -> dict[tuple[str, str], float]:
    """{(variant, column): the paper's accuracy of BNAdapt + variant minus BNAdapt's} over its tables."""
    gains = {}
    for name in ABLATION_TABLES:
        paper = load_table(name).assign(column=lambda t: stream_column(t))
        base = paper[paper.refiner == "none"].set_index("column").accuracy
        for row in paper[paper.refiner != "none"].itertuples():
            gains[(row.refiner, row.column)] = row.accuracy - base.get(row.column, np.nan)
    return gains


def gains_beside_shortcut(*, results: pd.DataFrame, settings: Settings) -> pd.DataFrame | None:
    """Each variant's gain over BNAdapt (mean over corruptions ± SE, paired image by image:
    :func:`dartlib.analysis.noise.difference`) at the profile's ablation refiners beside the same
    gain at the former shortcut (:data:`~dartlib.experiments.settings.ABLATION_SHORTCUT`, its rows
    kept in ``results/<profile>/shortcut/ablations.csv``), the change between them (paired: same
    streams, same BNAdapt) and the paper's gain; None where the profile keeps no such rows or runs
    the shortcut itself."""
    from dartlib.analysis.noise import difference
    from dartlib.experiments.grid import read_results
    from dartlib.experiments.outcomes import checked_outcomes
    from dartlib.experiments.settings import ABLATION_SHORTCUT

    former_path = results_dir(settings.profile) / "shortcut" / "ablations.csv"
    short = settings.replace(**ABLATION_SHORTCUT)
    if not former_path.is_file() or ablation_base_config(short) == ablation_base_config(settings):
        return None
    former = read_results(former_path)
    frames = {"former": former.assign(column=stream_column(former)), "own": results}
    outcomes = {**checked_outcomes(former, former_path),
                **checked_outcomes(results, results_dir(settings.profile) / "ablations.csv")}
    paper = _paper_gains()
    words = {c: f"{x.ablations.epochs} epochs, alpha {x.ablations.alpha:g}"
             for c, x in (("former", short), ("own", settings))}
    out = []
    for variant in VARIANTS:
        for column in dict.fromkeys(results.column):
            pick = {c: tuple(f[(f.column == column) & (f.refiner == r)] for r in (variant, "none"))
                    for c, f in frames.items()}
            gain = {c: difference(*pick[c], outcomes=outcomes) for c in pick}
            change = difference(pick["own"][0], pick["former"][0], outcomes=outcomes)
            out.append({"variant": variant, "stream": column, words["former"]: gain["former"].text(missing="not run"),
                        words["own"]: gain["own"].text(missing="not run"), "change": change.text(missing=""),
                        "paper": f"{paper[(variant, column)]:+.1f}" if (variant, column) in paper else ""})
    return pd.DataFrame(out)


def plot_variant_gains(*, ours: pd.DataFrame, settings: Settings) -> plt.Figure:
    """Bars of each variant's accuracy minus BNAdapt's (``ours``: refiner x column means), saved
    as ``figures/<profile>/ablations_gain``."""
    gain = ours.drop(index="none") - ours.loc["none"]
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4))
    gain.reindex(list(VARIANTS)).T.plot.bar(ax=ax, width=0.85)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylabel("gain over BNAdapt (points)")
    ax.set_xlabel("")
    ax.set_title(f"DART variants on {settings.test.corrupted_dataset} ({settings.profile} profile, "
                 f"{settings.ablations.epochs} epoch(s))")
    ax.legend(ncol=4)
    save_figure(fig, profile=settings.profile, name="ablations_gain")
    return fig
