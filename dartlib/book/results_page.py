"""The tables of ``docs/results.md`` that are computed from committed rows: each sits between a
``<!-- generated: NAME -->`` line and an ``<!-- end: NAME -->`` line, and :func:`refresh_results_page`
rewrites it from the rows and their per-image outcomes (the noise model, :mod:`dartlib.analysis.noise`),
so that the page never shows a number the rows do not give. ``tests/test_results_page.py`` fails
when a generated table differs from what the committed rows give; the prose around the tables is
written by hand and says in words what they show.

Tables (``NAME``): the cpu profile's Table 1 CIFAR-10C-LT block beside the paper's (``table1``,
from :mod:`dartlib.studies.table1`), the same block at the paper's g_phi and at the
profile's (``paper_config_accuracy``), DART's gain per method at both (``paper_config_gains``) and
BNAdapt's block on three g_phi seeds (``paper_config_bnadapt``), the appendix's CIFAR-10C-imb table
at both (``paper_config_imb``), and the profile's DART gains beside
the paper's with whether they differ beyond noise (``table1_gain_vs_paper``), all from
:mod:`dartlib.studies.paper_config`; notebook 15's variants on the two failing quantities
(``diagnosis_variants``) and the shapes of their intermediate batches (``diagnosis_batch_shapes``),
from :mod:`dartlib.studies.diagnosis`; notebook 07's variants at both ablation configurations
(``ablation_gains``, :mod:`dartlib.studies.ablations`); notebook 09's TENT and MEMO cells and notebook 08's TENT and
test-batch cells over all 15 corruptions beside their three-corruption means (``all_corruptions``,
``sensitivity_all_corruptions``), from :mod:`dartlib.studies.all_corruptions`; the seed, gpu and backbone
blocks of :mod:`dartlib.book.results_sections`. Every measured number of the page's prose comes from a
block (the rule of :mod:`dartlib.book.prose_numbers`)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from dartlib.book.results_sections import (alpha_advice_block, benchmark_table_block, claims_tally, jpeg_block,
                                           markdown, section_blocks)
from dartlib.paths import REPO_ROOT
from dartlib.studies.paper_config import PAPER_NOTE

RESULTS_PAGE = REPO_ROOT / "docs" / "results.md"
PROFILES_PAGE = REPO_ROOT / "docs" / "profiles.md"  # its gpu tally is a generated block (:func:`other_pages`)
DEVIATIONS_PAGE = REPO_ROOT / "docs" / "deviations.md"  # its JPEG bound is one too
USING_PAGE = REPO_ROOT / "docs" / "using-dart.md"  # and its alpha advice, from benchmarks/results/
GPU_PAGE = REPO_ROOT / "docs" / "gpu.md"  # and its H200 rates, from results/paper-c10/rates.txt
README = REPO_ROOT / "README.md"  # its Figure 3 caption and claims tally are generated blocks too (:func:`readme_blocks`)
PROFILE = "cpu"
# Table 1's row names as the paper prints them (Appendix A runs NOTE, DELTA and ODS on top of TENT)
METHOD_LABELS = {"noadapt": "NoAdapt", "bnadapt": "BNAdapt", "tent": "TENT", "pl": "PL", "note": "TENT+NOTE",
                 "delta": "TENT+DELTA", "ods": "TENT+ODS", "lame": "LAME", "sar": "SAR",
                 PAPER_NOTE: "TENT+NOTE (IABN 30 epochs)"}
# the gain table names a method as Table 1's +DART row does (NOTE+DART, not TENT+NOTE+DART)
_GAIN_LABELS = {"note": "NOTE", "delta": "DELTA", "ods": "ODS", PAPER_NOTE: "NOTE (IABN 30 epochs)"}
_STREAM = {"rho": "LT rho", "IR": "imb IR"}
# the rows of the cpu Table 1 whose method is not the paper's as published (docs/deviations.md)
_TABLE1_LABELS = {
    "NOTE+DART": "NOTE+DART (DART for the memory only, the paper's reading)",
    "NOTE+DART (report)": "NOTE+DART, other reading (DART also refines what NOTE reports, `dart_use=report`; `note_report.csv`)",
    "ODS": "ODS (rebuilt: tracked label distribution, pre-trained unary term)",
    "SAR": "SAR (second pass over the first pass's kept samples)"}
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.S)


def _by_method(block: pd.DataFrame) -> pd.DataFrame:
    """A block indexed by (method, "rho=R" or "IR=R") with the rows named "TENT+NOTE, rho 1", "TENT, IR 5"."""
    names = [f"{METHOD_LABELS[m]}, {s.replace('=', ' ')}" for m, s in block.index]
    return block.set_axis(names, axis=0)


def _plus_dart(block: pd.DataFrame) -> pd.DataFrame:
    """A block indexed by method with the rows named as Table 1 names them: "BNAdapt+DART", "DELTA+DART"."""
    return block.set_axis([f"{_GAIN_LABELS.get(m, METHOD_LABELS[m])}+DART" for m in block.index], axis=0)


def _by_stream(block: pd.DataFrame) -> pd.DataFrame:
    """BNAdapt's block (columns "rho=1", "IR=5") turned to one row per stream ("LT rho 1")."""
    table = block.T
    names = [f"{_STREAM[s.split('=')[0]]} {s.split('=')[1]}" for s in table.index]
    return table.set_axis(names, axis=0)


def _by_line(block: pd.DataFrame) -> pd.DataFrame:
    """A block indexed by (line, "rho=R" / "IR=R" / "balanced") with the rows named "TENT+DART, imb IR 20"."""
    names = [label if stream == "balanced" else f"{label}, {_STREAM[stream.split('=')[0]]} {stream.split('=')[1]}"
             for label, stream in block.index]
    return block.set_axis(names, axis=0)


def _diagnosis(diagnosis) -> pd.DataFrame:
    """Notebook 15's variant table (of ``diagnosis``, a :class:`~dartlib.studies.diagnosis_report.DiagnosisReport`)
    as the page prints it: each quantity "value ± SE", with ``*`` where it moved beyond 2 SE from
    Table 1's refiner (the paired difference of the two refiners' rows)."""
    table = diagnosis.variants_table(with_seconds=False)
    quantities = {"cost": "cost at rho = 1", "IR 20": "IR 20", "IR 50": "IR 50", "IR 5000": "IR 5000",
                  "gain rho 10": "gain at rho = 10", "gain rho 100": "gain at rho = 100"}
    out = table[["factor", "setting"]].copy()
    for name, label in quantities.items():
        moved = table[f"{name} vs Table 1"].astype(str).str.endswith("*")
        out[label] = table[name] + moved.map({True: " *", False: ""})
    return out.set_index("factor")


def _batch_shapes(diagnosis) -> pd.DataFrame:
    """Notebook 15's batch-shape table (of ``diagnosis``): each variant that changes g_phi's
    intermediate batches, their shape, and what g_phi then does."""
    return diagnosis.batch_shape_table().set_index("variant")


def _table1(*, settings) -> pd.DataFrame:
    """The profile's Table 1 CIFAR-10C-LT block, ours / paper, from its current rows."""
    from dartlib.studies import table1

    if settings.test.corrupted_dataset != "cifar10c":
        raise ValueError(f"docs/results.md's Table 1 sets CIFAR-10-C rows beside the paper's; profile {settings.profile} "
                         f"runs {settings.test.corrupted_dataset}")
    block = table1.report(settings=settings, rows=table1.stored(settings=settings)).beside_paper_block()
    return block.rename(index=_TABLE1_LABELS)


def _ablation_gains(*, settings) -> pd.DataFrame:
    """Notebook 07's variants: each one's gain over BNAdapt at the profile's ablation refiners beside
    the former shortcut's and the paper's (:func:`dartlib.studies.ablations.gains_beside_shortcut`),
    from the committed rows."""
    from dartlib.studies import ablations

    table = ablations.report(settings=settings, rows=ablations.stored(settings=settings)).gains_beside_shortcut()
    return table.set_index([[f"{v}, {s}" for v, s in zip(table.variant, table.stream)]]).drop(columns=["variant", "stream"])


def generated_tables(*, profile: str = PROFILE) -> dict[str, str]:
    """Every generated table of the page, by name, as markdown from ``profile``'s committed rows."""
    from dartlib.experiments.settings import Settings
    from dartlib.studies import all_corruptions, memo_views, paper_config
    from dartlib.studies import diagnosis_report

    settings = Settings.from_profile(profile)
    paper = paper_config.report(profile=profile)
    outcomes = paper.outcomes
    diagnosis = diagnosis_report.report(profile=profile, names=settings.diagnosis.variants)  # read once, for both tables
    every = all_corruptions.report(profile=profile, outcomes=outcomes)
    return {
        "table1": markdown(_table1(settings=settings), first="method"),
        "paper_config_accuracy": markdown(_by_method(paper.accuracy_block()), first="method, stream"),
        "paper_config_gains": markdown(_by_method(paper.every_method_block()), first="method, stream"),
        "paper_config_bnadapt": markdown(_by_stream(paper.bnadapt_block()), first="stream"),
        "paper_config_imb": markdown(_by_method(paper.imb_block()), first="method, stream"),
        "table1_gain_vs_paper": markdown(_plus_dart(paper.gain_beside_paper_block()), first="method"),
        "all_corruptions": markdown(_by_line(every.block()), first="line, stream"),
        "sensitivity_all_corruptions": markdown(_by_line(every.sensitivity_block()), first="line, stream"),
        "memo_views": markdown(_by_line(memo_views.report(profile=profile, outcomes=outcomes).block()),
                               first="line, stream"),
        "ablation_gains": markdown(_ablation_gains(settings=settings), first="variant, stream"),
        "diagnosis_variants": markdown(_diagnosis(diagnosis), first="factor"),
        "diagnosis_batch_shapes": markdown(_batch_shapes(diagnosis), first="variant"),
        **section_blocks(profile=profile),
    }


def figure3_caption(*, profile: str = PROFILE) -> str:
    """The README's caption of ``figures/<profile>/fig3_accuracy_vs_rho.png``: the settings its rows
    were computed with (the keyed table ``accuracy_vs_rho.csv`` of notebook 05), BNAdapt's and
    BNAdapt+DART's accuracy at the first and last rho, and DART's gain over BNAdapt at each rho of
    ``lt_rhos`` over the paper's three g_phi seeds with its SE (:func:`dartlib.studies.paper_config.bnadapt_block`),
    beside the paper's."""
    from dartlib.experiments.settings import Settings, refiner_words
    from dartlib.paths import results_dir
    from dartlib.studies import paper_config

    settings = Settings.from_profile(profile)
    curve = pd.read_csv(results_dir(profile) / "accuracy_vs_rho.csv").pivot(index="method", columns="rho", values="accuracy")
    first, last = curve.columns.min(), curve.columns.max()
    block = paper_config.report(profile=profile).bnadapt_block()
    rhos = [f"rho={r:g}" for r in settings.test.lt_rhos]
    gains = [str(block.loc["gain, paper g_phi, seeds 0-2", r]) for r in rhos]
    ours = " / ".join(g if g.startswith("-") else f"+{g}" for g in gains)
    paper = " / ".join(str(block.loc["paper: gain", r]) for r in rhos)
    return (f"*Figure 3, {profile} profile, {refiner_words({'dart_epochs': settings.dart.epochs, 'dart_alpha': settings.dart.alpha})}, "
            f"seed {settings.seed} (the paper's configuration; ResNet-26 of width 16, generated CIFAR-10-C, mean over "
            f"{len(settings.deviation.fig3_corruptions)} corruptions): BNAdapt falls {curve.loc['bnadapt', first]:.1f} -> "
            f"{curve.loc['bnadapt', last]:.1f} from rho = {first:g} to {last:g}, BNAdapt+DART goes "
            f"{curve.loc['bnadapt+dart', first]:.1f} -> {curve.loc['bnadapt+dart', last]:.1f}. Over three g_phi seeds "
            f"DART's gain over BNAdapt is {ours} at rho {' / '.join(f'{r:g}' for r in settings.test.lt_rhos)} (the paper: "
            f"{paper}; [docs/results.md](docs/results.md)). The former shortcut's rows (10 epochs at alpha 30): "
            f"[results/cpu/shortcut/](results/cpu/shortcut/README.md).*\n")


def readme_blocks(*, profile: str = PROFILE) -> dict[str, str]:
    """The README's generated blocks, by name: its Figure 3 caption and its tally of the claims ledger."""
    return {"figure3_caption": figure3_caption(profile=profile), "claims_tally": claims_tally(profile=profile)}


def other_pages() -> dict[Path, dict[str, str]]:
    """The generated blocks of the other docs pages, by page: docs/profiles.md's gpu tally
    (:func:`~dartlib.book.results_sections.claims_tally`), docs/deviations.md's JPEG bound (:func:`~dartlib.book.results_sections.jpeg_block`)
    and docs/using-dart.md's alpha advice (:func:`~dartlib.book.results_sections.alpha_advice_block`), docs/gpu.md's
    H200 rates (:func:`~dartlib.book.results_sections.benchmark_table_block`)."""
    from dartlib.paths import results_dir

    return {PROFILES_PAGE: {"gpu_claims_tally": "Its ledger ([claims.md](claims.md)): " + claims_tally(profile="gpu")},
            DEVIATIONS_PAGE: {"jpeg_bound": jpeg_block(profile=PROFILE)},
            USING_PAGE: {"alpha_advice": alpha_advice_block()},
            GPU_PAGE: {"paper_c10_rates": benchmark_table_block(path=results_dir("paper-c10") / "rates.txt")}}


def refreshed_page(text: str, tables: dict[str, str], *, page: str = RESULTS_PAGE.name) -> str:
    """``text`` with each generated block's body replaced by its table; a block whose name has no
    table, or a table without its block, raises ``ValueError`` naming it."""
    found = {m.group("name") for m in _BLOCK.finditer(text)}
    unknown, absent = sorted(found - set(tables)), sorted(set(tables) - found)
    if unknown or absent:
        raise ValueError(f"{page}: generated blocks without a table: {unknown or 'none'}; tables without "
                         f"a block (add '<!-- generated: NAME -->' and '<!-- end: NAME -->' lines): {absent or 'none'}")
    return _BLOCK.sub(lambda m: m.group(1) + tables[m.group("name")] + m.group(4), text)


def refresh_results_page(*, path: Path = RESULTS_PAGE, profile: str = PROFILE) -> list[str]:
    """Rewrite the generated tables of ``path`` from the committed rows; returns the names of the
    tables that changed."""
    text = path.read_text()
    tables = generated_tables(profile=profile)
    new = refreshed_page(text, tables)
    old = {m.group("name"): m.group("body") for m in _BLOCK.finditer(text)}
    if new != text:
        path.write_text(new)
    return [name for name, body in tables.items() if old.get(name) != body]


def refresh_readme(*, path: Path = README, profile: str = PROFILE) -> bool:
    """Rewrite the README's generated blocks (:func:`readme_blocks`) from the committed rows; True
    where the file changed."""
    text = path.read_text()
    new = refreshed_page(text, readme_blocks(profile=profile), page=path.name)
    if new != text:
        path.write_text(new)
    return new != text


def refresh_other_pages() -> list[str]:
    """Rewrite the generated blocks of :func:`other_pages`; returns the names of the pages that changed."""
    changed = []
    for path, blocks in other_pages().items():
        text = path.read_text()
        new = refreshed_page(text, blocks, page=path.name)
        if new != text:
            path.write_text(new)
            changed.append(path.name)
    return changed


if __name__ == "__main__":
    print(f"other pages changed: {', '.join(refresh_other_pages()) or 'none'}")
    changed = refresh_results_page()
    print(f"{RESULTS_PAGE}: {', '.join(changed) if changed else 'no table'} changed; "
          f"{README}: {'changed' if refresh_readme() else 'unchanged'}")
