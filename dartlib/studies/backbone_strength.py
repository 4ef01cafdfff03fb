"""The backbone-strength study: does DART's cost on i.i.d. streams shrink, and its gain under
label shift grow, as the BN-adapted source model gets more accurate?

The cpu profile's failed claims (DART costs 0.8 points at rho = 1 where the paper finds 0.0;
BNAdapt+DART below NoAdapt at IR 50 and 5000) are attributed to its narrow backbone. This study
tests that along two axes that need no new wide model (notebook 06, Section "backbone strength"):

- width: ResNet-26 of width 8 beside the committed width 16, same recipe (``cpu``) and the same
  alpha rule (:func:`dartlib.studies.alpha_choice.choose_alpha`), at severity 5;
- severity: the width-16 model on the 15 corruptions at severities 1 to 5 (a milder corruption
  is a stronger model for the same weights).

Each point (arch, severity) is BNAdapt with and without DART on the LT stream at rho = 1 (the
cost) and on CIFAR-10C-imb at IR 50 and 5000 (the gain), plus NoAdapt at rho = 1, over the 15
corruptions. The cells are ordinary grid cells (``arch=`` in their params names the backbone),
stored in ``results/<profile>/backbone_study.csv``; the gpu profile's width-64 points come from
its own Table 1 and CIFAR-10C-imb files.

:func:`study_results` computes or reads the rows; :func:`report` builds the points
(:func:`study_table`), their trend, the cross-device check and the figure (:func:`plot_study`) once,
for notebook 14 and the results page."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.experiments.engine import paired, run_cells
from dartlib.experiments.cell_options import cell_options, options_text
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import SHORTCUT, Settings
from dartlib.reporting.figures import ANNOTATION_SIZE, WIDTH, save_figure

EXPERIMENT = "backbone_study"
STUDY_ARCHS = ("resnet26-w8", "resnet26-w16")
STUDY_SEVERITIES = (1, 2, 3, 4, 5)
STUDY_IRS = (50.0, 5000.0)


def study_cells(*, arch: str, severity: int, corruptions, dataset: str = "cifar10c", irs=STUDY_IRS,
                subset: int = 1000, seed: int = 0) -> list[Cell]:
    """One point of the study: NoAdapt, BNAdapt and BNAdapt+DART at rho = 1 (LT), and BNAdapt with
    and without DART on CIFAR-10C-imb at each IR (subsets of ``subset`` images), per corruption."""
    base = dict(dataset=[dataset], corruption=list(corruptions), severity=[int(severity)], seed=[seed])
    lt = grid(**base, shift=["lt"], shift_param=[1.0], method=["noadapt", "bnadapt"], refiner=["none", "dart"],
              params=[options_text(arch=arch)])
    lt = paired(lt)
    imb = grid(**base, shift=["online-imb"], shift_param=[float(r) for r in irs], method=["bnadapt"],
               refiner=["none", "dart"], params=[options_text(arch=arch, subset=subset)])
    return lt + imb


def all_study_cells(*, corruptions, dataset: str = "cifar10c", subset: int = 1000, seed: int = 0,
                    archs=STUDY_ARCHS, severities=STUDY_SEVERITIES) -> list[Cell]:
    """Every point: each arch at severity 5 first (the width axis), then the committed width-16
    model at the other severities, mildest last, so a grid stopped part-way holds whole points."""
    main, milder = archs[-1], sorted((s for s in severities if s != 5), reverse=True)
    points = [(a, 5) for a in archs] + [(main, s) for s in milder]
    return [c for a, s in points for c in study_cells(arch=a, severity=s, corruptions=corruptions, dataset=dataset,
                                                       subset=subset, seed=seed)]


def cell_arch(cell_params: str) -> str:
    """The backbone named by ``arch=`` in a cell's params."""
    arch = cell_options(str(cell_params)).get("arch")
    if arch:
        return arch
    raise ValueError(f"no arch= in the cell params {cell_params!r} (a backbone-study cell names its backbone)")


def study_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Stored study rows -> one row per (arch, severity): mean accuracy over the corruptions of
    NoAdapt and BNAdapt at rho = 1, DART's cost there (BNAdapt minus BNAdapt+DART) and its gain at
    each IR (BNAdapt+DART minus BNAdapt). Points with a missing cell are left out."""
    frame = frame.assign(arch=[cell_arch(p) for p in frame["params"]])
    rows = []
    for (arch, severity), part in frame.groupby(["arch", "severity"], sort=False):
        def mean(shift: str, param: float, method: str, refiner: str) -> float:
            sel = part[(part["shift"] == shift) & (part["shift_param"] == param) & (part["method"] == method)
                       & (part["refiner"] == refiner)]
            return float(sel["accuracy"].mean()) if len(sel) else np.nan

        row = {"arch": arch, "severity": int(severity), "corruptions": part["corruption"].nunique(),
               "noadapt": mean("lt", 1.0, "noadapt", "none"), "bnadapt": mean("lt", 1.0, "bnadapt", "none"),
               "bnadapt+dart": mean("lt", 1.0, "bnadapt", "dart")}
        row["rho1_cost"] = row["bnadapt"] - row["bnadapt+dart"]
        for ir in sorted(set(part.loc[part["shift"] == "online-imb", "shift_param"])):
            row[f"ir{ir:g}_gain"] = mean("online-imb", ir, "bnadapt", "dart") - mean("online-imb", ir, "bnadapt", "none")
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.dropna().sort_values("bnadapt").reset_index(drop=True) if len(out) else out


def gpu_points(table1: pd.DataFrame, online: pd.DataFrame, *, arch: str = "resnet26") -> pd.DataFrame:
    """The gpu profile's width-64 point in :func:`study_points`' columns, from its Table 1 (rho = 1
    rows at the alpha its rule chose, the first DART alpha in the file) and CIFAR-10C-imb files."""
    dart = table1[table1["refiner"] == "dart"]
    alpha_params = dart["params"].iloc[0] if len(dart) else ""
    lt = table1[(table1["shift_param"] == 1.0) & ((table1["refiner"] == "none") | (table1["params"] == alpha_params))]
    imb = online[online["method"] == "bnadapt"]
    rows = pd.concat([lt, imb]).assign(params=lambda f: [options_text(arch=arch)] * len(f))
    rows = rows[rows["method"].isin(["noadapt", "bnadapt"]) & rows["refiner"].isin(["none", "dart"])]
    rows = rows[(rows["shift"] == "lt") | rows["shift_param"].isin(STUDY_IRS)]
    return study_points(rows)


def trend(points: pd.DataFrame) -> pd.DataFrame:
    """Spearman rank correlation of each effect with BNAdapt's accuracy over the points (the
    question: cost falls, i.e. negative; gains rise, i.e. positive)."""
    effects = [c for c in points.columns if c == "rho1_cost" or c.endswith("_gain")]
    ranks = points[["bnadapt", *effects]].rank()
    return pd.DataFrame({"effect": effects,
                         "spearman_vs_bnadapt": [float(ranks["bnadapt"].corr(ranks[e])) for e in effects],
                         "points": len(points)})


class StudyContext:
    """The per-backbone :class:`dartlib.experiments.engine.TestTimeContext` objects of the study behind one
    context's interface (``inputs``, ``adapter``, ``batch_size``, ``device``): each cell is run by
    the context of the backbone its ``arch=`` names."""

    def __init__(self, contexts: dict) -> None:
        self.contexts = dict(contexts)
        first = next(iter(self.contexts.values()))
        self.batch_size, self.device = first.batch_size, first.device

    def __call__(self, cell: Cell):
        """The context of ``cell``'s backbone: a StudyContext is what :func:`run_cells` takes as
        "a function giving each cell its own" context."""
        return self.of(cell)

    def of(self, cell: Cell):
        arch = cell_arch(cell.params)
        if arch not in self.contexts:
            raise ValueError(f"no backbone {arch!r} in this study; valid: {', '.join(self.contexts)}")
        return self.contexts[arch]

    def inputs(self, cell: Cell) -> str:
        return self.of(cell).inputs(cell)

    def adapter(self, cell: Cell):
        return self.of(cell).adapter(cell)

    def save_shared_source(self, *, every: float = 0.0) -> None:
        """Each backbone's context keeps its shared forwards
        (:meth:`dartlib.experiments.engine.TestTimeContext.save_shared_source`), as the grid command
        asks of every context when its cells are done."""
        for context in self.contexts.values():
            context.save_shared_source(every=every)


# The g_phi the study trained for every backbone: the cpu profile's former Table 1 shortcut (10 epochs
# at alpha 30; results/cpu/backbone_study.csv), pinned so that the study's refiners and rows stay
# what they are when a profile's own g_phi is the paper's (50 epochs per backbone would be hours each).
STUDIED_REFINER: dict[str, float] = {k: SHORTCUT[k] for k in ("dart_epochs", "dart_alpha")}


def studied_settings(settings: Settings, arch: str) -> Settings:
    """``settings`` for backbone ``arch`` with the study's pinned g_phi (:data:`STUDIED_REFINER`)."""
    return settings.replace(source_arch=arch, **STUDIED_REFINER)


def train_study_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """The training stage of :func:`prepare_study_context`: each backbone's source model, test sets and
    g_phi (:func:`~dartlib.experiments.training_stage.train_profile_inputs`), made where absent."""
    from dartlib.experiments.training_stage import train_profile_inputs

    for arch in settings.backbone_study.archs:
        train_profile_inputs(settings=studied_settings(settings, arch), method_inputs=False, device=device,
                             progress=progress)


def prepare_study_context(
    *, settings: Settings, device: str | None = None, progress: bool = False,
) -> tuple[StudyContext, dict]:
    """:func:`dartlib.experiments.engine.prepare_context` for each backbone of the study (same recipe, same
    g_phi settings, :data:`STUDIED_REFINER`, and alpha: the rule chose the profile's alpha for width 8 as well,
    ``results/cpu/backbone_study_run/alpha_validation_w8.csv``), loaded (made by :func:`train_study_inputs`);
    returns the study context and the metadata of the last (the profile's own) backbone."""
    from dartlib.experiments.engine import prepare_context

    contexts, meta = {}, {}
    for arch in settings.backbone_study.archs:
        contexts[arch], meta = prepare_context(settings=studied_settings(settings, arch), device=device,
                                               method_inputs=False, progress=progress)
    return StudyContext(contexts), meta


def profile_cells(settings: Settings) -> list[Cell]:
    """The study's cells for a profile's settings (``study_archs``, ``study_severities``)."""
    return all_study_cells(corruptions=settings.table1.corruptions, dataset=settings.test.corrupted_dataset,
                           subset=int(settings.test.imb_subset_size), seed=int(settings.seed),
                           archs=settings.backbone_study.archs, severities=settings.backbone_study.severities)


def study_table(*, study: pd.DataFrame, gpu_table1: pd.DataFrame | None = None,
                gpu_online: pd.DataFrame | None = None) -> pd.DataFrame:
    """The study's points (:func:`study_points`), with the gpu profile's width-64 point when its
    results are given, ordered by BNAdapt's accuracy; ``source`` says where each point was computed."""
    points = study_points(study).assign(source="cpu profile models (results/cpu/backbone_study.csv)")
    if gpu_table1 is not None and gpu_online is not None and len(gpu_table1) and len(gpu_online):
        wide = gpu_points(gpu_table1, gpu_online).assign(source="gpu profile (results/gpu/)")
        points = pd.concat([points, wide], ignore_index=True)
    return points.sort_values("bnadapt").reset_index(drop=True)


def cross_device(*, study: pd.DataFrame, table1: pd.DataFrame, online: pd.DataFrame, arch: str) -> pd.DataFrame:
    """The study's cells of the profile's own backbone at severity 5 against the same streams in
    the profile's Table 1 (rho = 1) and online-imbalance files, which may have been computed on
    another device: accuracy difference per (method, refiner, shift, shift_param), over the
    corruptions both hold."""
    ours = study[(study["severity"] == 5) & (study["params"].map(cell_arch) == arch)]
    keys = ["shift", "shift_param", "method", "refiner", "corruption"]
    other = pd.concat([table1[table1["shift"] == "lt"], online[online["shift"] == "online-imb"]])
    other = other[other["refiner"].isin(["none", "dart"])]
    merged = ours.merge(other[keys + ["accuracy"]], on=keys, suffixes=("", "_other"))
    merged["difference"] = merged["accuracy"] - merged["accuracy_other"]
    return (merged.groupby(["shift", "shift_param", "method", "refiner"])["difference"]
            .agg(cells="count", max_abs=lambda d: d.abs().max(), mean="mean").reset_index())


def study_results(*, profile: str, compute: bool, archs, severities, progress: bool = False) -> pd.DataFrame:
    """The study's rows of ``profile`` (``results/<profile>/backbone_study.csv``): computed first,
    resumably, when ``compute`` (missing or stale cells only; the width-8 inputs are committed in
    data/checkpoints), else read as committed."""
    from dartlib.experiments.grid import read_results
    from dartlib.paths import results_dir

    path = results_dir(profile) / f"{EXPERIMENT}.csv"
    settings = Settings.from_profile(profile, study_archs=list(archs), study_severities=list(severities))
    cells = profile_cells(settings)
    if not compute:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: absent; `python -m dartlib grid {EXPERIMENT} --profile {profile}` computes "
                                    "it (hours on a CPU), `git checkout -- results/cpu` restores the committed one")
        stored = read_results(path)
        return stored[stored["key"].astype(str).isin({c.key for c in cells})].reset_index(drop=True)
    train_study_inputs(settings=settings, progress=progress)
    context, _ = prepare_study_context(settings=settings, progress=progress)
    return run_cells(cells, context, path=path, experiment=EXPERIMENT, progress=progress, cell_progress=progress)


@dataclass(frozen=True)
class BackboneReport:
    """The study's points, trend, cross-device check and figure from one set of rows (:func:`report`)."""

    rows: pd.DataFrame

    def points(self) -> pd.DataFrame:
        """:func:`study_table` of the rows with the gpu profile's width-64 point (``results/gpu/``)."""
        from dartlib.experiments.grid import read_results
        from dartlib.paths import results_dir

        gpu = results_dir("gpu")
        return study_table(study=self.rows, gpu_table1=read_results(gpu / "table1.csv"),
                           gpu_online=read_results(gpu / "online_imbalance.csv"))

    def trend(self) -> pd.DataFrame:
        """:func:`trend` of :meth:`points`."""
        return trend(self.points())

    def cross_device(self, *, profile: str, arch: str) -> pd.DataFrame:
        """:func:`cross_device` against ``profile``'s Table 1 and online-imbalance rows with the study's
        g_phi, the former shortcut (kept in ``results/<profile>/shortcut/``)."""
        from dartlib.experiments.grid import read_results
        from dartlib.paths import results_dir

        folder = results_dir(profile) / "shortcut"
        return cross_device(study=self.rows, table1=read_results(folder / "table1.csv"),
                            online=read_results(folder / "online_imbalance.csv"), arch=arch)

    def figure(self, *, profile: str) -> plt.Figure:
        """:func:`plot_study` of :meth:`points`, saved under ``figures/<profile>/``."""
        return plot_study(self.points(), profile=profile)


def report(*, rows: pd.DataFrame) -> BackboneReport:
    """The study's tables and figure from ``rows`` (:func:`study_results`)."""
    return BackboneReport(rows=rows)


def plot_study(points: pd.DataFrame, *, profile: str):
    """Figure: DART's cost at rho = 1 and its gains at IR 50 / 5000 against BNAdapt's accuracy,
    one point per (backbone, severity), labelled."""
    gains = [c for c in points.columns if c.endswith("_gain")]
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.6))
    markers = {"resnet26-w8": "s", "resnet26-w16": "o", "resnet26": "D"}
    names = {"resnet26-w8": "width 8", "resnet26-w16": "width 16", "resnet26": "width 64 (gpu)"}
    panels = [(axes[0], "rho1_cost", "tab:green", "")] + [
        (axes[1], g, c, f"IR {g[2:-5]}, ") for g, c in zip(gains, ["tab:blue", "tab:purple"])]
    for ax, column, colour, prefix in panels:
        # two curves share the right panel: the lower one (IR 50) is labelled below its points, the
        # upper one (IR 5000) above, so that two labels of one backbone never sit on each other
        below = ax is axes[1] and column == gains[0] and len(gains) > 1
        for arch, part in points.sort_values("severity").groupby("arch", sort=False):
            ax.plot(part["bnadapt"], part[column], marker=markers.get(arch, "o"), color=colour,
                    ls="-" if len(part) > 1 else "none", label=f"{prefix}{names.get(arch, arch)}")
            for x, y, sev in zip(part["bnadapt"], part[column], part["severity"]):
                ax.annotate(f"s{sev}", (x, y), textcoords="offset points", xytext=(3, -5 if below else 4),
                            va="top" if below else "baseline", fontsize=ANNOTATION_SIZE)
        ax.set_xlabel("BNAdapt accuracy at rho = 1 (%)")
    axes[0].axhline(0.0, color="grey", lw=0.8)
    axes[0].set_ylabel("DART's cost at rho = 1 (points)")
    axes[1].set_ylabel("DART's gain over BNAdapt (points)")
    for ax in axes:
        ax.legend(loc="best", frameon=False)
    fig.suptitle("backbone strength: ResNet-26 width 8 and 64 at severity 5, width 16 at severities 1-5 (s1-s5)")
    save_figure(fig, profile=profile, name="backbone_study")
    return fig
