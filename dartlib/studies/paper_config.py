"""Table 1 and CIFAR-10C-imb at the paper's g_phi (Appendix A: 50 intermediate epochs at alpha
0.1) on a profile whose own refiner (``dart_epochs``, ``dart_alpha``) is a shortcut: notebook 06's
section "At the paper's g_phi", beside the profile's rows (``table1.csv``) and the paper's.

The refiners are notebook 15's variants of the paper's configuration (:data:`PAPER_VARIANTS`: g_phi
seeds 0, 1 and 2), the cells are keyed by those names, and each seed's streams are drawn with its
seed, as Section 5.1's "mean and std over seeds" has them. The grid holds, in the order a grid
stopped part-way should have finished them:

1. BNAdapt without DART, with the seed-0 refiner and with the profile's own on CIFAR-10C-LT (every
   rho of ``lt_rhos``) and CIFAR-10C-imb (every IR of ``imb_table_irs``, NoAdapt beside), seed-0
   streams;
2. the same for seeds 1 and 2 on their own streams;
3. the other Table 1 methods without DART, with the seed-0 refiner and with the profile's own on
   CIFAR-10C-LT;
4. TENT the same way on CIFAR-10C-imb (the appendix's CIFAR-10C-imb table: NoAdapt, BNAdapt, TENT).

Rows of the same cells with the same input digests are borrowed from Table 1's, the diagnosis's,
the online-imbalance and the all-corruptions grids' files (:data:`SHARED_RESULTS`).

The blocks beside the profile's own refiner and the paper's numbers (:func:`bnadapt_block`,
:func:`accuracy_block`, :func:`every_method_block`, :func:`imb_block`): every number is a mean over the corruptions,
with its SE from :mod:`dartlib.analysis.noise` (clustered by test image, paired for a gain, the
seed spread added over g_phi seeds); a cell whose rows are not all there reads "not run (k of K)"."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dartlib.analysis.noise import Estimate, Outcomes, combination
from dartlib.experiments.cell_options import options_text
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings
from dartlib.reporting.paper import load_table
from dartlib.studies.diagnosis import SEED_GROUPS, variant_config
from dartlib.studies.table1 import TABLE1_METHODS
from dartlib.tta.note import PAPER_IABN_EPOCHS

PAPER_VARIANTS: tuple[str, ...] = SEED_GROUPS["paper"]
PAPER = PAPER_VARIANTS[0]  # the seed-0 refiner at the paper's configuration; its seeds are PAPER_VARIANTS
# NOTE with its IABN copy fine-tuned for the paper's 30 epochs (paper_note.csv), a method line of the blocks
PAPER_NOTE = f"note-iabn{PAPER_IABN_EPOCHS}"
BLOCK_METHODS: tuple[str, ...] = (*TABLE1_METHODS, PAPER_NOTE)
IMB_METHODS: tuple[str, ...] = ("noadapt", "bnadapt", "tent")  # the appendix's CIFAR-10C-imb table
# in this order: the files whose rows carry per-image outcomes first
SHARED_RESULTS = ("table1.csv", "online_imbalance.csv", "all_corruptions.csv", "diagnosis.csv", "more_settings.csv",
                  "paper_note.csv")


def _lt(settings: Settings, seed: int) -> dict:
    limit = settings.table1.stream_limit
    return dict(dataset=[settings.test.corrupted_dataset], shift=["lt"], shift_param=[float(r) for r in settings.test.lt_rhos],
                corruption=list(settings.table1.corruptions), severity=[settings.test.severity], seed=[seed],
                params=[options_text(limit=limit or None)])


def _imb(settings: Settings, seed: int) -> dict:
    return dict(dataset=[settings.test.corrupted_dataset], shift=["online-imb"],
                shift_param=[float(r) for r in settings.more_settings.imb_table_irs], corruption=list(settings.more_settings.imb_corruptions),
                severity=[settings.test.severity], seed=[seed], params=[options_text(subset=settings.test.imb_subset_size)])


def variant_seed(*, settings: Settings, name: str) -> int:
    """The seed of variant ``name``'s refiner, which is also its test streams' seed."""
    return variant_config(settings=settings, name=name).seed


def paper_config_cells(settings: Settings, *, names: list[str] | None = None) -> list[Cell]:
    """The grid of the module docstring for the paper variants ``names`` (default: every one with
    a trained refiner)."""
    names = trained_paper_variants(settings=settings) if names is None else names
    cells: list[Cell] = []
    for name in names:
        seed = variant_seed(settings=settings, name=name)
        # seed 0: the profile's own refiner ("dart") beside, on the same streams
        refiners = ["none", "dart", name] if name == PAPER_VARIANTS[0] else ["none", name]
        if name == PAPER_VARIANTS[0]:
            cells += grid(**_lt(settings, seed), method=["noadapt"], refiner=["none"])  # Table 1's, borrowed
        cells += grid(**_lt(settings, seed), method=["bnadapt"], refiner=refiners)
        cells += grid(**_imb(settings, seed), method=["noadapt"], refiner=["none"])
        cells += grid(**_imb(settings, seed), method=["bnadapt"], refiner=refiners)
    if PAPER_VARIANTS[0] in names:
        others = [m for m in (*TABLE1_METHODS, *settings.table1.extra_methods) if m not in ("noadapt", "bnadapt")]
        for method in others:  # method by method: a grid stopped part-way holds whole rows
            cells += grid(**_lt(settings, settings.seed), method=[method], refiner=["none", "dart", PAPER_VARIANTS[0]])
        imb_others = [m for m in IMB_METHODS if m not in ("noadapt", "bnadapt")]  # BNAdapt's and NoAdapt's above
        cells += grid(**_imb(settings, settings.seed), method=imb_others, refiner=["none", "dart", PAPER_VARIANTS[0]])
    return list(dict.fromkeys(cells))


def profile_cells(settings: Settings) -> list[Cell]:
    """:func:`paper_config_cells` of a profile's trained paper variants."""
    return paper_config_cells(settings)


def trained_paper_variants(*, settings: Settings) -> list[str]:
    """The paper variants whose refiner is saved beside the profile's source checkpoint."""
    from dartlib.dart.intermediate import refiner_path

    checkpoint = settings.checkpoint()
    return [n for n in PAPER_VARIANTS if refiner_path(checkpoint, variant_config(settings=settings, name=n)).is_file()]


def train_paper_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """The training stage of :func:`prepare_paper_context`: Table 1's inputs
    (:func:`~dartlib.experiments.training_stage.train_profile_inputs`, NOTE's IABN copy included). The
    paper variants' refiners are hours of a CPU core each, trained by name (``python -m dartlib
    train-refiners --profile P --variants NAME``); the grid runs the variants found."""
    from dartlib.experiments.training_stage import train_profile_inputs

    train_profile_inputs(settings=settings, device=device, progress=progress)


def prepare_paper_context(*, settings: Settings, device: str | None = None, progress: bool = False):
    """Table 1's context (NOTE's IABN model included) with every trained paper variant's refiner
    under its variant name, loaded. Returns (context, source metadata)."""
    from dartlib.dart.intermediate import load_refiners
    from dartlib.experiments.engine import prepare_context
    from dartlib.paths import cache_root

    context, meta = prepare_context(settings=settings, device=device, progress=progress)
    names = trained_paper_variants(settings=settings)
    refiners = load_refiners(settings.checkpoint(), [variant_config(settings=settings, name=n) for n in names])
    context.refiners.update({n: refiner for n, (refiner, _) in zip(names, refiners)})
    context.logits_store = cache_root()  # BNAdapt's logits, shared with the diagnosis's runs
    return context, meta


def paper_note_settings(settings: Settings) -> Settings:
    """``settings`` with NOTE's IABN copy fine-tuned for the paper's epochs (Appendix A:
    :data:`~dartlib.tta.note.PAPER_IABN_EPOCHS`) where the profile shortens it (``note_finetune_epochs``)."""
    return settings.replace(note_finetune_epochs=PAPER_IABN_EPOCHS)


def paper_note_cells(settings: Settings) -> list[Cell]:
    """NOTE on Table 1's CIFAR-10C-LT streams with its IABN copy at the paper's epochs
    (:func:`paper_note_settings`; ``results/<profile>/paper_note.csv``): without DART and with the
    seed-0 refiner at the paper's configuration first, then with the profile's own refiner."""
    lt = _lt(settings, settings.seed)
    return grid(**lt, method=["note"], refiner=["none", PAPER]) + grid(**lt, method=["note"], refiner=["dart"])


def train_paper_note_inputs(*, settings: Settings, device: str | None = None, progress: bool = False) -> None:
    """:func:`train_paper_inputs` of :func:`paper_note_settings`: fine-tunes the IABN copy where it is
    absent (hours of a CPU core; an interrupted fine-tuning resumes from its last epoch)."""
    train_paper_inputs(settings=paper_note_settings(settings), device=device, progress=progress)


def prepare_paper_note_context(*, settings: Settings, device: str | None = None, progress: bool = False):
    """:func:`prepare_paper_context` of :func:`paper_note_settings` (made by :func:`train_paper_note_inputs`)."""
    return prepare_paper_context(settings=paper_note_settings(settings), device=device, progress=progress)


def paper_config_results(*, profile: str, compute: bool, progress: bool = False):
    """The rows of the grid (``results/<profile>/paper_config.csv``) for every paper variant, in
    grid order, then NOTE's with its IABN at the paper's epochs (``paper_note.csv``) as method
    :data:`PAPER_NOTE`. ``compute``: first compute the missing or stale cells of the trained variants (hours
    on a CPU; ``python -m dartlib grid paper_config --profile P`` does the same outside a notebook),
    borrowing equal rows from :data:`SHARED_RESULTS`; otherwise read the stored rows as they are
    (``grid paper_config --status`` checks them where the test data are)."""
    from dartlib.experiments.engine import run_cells
    from dartlib.experiments.grid import stored_rows
    from dartlib.paths import results_dir

    settings = Settings.from_profile(profile)
    folder = results_dir(profile)
    path = folder / "paper_config.csv"
    if compute:
        train_paper_inputs(settings=settings, progress=progress)
        context, _ = prepare_paper_context(settings=settings, progress=progress)
        run_cells(profile_cells(settings), context, path=path, experiment="paper_config", progress=progress,
                  reuse=[folder / name for name in SHARED_RESULTS])
        context.save_shared_source()
    rows = stored_rows(paper_config_cells(settings, names=list(PAPER_VARIANTS)), path=path)
    note = stored_rows(paper_note_cells(settings), path=folder / "paper_note.csv").assign(method=PAPER_NOTE)
    return pd.concat([rows, note], ignore_index=True) if len(note) else rows


def paper_method(method: str) -> str:
    """The paper's name of a block's method (:data:`PAPER_NOTE` is NOTE)."""
    return "note" if method == PAPER_NOTE else method



def select_streams(rows: pd.DataFrame, *, shift: str, param: float | None, method: str, refiners: tuple[str, ...],
                   seeds: tuple[int, ...], corruptions: list[str], subset: str | None) -> pd.DataFrame:
    """The rows of one table cell: ``method`` with any of ``refiners`` on the streams of one shift
    parameter, ``seeds`` and ``corruptions`` (``subset``: the params they carry, None for any), all
    named by the first refiner (the seeds' refiners are one g_phi configuration)."""
    values = rows["shift_param"].astype(float)
    at = values.isna() if param is None else values == float(param)  # None: the streams without a shift
    sel = rows[(rows["shift"] == shift) & at
               & (rows["method"] == method) & rows["refiner"].isin(refiners) & rows["seed"].astype(int).isin(seeds)
               & rows["corruption"].isin(corruptions)]
    if subset is not None:
        sel = sel[sel["params"].fillna("").astype(str) == subset]
    return sel.assign(refiner=refiners[0])  # one cell per stream over the seeds' refiners


def estimate_or_count(terms, *, expected: int, outcomes) -> Estimate | str:
    """:func:`~dartlib.analysis.noise.combination` of ``terms`` (weight, rows), or "not run (k of
    K)" where a term has fewer than ``expected`` rows."""
    got = min(len(rows) for _, rows in terms)
    if got < expected:
        return f"not run ({got} of {expected})"
    return combination(terms=terms, outcomes=outcomes)


def estimate_text(value: Estimate | str) -> str:
    """An estimate as "value ± SE" (a count of cells not run as it is)."""
    if isinstance(value, str):
        return value
    return value.text(signed=False, missing=f"{value.value:.2f}")


def paper_row(table: str, *, shift: str, param: float | None, method: str, refiner: str,
              params: str | None = None) -> pd.Series | None:
    """The paper's CIFAR-10-C row (mean over corruptions) of ``table`` for one setting (``params``:
    the row's params, None for any), or None."""
    paper = load_table(table)
    at = paper.shift_param.isna() if param is None else paper.shift_param == float(param)
    sel = paper[(paper.dataset == "cifar10c") & (paper["shift"] == shift) & at
                & (paper.method == method) & (paper.refiner == refiner) & (paper.corruption == "mean")]
    if params is not None:
        sel = sel[sel.params.fillna("").astype(str) == params]
    return sel.iloc[0] if len(sel) else None


def paper_mean(table: str, *, shift: str, param: float, method: str, refiner: str) -> float:
    """The accuracy of :func:`paper_row`, nan where the paper has none."""
    row = paper_row(table, shift=shift, param=param, method=method, refiner=refiner)
    return float("nan") if row is None else float(row.accuracy)


def _lt_streams(settings: Settings) -> dict:
    """Table 1's CIFAR-10C-LT streams of a profile, as :func:`select_streams` takes them."""
    return dict(shift="lt", corruptions=list(settings.table1.corruptions),
                subset=options_text(limit=settings.table1.stream_limit or None))


def _imb_streams(settings: Settings) -> dict:
    """The CIFAR-10C-imb streams of a profile's table, as :func:`select_streams` takes them."""
    return dict(shift="online-imb", corruptions=list(settings.more_settings.imb_corruptions), subset=options_text(subset=settings.test.imb_subset_size))


# per benchmark of the blocks: its streams, its shift parameters (read from the settings), its name in a
# block's index and the paper's table of it
BENCHMARKS = {"lt": (_lt_streams, lambda s: s.test.lt_rhos, "rho", "table1_main"),
              "online-imb": (_imb_streams, lambda s: s.more_settings.imb_table_irs, "IR", "app_cifar10c_imb")}


def _benchmark(settings: Settings, shift: str) -> tuple[dict, list[float], str, str]:
    if shift not in BENCHMARKS:
        raise ValueError(f"no block for shift {shift!r}; valid: {', '.join(BENCHMARKS)}")
    streams, params, name, table = BENCHMARKS[shift]
    return streams(settings), [float(p) for p in params(settings)], name, table


def bnadapt_block(*, settings: Settings, rows: pd.DataFrame, outcomes) -> pd.DataFrame:
    """BNAdapt without DART, with the paper's g_phi (seed 0; seeds 0, 1, 2) and with the profile's,
    and DART's gain over BNAdapt for each, on CIFAR-10C-LT (every rho) and CIFAR-10C-imb (every IR
    of ``imb_table_irs``), the paper's beside; one column per stream kind and setting."""
    columns = []
    for shift in BENCHMARKS:
        kind, params, name, table = _benchmark(settings, shift)
        columns += [(f"{name}={value:g}", value, kind, table) for value in params]
    seeds3 = tuple(range(len(PAPER_VARIANTS)))
    own = f"{settings.profile} g_phi ({settings.dart.epochs} ep, alpha {settings.dart.alpha:g})"
    lines = {
        "NoAdapt": ("noadapt", ("none",), (0,)),
        "BNAdapt": ("bnadapt", ("none",), (0,)),
        "+DART, paper g_phi, seed 0": ("bnadapt", (PAPER,), (0,)),
        "+DART, paper g_phi, seeds 0-2": ("bnadapt", PAPER_VARIANTS, seeds3),
        f"+DART, {own}": ("bnadapt", ("dart",), (0,)),
    }
    table = {}
    for label, param, kind, paper_table in columns:
        col, k = {}, len(kind["corruptions"])
        pick = {name: select_streams(rows, param=param, method=m, refiners=r, seeds=s, **kind) for name, (m, r, s) in lines.items()}
        for name in lines:
            col[name] = estimate_text(estimate_or_count([(1.0, pick[name])], expected=k * len(lines[name][2]), outcomes=outcomes))
        base3 = select_streams(rows, param=param, method="bnadapt", refiners=("none",), seeds=seeds3, **kind)
        for name in list(lines)[2:]:
            base = base3 if "seeds 0-2" in name else pick["BNAdapt"]
            col[f"gain{name[5:]}"] = estimate_text(estimate_or_count([(1.0, pick[name]), (-1.0, base)],
                                                     expected=k * len(lines[name][2]), outcomes=outcomes))
        paper = {r: paper_mean(paper_table, shift=kind["shift"], param=param, method="bnadapt", refiner=r)
                 for r in ("none", "dart")}
        col["paper: BNAdapt"], col["paper: +DART"] = f"{paper['none']:.1f}", f"{paper['dart']:.1f}"
        col["paper: gain"] = f"{paper['dart'] - paper['none']:+.1f}"
        table[label] = col
    return pd.DataFrame(table)


def every_method_block(*, settings: Settings, rows: pd.DataFrame, outcomes, methods: list[str],
                       shift: str = "lt") -> pd.DataFrame:
    """Per method (after NoAdapt) and shift parameter: DART's gain with the paper's g_phi (seed 0),
    with the profile's, and the paper's, on CIFAR-10C-LT (``shift`` "lt", Table 1) or CIFAR-10C-imb
    ("online-imb", the appendix's table)."""
    kind, params, name, table = _benchmark(settings, shift)
    k, out = len(kind["corruptions"]), {}
    for method in methods:
        if method == "noadapt":
            continue
        for value in params:
            base = select_streams(rows, param=value, method=method, refiners=("none",), seeds=(0,), **kind)
            line = {}
            for label, refiner in (("paper g_phi", PAPER), (f"{settings.profile} g_phi", "dart")):
                dart = select_streams(rows, param=value, method=method, refiners=(refiner,), seeds=(0,), **kind)
                line[f"gain, {label}"] = estimate_text(estimate_or_count([(1.0, dart), (-1.0, base)], expected=k, outcomes=outcomes))
            paper = [paper_mean(table, shift=shift, param=value, method=paper_method(method), refiner=r) for r in ("none", "dart")]
            gain = paper[1] - paper[0]
            line["gain, paper"] = "" if gain != gain else f"{gain:+.1f}"  # nan: the paper has no such row
            out[(method, f"{name}={value:g}")] = line
    return pd.DataFrame(out).T


def gain_beside_paper_block(*, settings: Settings, rows: pd.DataFrame, outcomes, methods: list[str],
                             refiner: str = "dart") -> pd.DataFrame:
    """Per method (after NoAdapt) and rho, DART's gain with g_phi ``refiner`` (default: the
    profile's) on CIFAR-10C-LT, ours ± SE / the paper's ± the std over its 4 seeds of its +DART row
    (taken as its uncertainty), and whether they differ beyond 2 SE of the two combined
    (Section 5.2's Table 1, read with :mod:`dartlib.analysis.noise`)."""
    kind = _lt_streams(settings)
    k, out = len(kind["corruptions"]), {}
    for method in methods:
        if method == "noadapt":
            continue
        line = {}
        for rho in settings.test.lt_rhos:
            picked = [select_streams(rows, param=rho, method=method, refiners=(r,), seeds=(0,), **kind) for r in (refiner, "none")]
            ours = estimate_or_count([(1.0, picked[0]), (-1.0, picked[1])], expected=k, outcomes=outcomes)
            base, dart = (paper_row("table1_main", shift="lt", param=rho, method=paper_method(method), refiner=r)
                          for r in ("none", "dart"))
            gain, std = float(dart.accuracy - base.accuracy), float(dart["std"])
            if isinstance(ours, str):
                line[f"rho = {rho:g}"] = ours
                continue
            z = (ours.value - gain) / (ours.se ** 2 + std ** 2) ** 0.5
            verdict = "within noise" if abs(z) <= 2 else ("below" if z < 0 else "above")
            bound = "≤" if ours.kind == "bound" else ""
            line[f"rho = {rho:g}"] = (f"{ours.value:+.2f} ± {bound}{ours.se:.2f} / {gain:+.1f} ± {std:.1f}: "
                                      f"{verdict} ({z:+.1f} SE)")
        out[method] = line
    return pd.DataFrame(out).T


def accuracy_block(*, settings: Settings, rows: pd.DataFrame, outcomes, methods: list[str],
                   shift: str = "lt") -> pd.DataFrame:
    """Table 1's CIFAR-10C-LT block (``shift`` "lt") or the appendix's CIFAR-10C-imb table
    ("online-imb") at the paper's g_phi: per method and shift parameter, the accuracy without DART,
    with the paper's g_phi (seed 0) and with the profile's, each a mean over the corruptions ± its
    SE (clustered by test image), the paper's two beside."""
    kind, params, name, table = _benchmark(settings, shift)
    k, out = len(kind["corruptions"]), {}
    lines = (("without DART", "none"), ("+DART, paper g_phi", PAPER), (f"+DART, {settings.profile} g_phi", "dart"))
    for method in methods:
        refiners = lines[:1] if method == "noadapt" else lines
        for value in params:
            line = {label: estimate_text(estimate_or_count([(1.0, select_streams(rows, param=value, method=method, refiners=(refiner,),
                                                          seeds=(0,), **kind))], expected=k, outcomes=outcomes))
                    for label, refiner in refiners}
            for label, refiner in (("paper", "none"), ("paper +DART", "dart")):
                paper = paper_mean(table, shift=shift, param=value, method=paper_method(method), refiner=refiner)
                line[label] = "" if paper != paper else f"{paper:.1f}"
            out[(method, f"{name}={value:g}")] = line
    columns = [label for label, _ in lines] + ["paper", "paper +DART"]
    return pd.DataFrame(out).T.reindex(columns=columns).fillna("")


def imb_block(*, settings: Settings, rows: pd.DataFrame, outcomes: Outcomes | None) -> pd.DataFrame:
    """The appendix's CIFAR-10C-imb table (:data:`IMB_METHODS`) at the paper's g_phi and the
    profile's: :func:`accuracy_block`'s accuracies, then :func:`every_method_block`'s gains."""
    common = dict(settings=settings, rows=rows, outcomes=outcomes, methods=list(IMB_METHODS), shift="online-imb")
    return accuracy_block(**common).join(every_method_block(**common)).fillna("")


@dataclass(frozen=True)
class PaperConfigReport:
    """The rows of the paper-configuration grids (:func:`paper_config_results`) with their per-image
    outcomes, and the blocks built from them: what notebook 06 prints and the results page
    generates, each from the same rows by the same function."""

    settings: Settings
    rows: pd.DataFrame
    outcomes: Outcomes

    def _common(self) -> dict:
        return dict(settings=self.settings, rows=self.rows, outcomes=self.outcomes)

    def bnadapt_block(self) -> pd.DataFrame:
        """:func:`bnadapt_block` of the rows."""
        return bnadapt_block(**self._common())

    def accuracy_block(self) -> pd.DataFrame:
        """:func:`accuracy_block` of the rows, every method of :data:`BLOCK_METHODS`."""
        return accuracy_block(**self._common(), methods=list(BLOCK_METHODS))

    def every_method_block(self) -> pd.DataFrame:
        """:func:`every_method_block` of the rows, every method of :data:`BLOCK_METHODS`."""
        return every_method_block(**self._common(), methods=list(BLOCK_METHODS))

    def gain_beside_paper_block(self) -> pd.DataFrame:
        """:func:`gain_beside_paper_block` of the rows, every method of :data:`BLOCK_METHODS`."""
        return gain_beside_paper_block(**self._common(), methods=list(BLOCK_METHODS))

    def imb_block(self) -> pd.DataFrame:
        """:func:`imb_block` of the rows."""
        return imb_block(**self._common())


def report(*, profile: str, compute: bool = False, progress: bool = False) -> PaperConfigReport:
    """The paper configuration's rows of ``profile`` (:func:`paper_config_results`: computed first where
    ``compute``, else read) with their per-image outcomes, as a :class:`PaperConfigReport`."""
    from dartlib.experiments.grid import folder_outcomes
    from dartlib.paths import results_dir

    rows = paper_config_results(profile=profile, compute=compute, progress=progress)
    return PaperConfigReport(settings=Settings.from_profile(profile), rows=rows, outcomes=folder_outcomes(results_dir(profile)))
