"""The tables and figure of the diagnosis (notebook 15, :mod:`dartlib.studies.diagnosis`): the
failing quantities per variant (each a mean over the corruptions with its standard error,
:mod:`dartlib.analysis.noise`; the paper's from its appendix table of CIFAR-10C-imb,
:func:`paper_quantities`), the held-out streams, the batch shapes, and Table 1's BNAdapt rows over
seeds beside the paper's mean +- std (:func:`seed_table`)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dartlib.analysis.noise import Estimate, Outcomes, difference
from dartlib.experiments.settings import Settings
from dartlib.reporting.figures import WIDTH, save_figure
from dartlib.studies.diagnosis import (DIAGNOSIS_IRS, DIAGNOSIS_RHO, HELDOUT_STREAM_SEEDS, HELDOUT_STREAM_VARIANTS,
                                      SEED_GROUPS, VARIANTS, variant)
from dartlib.reporting.paper import load_table


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


@dataclass(frozen=True)
class DiagnosisReport:
    """Notebook 15's rows (``rows``, with the refiners' ``provenance`` and the variants' intermediate
    batch ``shapes`` where known) and their per-image ``outcomes``, for the studied profile's
    ``settings`` (which only the seed table reads); each table is built by one method here, for the
    notebook, the results page and the book."""

    rows: pd.DataFrame
    outcomes: Outcomes | None
    settings: Settings | None = None
    provenance: pd.DataFrame = field(default_factory=pd.DataFrame)
    shapes: pd.DataFrame = field(default_factory=pd.DataFrame)

    def seconds(self) -> dict[str, float]:
        """Each variant's refiner training time (s, rounded), from the provenance."""
        p = self.provenance
        return dict(zip(p["variant"], p["seconds_per_refiner"].round())) if len(p) else {}

    def variants_table(self, *, with_seconds: bool = True) -> pd.DataFrame:
        """:func:`diagnosis_table` of the rows (``with_seconds``: each refiner's training time too)."""
        return diagnosis_table(rows=self.rows, seconds=self.seconds() if with_seconds else None, outcomes=self.outcomes)

    def batch_shape_table(self) -> pd.DataFrame:
        """:func:`batch_shape_table` of the shapes and rows (empty where the shapes are not known)."""
        return batch_shape_table(shapes=self.shapes, rows=self.rows, outcomes=self.outcomes) if len(self.shapes) \
            else pd.DataFrame()

    def seed_table(self, group: str) -> pd.DataFrame:
        """:func:`seed_table` of ``group`` at the studied profile's rhos and IRs."""
        if self.settings is None:
            raise ValueError("the seed table reads the studied profile's rhos and IRs: make the report with its settings")
        return seed_table(rows=self.rows, lt_rhos=self.settings.test.lt_rhos, online_irs=self.settings.online.irs,
                          group=group)

    def heldout_stream_table(self) -> pd.DataFrame:
        """:func:`heldout_stream_table` of the rows."""
        return heldout_stream_table(rows=self.rows, outcomes=self.outcomes)

    def figure(self, *, profile: str):
        """:func:`diagnosis_figure` of the rows, saved under ``figures/<profile>/``."""
        return diagnosis_figure(rows=self.rows, profile=profile)


def report(*, profile: str, names: Sequence[str], compute: bool = False) -> DiagnosisReport:
    """Notebook 15's rows of ``profile`` for the variants ``names``
    (:func:`~dartlib.studies.diagnosis.diagnosis_results`; ``compute``: the missing refiners trained and
    the missing or stale cells computed first, hours on a CPU) and the variants' batch shapes
    (:func:`~dartlib.studies.diagnosis.batch_shape_results`), with their per-image outcomes."""
    from dartlib.experiments.grid import folder_outcomes
    from dartlib.paths import results_dir
    from dartlib.studies.diagnosis import batch_shape_results, diagnosis_results

    rows, provenance = diagnosis_results(profile=profile, compute=compute, names=list(names), progress=compute)
    shapes = batch_shape_results(profile=profile, compute=compute, names=list(names))
    return DiagnosisReport(settings=Settings.from_profile(profile), rows=rows, outcomes=folder_outcomes(results_dir(profile)),
                           provenance=provenance, shapes=shapes)
