"""The results book: a static HTML site per profile, built by Sphinx with myst-nb from the
profile's executed notebooks, plus five generated pages: an overview that opens with the answer
(which of the paper's claims hold, fail or were not run, with the numbers behind them:
:mod:`dartlib.book.answer`), the claims page (each claim headed by its plain sentence, then the
paper's, its verdict and every check with its margin in standard errors), a gallery (every figure,
captioned with the paper figure it reproduces), the deviations from the paper's settings, and the
rendered tables (Table 1 with its per-corruption tables (Appendix, Tables 19 to 21), the cost table
(Appendix, "additional cost"), every other table). The claims ledger is evaluated once per set of
inputs (:func:`dartlib.book.ledger_cache.ledger_table`) and both pages read that one evaluation.

Nothing is executed: the book shows what the notebooks showed when they ran
(``results/<profile>/notebooks/``, committed; on the smoke profile the committed notebooks, each
replaced by the copy ``make reproduce`` executed into ``runs/smoke/`` where there is one). The
smoke profile's results and figures are not committed: before ``make reproduce`` its book says so
at the top and names the command. ``python -m dartlib book --profile cpu`` (``make book
PROFILE=cpu``) writes ``build/book/<profile>/html/index.html``, printing each stage and progress
bars over the pages Sphinx reads and writes.

Every screen: the book's stylesheet (``dartlib/book/assets/dart-book.css``) wraps code spans and headings and keeps wide
tables in their own scroll box, so that no page scrolls sideways at a phone's width (390 px);
tables say what their columns are (rho, IR) and are titled by their content
(:data:`RENDERED_TABLES`); gallery figures link to their full-size image; search excerpts are
taken from the page's article (``dartlib/book/assets/dart-book.js``). ``tests/test_browser.py`` checks all of it at
1280 and 390 px.
"""

from __future__ import annotations

import html
import math
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import jupyter_server_mathjax
import pandas as pd

from dartlib.analysis.noise import SE_SENTENCE
from dartlib.book import answer, claims as claims_ledger, claims_page
from dartlib.book.build_lock import _build_lock, remove_abandoned_builds
from dartlib.book.gallery import gallery_page
from dartlib.book.ledger_cache import ledger_table
from dartlib.book.sources import (BOOK_DIR, BookSources, book_sources, executed_notebooks, has_results,
                                  missing_results_note)
from dartlib.experiments.grid import folder_outcomes, read_results, stored_rows
from dartlib.experiments.keyed_tables import sealed_table
from dartlib.paths import NOTEBOOKS_DIR, PROFILES_DIR, REPO_ROOT
from dartlib.experiments.settings import Settings
from dartlib.reporting.paper import TABLES as PAPER_TABLES, load_table
from dartlib.reporting.tables import with_row_labels
from dartlib.studies.costs import cost_rows
from dartlib.studies.diagnosis_report import DiagnosisReport
from dartlib.studies.table1 import TABLE1_METHODS, per_corruption_table, rendered_table, row_order
from dartlib.studies.table1 import profile_cells as table1_cells

DOCS_DIR = REPO_ROOT / "docs"
ASSETS = Path(__file__).parent / "assets"  # the stylesheet, script, Sphinx configuration and icon every book copies


def profile_description(*, profile: str) -> str:
    """The comment block heading ``notebooks/profiles/<profile>.yaml``: what the profile is."""
    lines = []
    for line in (PROFILES_DIR / f"{profile}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").rstrip())
    return " ".join(lines)


def markdown_table(frame: pd.DataFrame, *, digits: int = 1) -> str:
    """A pipe table of ``frame`` (index included), numbers rounded, NaN as a dash."""
    def cell(value: object) -> str:
        if isinstance(value, float):
            return "–" if math.isnan(value) else f"{value:.{digits}f}"
        return str(value)

    index = frame.index.names if any(frame.index.names) else [""]
    header = [" / ".join(str(n) for n in index if n)] + [str(c) for c in frame.columns]
    rows = [" | ".join(header), " | ".join("---" for _ in header)]
    for key, values in zip(frame.index, frame.itertuples(index=False)):
        keys = key if isinstance(key, tuple) else (key,)
        rows.append(" | ".join([" / ".join(cell(k) for k in keys)] + [cell(v) for v in values]))
    return "\n".join(f"| {row} |" for row in rows) + "\n"


def overview_page(*, sources: BookSources, settings: Settings, notebooks: list[str] | tuple[str, ...] = (),
                  table: pd.DataFrame | None = None) -> str:
    """The front page: first the answer (which of the paper's claims hold, fail or were not run,
    with the numbers behind them: :mod:`dartlib.book.answer`), then every claim under its verdict,
    the profile, the noise model, the seed replicas and the diagnosis, and the book's navigation.
    ``table``: the ledger's evaluation (:func:`ledger_table`), computed here when not given."""
    profile = sources.profile
    if table is None:
        table = ledger_table(sources=sources, settings=settings)
    answers = answer.claim_answers(table=table, claims=claims_ledger.load_claims())
    return "\n".join([
        f"# DART: what reproduces ({profile} profile)", "",
        *([f"```{{warning}}\n{missing_results_note(profile)}\n```", ""] if not has_results(sources) else []),
        *answer.answer_section(answers=answers, profile=profile, setting=profile_setting(settings)),
        "## Every claim", "", *answer.claim_lists(answers=answers),
        "## The profile", "",
        "Results of the reproducibility suite for *Label Distribution Shift-Aware Prediction Refinement for "
        "Test-Time Adaptation* (DART), as the notebooks computed them. Every number here belongs to this profile:", "",
        f"> **{profile}**: {profile_description(profile=profile)}", "",
        "**Noise.** Each number of ours beside the paper's carries its noise: its SE, or mean ± std over seeds "
        f"where seeds were run; the paper's values are its mean ± std over seeds. {SE_SENTENCE}. A check whose "
        "effect is smaller than 2 SE reads WITHIN NOISE, never HOLDS or FAILS; every FAILS above is beyond 2 SE. "
        f"Over the {len(table)} checks: {claims_page.count_line(table=table)}.", "",
        *_seed_section(sources=sources, settings=settings),
        *_diagnosis_section(sources=sources),
        "## Pages", "",
        "```{toctree}", ":caption: Results", ":maxdepth: 1", "", "claims", "gallery", "tables", "deviations", "```", "",
        "```{toctree}", ":caption: Notebooks", ":maxdepth: 1", "", "notebooks", *[f"notebooks/{n}" for n in notebooks],
        "```", "",
        SEARCH_NOTE, "",
    ])


def profile_setting(settings: Settings) -> str:
    """The profile's model in a few words: "ResNet-26 w16" for ``resnet26-w16``."""
    arch = str(settings.source.arch)
    return re.sub(r"^resnet(\d+)-?", r"ResNet-\1 ", arch).strip()


def _seed_section(*, sources: BookSources, settings: Settings) -> list[str]:
    """Table 1's BNAdapt rows and CIFAR-10C-imb over seeds (notebook 15's seed replicas), mean ± std
    beside the paper's, where at least two seeds were run; nothing otherwise."""
    path = sources.results / "diagnosis.csv"
    if not path.is_file():
        return []  # no replicas
    from dartlib.dart.refiner import PAPER_CIFAR10 as paper  # a profile whose own g_phi it is reads its replicas

    own_is_paper = (settings.dart.epochs, settings.dart.alpha) == (paper.epochs, paper.alpha)
    table = DiagnosisReport(settings=settings, rows=read_results(path), outcomes=None).seed_table(
        "paper" if own_is_paper else "table1")
    if not len(table) or table["seeds"].max() < 2:
        return []
    return [f"**Over seeds.** Table 1's BNAdapt rows and CIFAR-10C-imb (g_phi {settings.dart.epochs} epochs at "
            f"alpha {settings.dart.alpha:g}), each seed drawing g_phi's initialisation, "
            "its intermediate batches and the test streams (notebook 15; mean ± std over seeds of the mean over "
            "corruptions; `seeds` says how many covered every corruption), beside the paper's mean ± std over its "
            "4 seeds; DART's effect is taken seed by seed:", "",
            markdown_table(table.set_index(["benchmark", "setting", "method"])), ""]


def _diagnosis_section(*, sources: BookSources) -> list[str]:
    """Notebook 15's diagnosis table of the two failing claims (DART's cost at rho = 1, BNAdapt+DART
    against NoAdapt on CIFAR-10C-imb), where the profile has its rows; its conclusion is notebook 15's."""
    path = sources.results / "diagnosis.csv"
    if not path.is_file():
        return []
    table = DiagnosisReport(rows=read_results(path), outcomes=folder_outcomes(sources.results)).variants_table(
        with_seconds=False)
    # the variant's internal name stays in notebook 15; factor and setting say what it is
    table = table.drop(columns=["variant"]).set_index(["factor", "setting"])
    return ["**Why DART's cost at ρ = 1 and its margin over NoAdapt on CIFAR-10C-imb fail.** Table 1's refiner "
            "varied one factor at a time (notebook 15, whose conclusion says which factor moves which claim; seed-0 "
            "streams, mean over the corruptions ± SE; `*`: moved beyond 2 SE from Table 1's refiner):", "",
            html_table(table), ""]


def html_table(frame: pd.DataFrame, *, digits: int = 1) -> str:
    """``frame`` (index included) as an HTML table in its own scroll box, its cells wrapping: a
    wide table scrolls inside the page at any width instead of being cut at its edge."""
    def cell(value: object) -> str:
        if isinstance(value, float):
            return "–" if math.isnan(value) else f"{value:.{digits}f}"
        return html.escape(str(value))

    names = [n for n in frame.index.names if n]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [*names, *frame.columns])
    rows = []
    for key, values in zip(frame.index, frame.itertuples(index=False)):
        keys = key if isinstance(key, tuple) else (key,)
        rows.append("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in [*keys, *values]) + "</tr>")
    return ('<div class="scroll-box">\n<table class="wide">\n<tr>' + head + "</tr>\n" + "\n".join(rows)
            + "\n</table>\n</div>\n")


_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _unlinked(markdown: str) -> str:
    """Relative links of a repository page as code spans: the book holds none of their targets."""
    def replace(match: re.Match) -> str:
        bang, text, target = match.groups()
        if target.startswith(("http://", "https://", "mailto:", "#")):
            return match.group(0)
        return f"{text} (`{target.lstrip('./')}`)" if text.strip("`") != target else f"`{target}`"
    return _LINK.sub(replace, markdown)


def deviations_page(*, sources: BookSources) -> str:
    """The baselines against the paper and their reference code (docs/deviations.md), then where
    the profile's settings depart from the paper's (docs/profiles.md)."""
    baselines = (DOCS_DIR / "deviations.md").read_text()
    profiles = (DOCS_DIR / "profiles.md").read_text()
    section = re.search(r"^## Where the reduced profiles depart from the paper\n(.*?)(?=^## |\Z)", profiles, re.S | re.M)
    body = [f"# Deviations from the paper ({sources.profile} profile)", "",
            "## The profile's settings", "", f"> **{sources.profile}**: {profile_description(profile=sources.profile)}", ""]
    if section:
        body += [section.group(1).strip(), ""]
    body += [re.sub(r"^# ", "## ", baselines, count=1, flags=re.M)]
    return _unlinked("\n".join(body))


def _table1_rows(results: Path, settings: Settings) -> pd.DataFrame:
    """The rows of the profile's Table 1 cells in ``results/table1.csv`` (:func:`dartlib.studies.table1.profile_cells`,
    read through the checked reader): rows of another configuration the file may hold (the gpu
    profile's former refiner) are not the profile's."""
    return stored_rows(table1_cells(settings), path=results / "table1.csv")


def _per_corruption_tables(results: Path, settings: Settings) -> list[str]:
    frame = _table1_rows(results, settings)
    if frame.empty:
        return []
    frame = with_row_labels(frame)
    methods = [m for m in TABLE1_METHODS if m in set(frame.method)]
    full = per_corruption_table(frame, row_order(methods))
    out = []
    for rho in full.index.get_level_values("rho").unique():
        block = full.xs(rho, level="rho").dropna(how="all")
        block.columns = [c.replace("_", " ") for c in block.columns]
        out += [f"### rho = {rho:g}", "", markdown_table(block), ""]
        paper = load_table(f"full_cifar10c_lt_rho{rho:g}") if rho in (1, 10, 100) else None
        if paper is not None and set(frame.dataset) == {"cifar10c"}:
            paper = per_corruption_table(with_row_labels(paper), row_order(methods)).xs(rho, level="rho").dropna(how="all")
            paper.columns = [c.replace("_", " ") for c in paper.columns]
            out += [f"The paper's (ResNet-26, CIFAR-10-C, mean of 4 seeds), rho = {rho:g}:", "", markdown_table(paper), ""]
    return out


def _cost_table(results: Path, profile: str) -> list[str]:
    ours = sealed_table(results / "costs.csv", remedy=f"python -m dartlib run --profile {profile} 10 measures it again")
    if ours is None:
        return []
    side = cost_rows(ours).set_index("row")
    side.index.name = "method"
    keep = ["params_m", "trainable_params_m", "gmac_forward_per_image", "wall_clock_s", "wall_clock_vs_bnadapt",
            "params_m_paper", "flops_g", "wall_clock_s_paper"]
    device = ", ".join(sorted(set(ours["machine" if "machine" in ours else "device"].astype(str))))
    return [f"Ours on {device}, {int(ours.images.iloc[0])} images; the paper's (`_paper`, `flops_g`) on its GPU, "
            "ResNet-26, CIFAR-10-C.", "", markdown_table(side[[k for k in keep if k in side]], digits=3), ""]


def _table1(results: Path, settings: Settings) -> str:
    """Table 1 rendered from the profile's rows of ``table1.csv`` (:func:`_table1_rows`), so the book never
    shows an older rendering."""
    frame = _table1_rows(results, settings)
    if frame.empty:
        return (f"Table 1 has not been computed on this profile (notebook 06): run `make reproduce"
                f"{'' if settings.profile == 'smoke' else ' PROFILE=' + str(settings.profile)}`.")
    methods = [m for m in TABLE1_METHODS if m in set(frame.method)]
    dataset = settings.test.corrupted_dataset
    title = (f"Table 1, {dataset}-LT ({settings.profile} profile: {settings.source.arch}, "
             f"{frame.corruption.nunique()} corruption(s), seed(s) {', '.join(map(str, sorted(set(frame.seed))))}; "
             "paper: ResNet-26, official CIFAR-10-C, 4 seeds)")
    return rendered_table(frame, order=row_order(methods), title=title, corrupted_dataset=dataset,
                          outcomes=folder_outcomes(results))


# The book's title of each rendered table (results/<profile>/tables/<stem>.md: the notebooks write
# them under the paper's table names) and what its bare number columns are: rho (CIFAR-10C-LT's
# imbalance ratio), IR (online imbalance) or the test batch size. Columns named "LT 10" and
# "imb 20" are read as rho and IR whatever the table.
RENDERED_TABLES = {
    "table1": ("Table 1", "rho"),
    "online_imbalance": ("Online imbalance on CIFAR-10C-imb (Table 2's protocol)", "IR"),
    "table3_ablation_io": ("Table 3: ablation of g_phi's inputs and outputs", "rho"),
    "table4_ablation_sampling": ("Table 4: ablation of the intermediate batch sampling", "rho"),
    "table5_ablation_output": ("Table 5: affine refinement against an additive output", "rho"),
    "app_alpha": ("Appendix: sensitivity to alpha", "rho"),
    "app_batch_size": ("Appendix: the test batch size on balanced streams", "batch size"),
    "app_cifar10c_imb": ("Appendix: CIFAR-10C-imb, BNAdapt and TENT with and without DART", "IR"),
    "app_condensed": ("Appendix: g_phi trained on condensed data", "rho"),
    "app_dart_split_cifar10c_lt": ("Appendix: DART against DART-split on CIFAR-10C-LT", "rho"),
    "app_epochs": ("Appendix: intermediate training epochs", "rho"),
    "app_hyperparameters": ("Appendix: intermediate batch size x hidden width", "rho"),
    "app_memo": ("Appendix: MEMO with and without DART", "rho"),
    "app_mixed": ("Appendix: mixed domains", "rho"),
}
_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_NUMBER = r"\d+(?:\.\d+)?"


def column_heading(column: str, *, kind: str) -> str:
    """What a rendered table's column is: "1" -> "rho = 1" (or "IR 1", "batch size 1" by ``kind``),
    "LT 10" -> "LT, rho = 10", "imb 20" -> "imb, IR 20"; any other heading as it is."""
    text = column.strip()
    if re.fullmatch(_NUMBER, text):
        return f"rho = {text}" if kind == "rho" else f"{kind} {text}"
    if match := re.fullmatch(rf"LT ({_NUMBER})", text):
        return f"LT, rho = {match[1]}"
    if match := re.fullmatch(rf"imb ({_NUMBER})", text):
        return f"imb, IR {match[1]}"
    return text


def headed_columns(markdown: str, *, kind: str) -> str:
    """``markdown`` with each pipe table's header row saying what its columns are
    (:func:`column_heading`); the first column (the rows' names) and the cells unchanged."""
    lines = markdown.split("\n")
    for i in range(1, len(lines)):
        if _RULE.match(lines[i]) and lines[i - 1].startswith("|"):
            cells = lines[i - 1].strip().strip("|").split("|")
            cells = [cells[0].strip()] + [column_heading(c, kind=kind) for c in cells[1:]]
            lines[i - 1] = "| " + " | ".join(cells) + " |"
    return "\n".join(lines)


def table_title(stem: str) -> tuple[str, str]:
    """(title, column kind) of the rendered table ``stem``; a table the book does not know is
    titled by the paper's caption of that name, else by its name in words."""
    if stem in RENDERED_TABLES:
        return RENDERED_TABLES[stem]
    caption = PAPER_TABLES.get(stem, {}).get("caption") or stem.replace("_", " ").capitalize()
    return caption, "rho"


def tables_page(*, sources: BookSources, settings: Settings) -> str:
    """Table 1 with its per-corruption tables, the cost table, then every rendered table of
    ``results/<profile>/tables/``."""
    folder = sources.results / "tables"
    order = {stem: i for i, stem in enumerate(RENDERED_TABLES)}  # the paper's tables, then its appendix's
    files = sorted(folder.glob("*.md"), key=lambda p: (order.get(p.stem, len(order)), p.stem)) if folder.is_dir() else []
    rendered = {p.stem: p.read_text() for p in files}
    rendered.pop("table1", None)
    lines = [f"# Tables ({sources.profile} profile)", "",
             "Ours beside the paper's where the paper has the cell: `ours (paper; ours - paper)`. Profile: "
             f"{sources.profile}. Columns: rho, the imbalance ratio of the long-tailed (LT) streams; IR, that of the "
             "online-imbalance (imb) streams.", "",
             "## Table 1", "", headed_columns(_table1(sources.results, settings), kind="rho"), ""]
    per_corruption = _per_corruption_tables(sources.results, settings)
    if per_corruption:
        lines += ["## Table 1 per corruption (Appendix, Tables 19 to 21)", "", *per_corruption]
    cost = _cost_table(sources.results, sources.profile)
    if cost:
        lines += ["## Cost (Appendix, additional cost)", "", *cost]
    for name, text in rendered.items():
        title, kind = table_title(name)
        lines += [f"## {title}", "", headed_columns(text, kind=kind), ""]
    return _unlinked("\n".join(lines))


def notebooks_page(*, sources: BookSources, names: list[str]) -> str:
    """The executed notebooks' table of contents."""
    lines = [f"# Executed notebooks ({sources.profile} profile)", ""]
    if not names:
        lines.append(f"No executed notebooks of this profile: run `python -m dartlib run --profile {sources.profile} "
                     "--publish` to write them to `results/" + sources.profile + "/notebooks/`.")
        return "\n".join(lines) + "\n"
    lines += [f"As they ran on the {sources.profile} profile (outputs included, nothing re-executed). Each page "
              "has a download button (top right) for its `.ipynb`; the links below download them too.", ""]
    lines += [f"- {{doc}}`notebooks/{n}` ({{download}}`{n}.ipynb <notebooks/{n}.ipynb>`)" for n in names]
    lines.append("")
    absent = [p.stem for p in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")) if p.stem not in names]
    if absent:
        numbers = " ".join(n[:2] for n in absent)
        lines += [f"Not yet executed on this profile: {', '.join(f'`{n}`' for n in absent)}. Their results files and "
                  "figures (tables and gallery) may be from an earlier run. To execute and keep them: "
                  f"`python -m dartlib run --profile {sources.profile} --publish {numbers}`.", ""]
    return "\n".join(lines)


SEARCH_NOTE = ("```{note}\nSearch lists matching pages in any browser, also when this book is opened as a file. "
               "Excerpts under each result need the book served over HTTP, for example "
               "`python -m http.server --directory build/book/<profile>/html 8000`, then "
               "<http://localhost:8000/>.\n```")



_TEST_MARKER = re.compile(r"^\s*# NBVAL_[A-Z_]+\s*$")


def without_test_markers(notebook_json: str) -> str:
    """An executed notebook (its JSON) without the lines that only mark a cell for nbval
    (``# NBVAL_CHECK_OUTPUT``): they tell the test suite what to compare, not the reader anything."""
    import json

    notebook = json.loads(notebook_json)
    for cell in notebook.get("cells", []):
        source = cell.get("source", "")
        lines = source if isinstance(source, list) else source.splitlines(keepends=True)
        kept = [line for line in lines if not _TEST_MARKER.match(line)]
        if len(kept) != len(lines):
            cell["source"] = "".join(kept)
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def write_book_source(*, profile: str, out: Path, progress: bool = False,
                      stage: Callable[[str], None] | None = None) -> Path:
    """The Sphinx source tree of ``profile``'s book under ``out`` (replaced); returns it. With
    ``progress`` its ``conf.py`` loads :mod:`dartlib.book.progress` (progress bars);
    ``stage`` is told which page is being written."""
    stage = stage or (lambda text: None)
    sources = book_sources(profile=profile)
    settings = Settings.from_profile(profile)  # an unknown name lists the valid ones
    if out.exists():
        shutil.rmtree(out)
    (out / "figures").mkdir(parents=True)
    (out / "notebooks").mkdir()
    names = []
    for nb in executed_notebooks(sources):
        (out / "notebooks" / nb.name).write_text(without_test_markers(nb.read_text()))
        names.append(nb.stem)
    gallery, pngs = gallery_page(sources=sources)
    for png in pngs:
        shutil.copy2(png, out / "figures" / png.name)
    stage("the claims ledger (computed once, kept in build/book/.ledger-cache/ while its inputs are unchanged)")
    table = ledger_table(sources=sources, settings=settings)
    pages = {"index": ("the overview", lambda: overview_page(sources=sources, settings=settings, notebooks=names,
                                                             table=table)),
             "claims": ("the claims page", lambda: answer.book_claims_page(
                 table=table, claims=claims_ledger.load_claims(), profile=profile)),
             "gallery": (f"the gallery ({len(pngs)} figures)", lambda: gallery),
             "tables": ("the tables", lambda: tables_page(sources=sources, settings=settings)),
             "deviations": ("the deviations", lambda: deviations_page(sources=sources)),
             "notebooks": (f"the notebooks' page ({len(names)} executed notebooks)",
                           lambda: notebooks_page(sources=sources, names=names))}
    for name, (what, page) in pages.items():
        stage(f"writing {what}")
        (out / f"{name}.md").write_text(page())
    shutil.copy2(ASSETS / "favicon.png", out / "favicon.png")
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", out / "_static" / "mathjax")
    for asset in ("dart-book.css", "dart-book.js"):
        shutil.copy2(ASSETS / asset, out / "_static" / asset)
    extensions = ["myst_nb", *(["dartlib.book.progress"] if progress else [])]
    conf = (ASSETS / "conf.py.in").read_text()
    (out / "conf.py").write_text(conf.format(title=f"DART results ({profile} profile)", extensions=extensions))
    return out


def build_book(*, profile: str, out: Path | None = None, quiet: bool = True, progress: bool = False) -> Path:
    """Build ``profile``'s book into ``out`` (default ``build/book/<profile>/``): the source tree
    in ``src/`` and the site in ``html/``; returns the site's ``index.html``. Sphinx's warnings are
    errors, so a broken reference fails the build. Folders that killed builds of the same book
    left behind are removed first (:func:`remove_abandoned_builds`). ``progress``: each stage on
    stderr with its time, and progress bars over the pages Sphinx reads and writes (the command
    line's ``book``)."""
    from sphinx.cmd.build import build_main

    import secrets
    import sys
    import time

    start = time.monotonic()

    def stage(text: str) -> None:
        if progress:
            print(f"book {profile} [{time.monotonic() - start:4.0f} s]: {text}", file=sys.stderr, flush=True)

    root = (out or BOOK_DIR / profile).absolute()
    # Built aside, in a folder beside ``root``, and swapped in whole once Sphinx has finished: an
    # interrupted or failed build leaves the previous book as it was (a failed one keeps its tree
    # in ``.<name>.failed/`` for its source). The build holds a lock on ``.<name>.build-<pid>-<token>.lock``
    # while it runs: a build killed outright (SIGKILL, a power cut) leaves its folders with a lock
    # nobody holds, and the next build removes them.
    root.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_builds(root)
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    aside, old = root.with_name(f".{root.name}.building-{tag}"), root.with_name(f".{root.name}.old-{tag}")
    with _build_lock(root.with_name(f".{root.name}.build-{tag}.lock")):
        try:
            src = write_book_source(profile=profile, out=aside / "src", progress=progress, stage=stage)
            if progress and not has_results(book_sources(profile=profile)):
                print(f"note: {missing_results_note(profile)}", file=sys.stderr)
            stage(f"Sphinx: reading {len(list((src / 'notebooks').glob('*.ipynb')))} executed notebooks and the pages, "
                  "then writing the HTML")
            args = ["-b", "html", "-W", "--keep-going", "-E", "-d", str(aside / "doctrees"), str(src), str(aside / "html")]
            if quiet:
                args.insert(0, "-q")
            if build_main(args) != 0:
                failed = root.with_name(f".{root.name}.failed")
                shutil.rmtree(failed, ignore_errors=True)
                os.replace(aside, failed)
                raise RuntimeError(f"building the {profile} book failed (Sphinx's messages above); the previous book is "
                                   f"unchanged; source: {failed / 'src'}")
            if root.exists():
                os.replace(root, old)
            os.replace(aside, root)
            stage("done")
        finally:
            shutil.rmtree(aside, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
    return root / "html" / "index.html"
