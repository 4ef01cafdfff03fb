"""The results book: a static HTML site per profile, built by Sphinx with myst-nb from the
profile's executed notebooks, plus five generated pages: an overview that opens with the answer
(which of the paper's claims hold, fail or were not run, with the numbers behind them:
:mod:`dartlib.book.answer`), the claims page (each claim headed by its plain sentence, then the
paper's, its verdict and every check with its margin in standard errors), a gallery (every figure,
captioned with the paper figure it reproduces), the deviations from the paper's settings, and the
rendered tables (Table 1 with its per-corruption tables (Appendix, Tables 19 to 21), the cost table
(Appendix, "additional cost"), every other table). The claims ledger is evaluated once per set of
inputs (:func:`ledger_table`) and both pages read that one evaluation.

Nothing is executed: the book shows what the notebooks showed when they ran
(``results/<profile>/notebooks/``, committed; on the smoke profile the committed notebooks, each
replaced by the copy ``make reproduce`` executed into ``runs/smoke/`` where there is one). The
smoke profile's results and figures are not committed: before ``make reproduce`` its book says so
at the top and names the command. ``python -m dartlib book --profile cpu`` (``make book
PROFILE=cpu``) writes ``build/book/<profile>/html/index.html``, printing each stage and progress
bars over the pages Sphinx reads and writes.

Every screen: the book's stylesheet (:data:`BOOK_CSS`) wraps code spans and headings and keeps wide
tables in their own scroll box, so that no page scrolls sideways at a phone's width (390 px);
tables say what their columns are (rho, IR) and are titled by their content
(:data:`RENDERED_TABLES`); gallery figures link to their full-size image; search excerpts are
taken from the page's article (:data:`BOOK_JS`). ``tests/test_browser.py`` checks all of it at
1280 and 390 px.
"""

from __future__ import annotations

import contextlib
import html
import math
import os
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jupyter_server_mathjax
import pandas as pd

from dartlib.analysis.noise import SE_SENTENCE
from dartlib.book import answer, claims as claims_ledger
from dartlib.experiments.grid import read_results
from dartlib.experiments.outcomes import folder_outcomes
from dartlib.paths import NOTEBOOKS_DIR, PROFILES_DIR, REPO_ROOT
from dartlib.profiles import load_profile
from dartlib.reporting.figures import SAVE_DPI, WIDTH
from dartlib.reporting.paper import TABLES as PAPER_TABLES, load_table
from dartlib.reporting.tables import with_row_labels
from dartlib.studies.costs import cost_rows
from dartlib.studies.diagnosis import diagnosis_table, seed_table
from dartlib.studies.table1 import TABLE1_METHODS, per_corruption_table, rendered_table, row_order

BOOK_DIR = REPO_ROOT / "build" / "book"
DOCS_DIR = REPO_ROOT / "docs"
FULL_SIZE_DIR = "_images"  # where Sphinx puts the images a page shows, under their own names

@dataclass(frozen=True)
class BookSources:
    """Where one profile's book reads from."""

    profile: str
    notebooks: Path
    figures: Path
    results: Path
    runs: Path | None = None  # the smoke profile: the last run's executed copies (runs/smoke/), shown where present


@dataclass(frozen=True)
class GalleryFigure:
    """One figure of the gallery: its file (figures/<profile>/<stem>.png), the part of the paper it
    reproduces (``label``, empty for the suite's own figures), a readable title and a caption that
    names only what the figure plots (tests/test_book.py checks the caption's terms against the
    figure's own text)."""

    stem: str
    label: str
    title: str
    caption: str


# In the paper's order: its figures by number, then the tables a figure draws, then the suite's
# own figures (data, source models, checks of the toy model, training curves).
GALLERY = (
    GalleryFigure("fig1_confusion", "Figure 1", "Confusion patterns of BNAdapt under label shift",
                  "BNAdapt's confusion matrices on the clean and corrupted test sets, long-tailed (top) and "
                  "inverse long-tailed (bottom); red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("fig3_accuracy_vs_rho", "Figure 3", "Accuracy against the imbalance ratio",
                  "Accuracy of NoAdapt, BNAdapt and BNAdapt+DART against the imbalance ratio rho (log scale), "
                  "mean over corruptions, ± 2 SE (an upper bound), beside the paper's Table 1 points (open diamonds)."),
    GalleryFigure("fig4_prediction_deviation", "Figure 4", "Batch accuracy against D(u, p_bar) and the prediction deviation",
                  "BNAdapt's accuracy per batch against D(u, p_bar) (left) and the prediction deviation d (right), "
                  "one colour per imbalance ratio (IR)."),
    GalleryFigure("data_dirichlet_simplex", "Figure 6", "Dirichlet sampling on the simplex",
                  "Class distributions of three-class batches on the simplex, i.i.d. against Dirichlet sampling, "
                  "with the long-tailed distributions of rho = 1, 2 and 10 marked."),
    GalleryFigure("data_dirichlet_batches", "Figure 7", "Five Dirichlet batches",
                  "Class distributions of five batches of the Dirichlet stream over the training set."),
    GalleryFigure("toy_illustration_and_curves", "Figure 8", "The four-class Gaussian toy model",
                  "The four-class Gaussian mixture after mean centring, with the Bayes decision boundaries "
                  "(left), and the probability that class 1 is predicted as class j against its prior p (right)."),
    GalleryFigure("confusion_lt_rho1", "Figure 9", "Confusion matrices, CIFAR-10C-LT, rho = 1",
                  "BNAdapt's confusion matrices on the clean set and every corruption, long-tailed rho = 1; "
                  "red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("confusion_lt_rho10", "Figure 10", "Confusion matrices, CIFAR-10C-LT, rho = 10",
                  "BNAdapt's confusion matrices on the clean set and every corruption, long-tailed rho = 10; "
                  "red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("confusion_lt_rho100", "Figure 11", "Confusion matrices, CIFAR-10C-LT, rho = 100",
                  "BNAdapt's confusion matrices on the clean set and every corruption, long-tailed rho = 100; "
                  "red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("dart_w_b_gaussian_noise", "Figures 12 to 14", "The W and b that g_phi outputs",
                  "The W and b that g_phi outputs on the long-tailed Gaussian-noise streams, one row per alpha "
                  "and one pair of panels per rho, on one colour scale."),
    GalleryFigure("dart_pseudo_label_distribution", "Figure 15", "Averaged pseudo-label distribution",
                  "The ground-truth class distribution beside the mean pseudo-label distribution of BNAdapt and "
                  "BNAdapt+DART, one panel per rho."),
    GalleryFigure("hoc_tsne", "Figure 16 (a)", "t-SNE of the BN-adapted features",
                  "t-SNE maps of the BN-adapted features of one long-tailed stream, coloured by the true class "
                  "(left) and by BNAdapt's prediction (right)."),
    GalleryFigure("hoc_transition", "Figure 16 (b)", "Transition matrix estimated by HOC",
                  "The true transition matrix T (BNAdapt's confusion) beside the one HOC estimates."),
    GalleryFigure("table1_dart_gain", "Table 1", "DART's gain per method and rho",
                  "DART's gain (points, ± 2 SE) for each method and rho, ours beside the paper's."),
    GalleryFigure("table1_rho1_gain_vs_accuracy", "Tables 1, 19", "DART's effect at rho = 1 against accuracy",
                  "DART's gain at rho = 1 on each corruption against BNAdapt's accuracy, ours beside the paper's."),
    GalleryFigure("online_imbalance", "Table 2", "Online imbalance",
                  "Accuracy of NoAdapt, BNAdapt, BNAdapt+DART and BNAdapt+DART-split against the imbalance "
                  "ratio (IR) of the online-imbalance streams."),
    GalleryFigure("ablations_gain", "Tables 3 to 5", "Ablations of g_phi",
                  "The gain of each DART variant (g_phi's inputs, sampling and outputs) over BNAdapt, per stream."),
    GalleryFigure("sensitivity", "Tables 10, 13", "Sensitivity to alpha and to the test batch size",
                  "BNAdapt+DART's accuracy against alpha (symmetric log scale, alpha 0 left of 0.01), one curve per "
                  "rho, dotted: BNAdapt (left); each method's accuracy against the test batch size on balanced "
                  "streams (right); ± 2 SE."),
    GalleryFigure("more_settings", "Tables 12, 16", "CIFAR-10C-imb and mixed domains",
                  "Accuracy on the CIFAR-10C-imb protocol against the imbalance ratio (left) and on mixed domains "
                  "(right), with and without DART."),
    GalleryFigure("data_corruptions_cifar10", "", "The corruptions on CIFAR-10",
                  "The 15 corruptions (rows) at severities 1 to 5 (columns) on one CIFAR-10 test image, beside the "
                  "clean image."),
    GalleryFigure("data_corruptions_fmnist", "", "The corruptions on Fashion-MNIST",
                  "The 15 corruptions (rows) at severities 1 to 5 (columns) on one Fashion-MNIST test image (the "
                  "smoke profile's stand-in for CIFAR-10-C), beside the clean image."),
    GalleryFigure("data_protocol_histograms", "", "Class histograms of the test protocols",
                  "Samples per class of each test protocol's stream (long-tailed, inverse long-tailed, online "
                  "imbalance)."),
    GalleryFigure("source_training_curves", "", "Source model training",
                  "The source model's training loss (left), and its training and clean test accuracy (right), per epoch."),
    GalleryFigure("source_noadapt_corruptions", "", "NoAdapt per corruption",
                  "NoAdapt's accuracy per corruption, ours beside the paper's NoAdapt row."),
    GalleryFigure("toy_confusion_analytic_vs_simulated", "", "The toy model's confusion: closed form and simulation",
                  "The toy model's confusion matrix in closed form beside its simulation."),
    GalleryFigure("toy_optimal_w", "", "The toy model's optimal W",
                  "The optimal refinement matrix W* for a uniform training prior and a long-tailed test prior (rho = 100)."),
    GalleryFigure("dart_training_curves", "", "g_phi's intermediate training",
                  "L_imb on Dirichlet batches and L_bal on i.i.d. batches per step of g_phi's training "
                  "(moving averages)."),
    GalleryFigure("backbone_study", "", "Backbone strength",
                  "DART's cost at rho = 1 (left) and its gain at IR 50 and 5000 (right) against BNAdapt's accuracy, "
                  "one point per backbone and severity."),
    GalleryFigure("diagnosis", "", "Diagnosis of DART's cost at rho = 1 and its margin over NoAdapt on CIFAR-10C-imb",
                  "Per variant of Table 1's g_phi (one factor changed at a time), BNAdapt+DART minus BNAdapt at "
                  "rho = 1 and BNAdapt+DART minus NoAdapt at IR 20, 50 and 5000, each ± 2 SE; the paper's values "
                  "as grey lines."),
)
GALLERY_ORDER = {f.stem: i for i, f in enumerate(GALLERY)}
# figure file -> its gallery heading and caption (every committed figure has one: tests/test_book.py)
FIGURE_CAPTIONS = {f.stem: f"{f.label + ': ' if f.label else ''}{f.title}. {f.caption}" for f in GALLERY}


def book_sources(*, profile: str) -> BookSources:
    """The executed notebooks, figures and results of ``profile`` (none of them created here)."""
    notebooks = NOTEBOOKS_DIR if profile == "smoke" else REPO_ROOT / "results" / profile / "notebooks"
    runs = REPO_ROOT / "runs" / profile if profile == "smoke" else None
    return BookSources(profile, notebooks, REPO_ROOT / "figures" / profile, REPO_ROOT / "results" / profile, runs)


def executed_notebooks(sources: BookSources) -> list[Path]:
    """The executed notebooks the book shows, in order: ``sources.notebooks``; on the smoke profile
    the committed notebooks, each replaced by the copy that ``make reproduce`` executed
    (``runs/smoke/``) where there is one, so that the notebooks show the run that wrote
    ``results/smoke/`` and ``figures/smoke/``."""
    pattern = "[0-9][0-9]_*.ipynb"
    found = {p.stem: p for p in sources.notebooks.glob(pattern)} if sources.notebooks.is_dir() else {}
    if sources.runs is not None and sources.runs.is_dir():
        found.update({p.stem: p for p in sources.runs.glob(pattern)})
    return [found[name] for name in sorted(found)]


def has_results(sources: BookSources) -> bool:
    """Whether the profile's results folder holds any results file (a fresh clone has no smoke
    results: ``make reproduce`` writes them)."""
    return sources.results.is_dir() and any(sources.results.glob("*.csv"))


def missing_results_note(profile: str) -> str:
    """What to run when ``profile`` has no results on this checkout."""
    run = "make reproduce" if profile == "smoke" else f"make reproduce PROFILE={profile}"
    return (f"No results of the {profile} profile on this checkout: `results/{profile}/` and `figures/{profile}/` are "
            f"written by `{run}` (the smoke profile: about 10 minutes on 2 CPU cores). Until then the claims ledger "
            f"and the tables read NOT RUN and the gallery is empty. Run `{run}`, then "
            f"`make book PROFILE={profile}`.")


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


def overview_page(*, sources: BookSources, settings: dict, notebooks: list[str] | tuple[str, ...] = (),
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
        f"Over the {len(table)} checks: {claims_ledger.count_line(table=table)}.", "",
        *_seed_section(sources=sources, settings=settings),
        *_diagnosis_section(sources=sources),
        "## Pages", "",
        "```{toctree}", ":caption: Results", ":maxdepth: 1", "", "claims", "gallery", "tables", "deviations", "```", "",
        "```{toctree}", ":caption: Notebooks", ":maxdepth: 1", "", "notebooks", *[f"notebooks/{n}" for n in notebooks],
        "```", "",
        SEARCH_NOTE, "",
    ])


def profile_setting(settings: dict) -> str:
    """The profile's model in a few words: "ResNet-26 w16" for ``resnet26-w16``."""
    arch = str(settings.get("source_arch", "its own model"))
    return re.sub(r"^resnet(\d+)-?", r"ResNet-\1 ", arch).strip()


# What the ledger's evaluation reads: the claims, the paper's tables and the modules that judge. A
# change to any of them, or to a file of the profile's results folder, is a new cache key.
LEDGER_CODE = ("book/claims.py", "analysis/noise.py", "experiments/outcomes.py", "experiments/grid.py",
               "reporting/paper.py", "reporting/tables.py")
LEDGER_CACHE = BOOK_DIR / ".ledger-cache"


def ledger_key(*, sources: BookSources, settings: dict) -> str:
    """A digest of everything the ledger's evaluation of ``sources`` reads (see :data:`LEDGER_CODE`)."""
    import hashlib

    digest = hashlib.sha256(f"{sources.profile}\0{settings.get('corrupted_dataset')}".encode())
    package = Path(claims_ledger.__file__).parent.parent
    files = [claims_ledger.CLAIMS_FILE, *sorted(claims_ledger.PAPER_DIR.glob("*.csv")),
             *(package / name for name in LEDGER_CODE)]
    if sources.results.is_dir():
        files += sorted(p for p in sources.results.rglob("*") if p.is_file() and "notebooks" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


def ledger_table(*, sources: BookSources, settings: dict, cache: Path | None = LEDGER_CACHE) -> pd.DataFrame:
    """The claims ledger evaluated on ``sources`` (``claims.evaluate``), once per set of inputs:
    kept in ``cache`` (``build/book/.ledger-cache/<profile>-<key>.json``, :func:`ledger_key`) and
    read back while none of its inputs changed and its contents match the digest stored with them
    (:func:`_read_ledger`; one that does not is discarded with a warning and evaluated again);
    ``cache=None`` computes it afresh."""
    path = None
    if cache is not None:
        key = ledger_key(sources=sources, settings=settings)
        path = cache / f"{sources.profile}-{key}.json"
        if path.is_file():
            table = _read_ledger(path, key=key)
            if table is not None:
                return table
    table = claims_ledger.evaluate(sources.profile, corrupted_dataset=settings.get("corrupted_dataset"),
                                   folder=sources.results)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in [*path.parent.glob(f"{sources.profile}-*.json"), *path.parent.glob(f"{sources.profile}-*.pkl")]:
            old.unlink(missing_ok=True)  # one entry per profile: the cache never grows (.pkl: the former format)
        _write_ledger(path, table, key=key)
    return table


def _ledger_payload(table: pd.DataFrame) -> str:
    """The table as JSON text: each column's dtype and values (floats written in their shortest exact
    form, so that the table read back equals the one written)."""
    import json

    return json.dumps({"dtypes": {str(c): str(t) for c, t in table.dtypes.items()},
                       "columns": {str(c): table[c].tolist() for c in table.columns}})


def _write_ledger(path: Path, table: pd.DataFrame, *, key: str) -> None:
    """The ledger's cache file: its key, the table (:func:`_ledger_payload`) and the payload's sha256,
    written whole or not at all. JSON, not a pickle: reading a cache never runs code."""
    import hashlib
    import json

    from dartlib.data.files import write_text_atomic

    payload = _ledger_payload(table)
    write_text_atomic(path, json.dumps({"key": key, "sha256": hashlib.sha256(payload.encode()).hexdigest(),
                                        "table": payload}) + "\n")


def _read_ledger(path: Path, *, key: str) -> pd.DataFrame | None:
    """The table :func:`_write_ledger` kept at ``path``, or None (the file discarded with a
    :class:`~dartlib.data.files.CacheDiscardedWarning` naming it) where it is not valid JSON, was
    kept under another key, or its table does not match the digest stored with it."""
    import hashlib
    import json
    import warnings

    from dartlib.data.files import CacheDiscardedWarning

    try:
        stored = json.loads(path.read_text())
        payload = stored["table"]
        if stored["key"] != key:
            problem = f"it was kept for the inputs {str(stored['key'])[:20]}, not {key}"
        elif hashlib.sha256(payload.encode()).hexdigest() != stored["sha256"]:
            problem = "its table does not match the digest stored with it"
        else:
            content = json.loads(payload)
            return pd.DataFrame({c: pd.Series(values, dtype=content["dtypes"][c])
                                 for c, values in content["columns"].items()})
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
        problem = f"not a ledger cache file ({type(err).__name__}: {str(err)[:80]})"
    warnings.warn(f"{path}: {problem}; discarded, the ledger is evaluated again", CacheDiscardedWarning, stacklevel=3)
    path.unlink(missing_ok=True)
    return None


def _seed_section(*, sources: BookSources, settings: dict) -> list[str]:
    """Table 1's BNAdapt rows and CIFAR-10C-imb over seeds (notebook 15's seed replicas), mean ± std
    beside the paper's, where at least two seeds were run; nothing otherwise."""
    path = sources.results / "diagnosis.csv"
    if not path.is_file() or "lt_rhos" not in settings or "online_irs" not in settings:
        return []  # no replicas, or a profile without the LT and imbalance settings they are read at
    from dartlib.dart.refiner import DartConfig

    paper = DartConfig()  # the paper's g_phi: a profile whose own g_phi it is reads the replicas of that one
    own_is_paper = (settings.get("dart_epochs"), settings.get("dart_alpha")) == (paper.epochs, paper.alpha)
    table = seed_table(rows=read_results(path), lt_rhos=settings["lt_rhos"], online_irs=settings["online_irs"],
                       group="paper" if own_is_paper else "table1")
    if not len(table) or table["seeds"].max() < 2:
        return []
    return [f"**Over seeds.** Table 1's BNAdapt rows and CIFAR-10C-imb (g_phi {settings.get('dart_epochs')} epochs at "
            f"alpha {settings.get('dart_alpha'):g}), each seed drawing g_phi's initialisation, "
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
    table = diagnosis_table(rows=read_results(path), outcomes=folder_outcomes(sources.results))
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


def gallery_page(*, sources: BookSources) -> tuple[str, list[Path]]:
    """Every figure of the profile as an image with its caption; returns the page and the files
    it shows."""
    pngs = sorted(sources.figures.glob("*.png")) if sources.figures.is_dir() else []
    pngs.sort(key=lambda p: (GALLERY_ORDER.get(p.stem, len(GALLERY)), p.stem))
    known = {f.stem: f for f in GALLERY}
    lines = [f"# Gallery ({sources.profile} profile)", "",
             f"Every figure in `figures/{sources.profile}/` (PDF beside each PNG), in the paper's order: its figures "
             "by number, then the tables a figure draws, then the suite's own figures. Each is shown at the same "
             "scale, so its fonts read at the same size; click a figure for its full-size image. Profile: "
             f"{sources.profile}.", ""]
    if not pngs:
        lines.append(f"No figures in `figures/{sources.profile}/`: run `make reproduce PROFILE={sources.profile}`.")
    for png in pngs:
        entry = known.get(png.stem) or GalleryFigure(png.stem, "", png.stem.replace("_", " "), "")
        heading = f"{entry.label}: {entry.title}" if entry.label else entry.title
        width = shown_width_percent(png)
        # the image links to itself at full size (Sphinx copies every image to _images/ under its own name)
        lines += [f"## {heading}", "", f"```{{figure}} figures/{png.name}", f":alt: {heading}", f":width: {width}%",
                  f":target: {FULL_SIZE_DIR}/{png.name}", "", f"{entry.caption} ({sources.profile} profile; `figures/{sources.profile}/{png.stem}.pdf`)", "```",
                  ""]
    return "\n".join(lines), pngs


def shown_width_percent(png: Path) -> int:
    """The width at which the gallery shows ``png``, in percent of the text column: a figure of
    ``figures.WIDTH`` inches fills it, a narrower one is shown narrower, so that every figure's
    fonts appear at the same size."""
    width_px = struct.unpack(">I", png.read_bytes()[16:20])[0]
    return max(10, min(100, round(100 * width_px / (WIDTH * SAVE_DPI))))


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


def _per_corruption_tables(results: Path) -> list[str]:
    table1 = results / "table1.csv"
    if not table1.is_file():
        return []
    frame = with_row_labels(read_results(table1))
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


def _cost_table(results: Path) -> list[str]:
    costs = results / "costs.csv"
    if not costs.is_file():
        return []
    ours = pd.read_csv(costs)
    side = cost_rows(ours).set_index("row")
    side.index.name = "method"
    keep = ["params_m", "trainable_params_m", "gmac_forward_per_image", "wall_clock_s", "wall_clock_vs_bnadapt",
            "params_m_paper", "flops_g", "wall_clock_s_paper"]
    device = ", ".join(sorted(set(ours["machine" if "machine" in ours else "device"].astype(str))))
    return [f"Ours on {device}, {int(ours.images.iloc[0])} images; the paper's (`_paper`, `flops_g`) on its GPU, "
            "ResNet-26, CIFAR-10-C.", "", markdown_table(side[[k for k in keep if k in side]], digits=3), ""]


def _table1(results: Path, settings: dict) -> str:
    """Table 1 rendered from ``table1.csv`` itself, so the book never shows an older rendering."""
    table1 = results / "table1.csv"
    if not table1.is_file():
        return (f"Table 1 has not been computed on this profile (notebook 06): run `make reproduce"
                f"{'' if settings.get('profile') == 'smoke' else ' PROFILE=' + str(settings.get('profile'))}`.")
    frame = read_results(table1)
    methods = [m for m in TABLE1_METHODS if m in set(frame.method)]
    dataset = settings.get("corrupted_dataset", "")
    title = (f"Table 1, {dataset}-LT ({settings.get('profile')} profile: {settings.get('source_arch')}, "
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


def tables_page(*, sources: BookSources, settings: dict) -> str:
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
    per_corruption = _per_corruption_tables(sources.results)
    if per_corruption:
        lines += ["## Table 1 per corruption (Appendix, Tables 19 to 21)", "", *per_corruption]
    cost = _cost_table(sources.results)
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

BOOK_CSS = """/* generated by dartlib.book.site: wide content scrolls inside its own box */
.scroll-box, .bd-article .pst-scrollable-table-container { overflow-x: auto; max-width: 100%; }
.bd-article table.table, .bd-article table.docutils { width: auto; }
.bd-article table.wide td, .bd-article table.wide th { padding: 0.2em 0.5em; vertical-align: top; }
/* the overview's diagnosis table: a smaller font, its cells wrapping, and the overview without the
   contents column on the right (its own sections are few), so that the table has the page's width;
   what is still wider scrolls inside its box, never cut at the page's edge */
.bd-article table.wide { font-size: 0.85em; border-collapse: collapse; }
.bd-article table.wide td, .bd-article table.wide th { white-space: normal; border-bottom: 1px solid #ddd; }
/* a number and its SE stay on one line; the words of the first two columns wrap */
.bd-article table.wide td:nth-child(n+3) { white-space: nowrap; }
.bd-main .bd-content:not(:has(.bd-sidebar-secondary)) .bd-article-container { max-width: 100%; }
/* notebook text output and code: one scroll box each, never cut at the edge */
.bd-article div.cell_output pre, .bd-article div.highlight pre, .bd-article .output pre {
  overflow-x: auto; max-width: 100%; }
.bd-article div.cell_output, .bd-article div.cell_input { max-width: 100%; }
.bd-article div.cell_output .output.text_html, .bd-article div.cell_output .output.text_markdown {
  overflow-x: auto; max-width: 100%; }
.bd-article img { max-width: 100%; height: auto; }
/* code spans (claim ids, file paths) and headings wrap instead of reaching past a phone's edge, in
   the text and in the page's contents on the right */
.bd-article code.literal, .bd-article code.literal span.pre, .bd-sidebar-secondary code.literal,
.bd-sidebar-secondary code.literal span.pre, .bd-sidebar-primary code.literal span.pre {
  white-space: normal; overflow-wrap: anywhere; }
.bd-article h1, .bd-article h2, .bd-article h3, .bd-sidebar-secondary .toc-entry a {
  overflow-wrap: anywhere; hyphens: none; }
.bd-article table code.literal span.pre { white-space: nowrap; }
/* previous / next at the foot: a long title wraps, its arrow stays inside the page */
.prev-next-area a { min-width: 0; max-width: 100%; }
.prev-next-area .prev-next-info { min-width: 0; }
.prev-next-area .prev-next-title { overflow-wrap: anywhere; }
/* a gallery figure links to its full-size image */
.bd-article figure a.image-reference { cursor: zoom-in; }
@media (max-width: 576px) {
  /* on a phone every figure takes the column's width (the one scale is a desktop's) */
  .bd-article figure img { width: 100% !important; }
  .bd-article h1 { font-size: 1.9rem; }
  .bd-article h2 { font-size: 1.45rem; }
  .bd-article h3 { font-size: 1.2rem; }
}
"""

BOOK_JS = """// generated by dartlib.book.site
// Opened as a file (file://), the browser refuses the requests that fetch each result's excerpt:
// search then lists the matching pages without excerpts, and says how to serve the book.
if (window.location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined") {
  DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  document.addEventListener("DOMContentLoaded", () => {
    const results = document.getElementById("search-results");
    if (!results) return;
    const note = document.createElement("p");
    note.className = "search-file-note";
    note.textContent = "Opened as a file: results are listed without excerpts. Serve the book for excerpts: "
      + "python -m http.server --directory build/book/<profile>/html 8000, then open http://localhost:8000/";
    results.parentNode.insertBefore(note, results);
  });
}
// Served, each result's excerpt is the passage around the search words in the page's article:
// Sphinx reads the theme's whole main block, whose header (the colour-mode menu, "System Settings
// Light Dark") and foot are no part of any passage.
const dartArticleText = (htmlString, anchor) => {
  const page = new DOMParser().parseFromString(htmlString, "text/html");
  const chrome = [".headerlink", "script", "style", "button", ".bd-header-article", ".header-article-items",
                  ".theme-switch-container", ".prev-next-area", ".bd-footer-article", ".bd-sidebar-secondary"];
  page.querySelectorAll(chrome.join(", ")).forEach((el) => el.remove());
  const article = page.querySelector("article.bd-article") || page.querySelector('[role="main"]');
  if (!article) return "";
  const block = anchor ? article.querySelector(anchor) : null;
  return (block || article).textContent.replace(/\\s+/g, " ");
};
const dartPatchSearch = () => {
  if (typeof Search !== "undefined" && Search.htmlToText !== dartArticleText) Search.htmlToText = dartArticleText;
};
dartPatchSearch();
document.addEventListener("DOMContentLoaded", dartPatchSearch);
"""


def favicon_png(*, size: int = 16) -> bytes:
    """A small PNG (DART green square): with a declared icon the browser does not ask the server
    for /favicon.ico, which a static host answers with 404 and a console error."""
    row = b"\x00" + bytes((0x00, 0x9E, 0x73)) * size
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * size)) + chunk(b"IEND", b"")


SPHINX_CONF = '''# generated by dartlib.book.site; edits are overwritten
project = {title!r}
html_favicon = "favicon.png"
extensions = {extensions!r}
nb_execution_mode = "off"
# Markdown outputs (notebook 06's rendered Table 1) parsed as GitHub Markdown, which has pipe tables (CommonMark has
# none); its links stay plain links, as in CommonMark
nb_render_markdown_format = "gfm"
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
# MathJax 2 from jupyter-server-mathjax, copied into the site (the book needs no network); it ships
# the STIX-Web fonts only
html_static_path = ["_static"]
html_css_files = ["dart-book.css"]
html_js_files = ["dart-book.js"]
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
# messageStyle none: no "Processing math" box over the page's corner while it typesets; processRefs off: a claim
# quotes the paper's LaTeX source, whose \\ref commands MathJax would show as "???"
mathjax2_config = {{"messageStyle": "none",
                    "tex2jax": {{"inlineMath": [["\\\\(", "\\\\)"]], "processEscapes": True, "processRefs": False,
                                 "ignoreClass": "document", "processClass": "math|output_area"}},
                    "HTML-CSS": {{"availableFonts": ["STIX-Web"], "preferredFont": "STIX-Web", "webFont": "STIX-Web",
                                 "imageFont": None,
                                 # its blank test font points at about:blank, which Chromium refuses with a console error
                                 "styles": {{"@font-face": {{"font-family": "MathJax_Blank", "src": "local('MathJax_Blank')"}}}}}}}}
# Jupyter Book's theme: the pages and notebooks in the left navigation, the page's contents on the
# right, previous/next at the foot, a download button (.ipynb of a notebook, .md of a page)
html_theme = "sphinx_book_theme"
html_title = {title!r}
html_theme_options = {{"home_page_in_toc": True, "show_navbar_depth": 1, "show_toc_level": 2,
                      "use_download_button": True, "use_fullscreen_button": False,
                      "navigation_with_keys": False, "footer_content_items": [],
                      "secondary_sidebar_items": {{"**": ["page-toc"], "index": []}}}}
html_sourcelink_suffix = ""
# the light theme unless the reader chose one (an unset mode logs a console error)
html_context = {{"default_mode": "light"}}
html_copy_source = True
html_last_updated_fmt = None
exclude_patterns = ["_build"]
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]
'''


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
    settings = load_profile(profile)  # an unknown name lists the valid ones
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
    (out / "favicon.png").write_bytes(favicon_png())
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", out / "_static" / "mathjax")
    (out / "_static" / "dart-book.css").write_text(BOOK_CSS)
    (out / "_static" / "dart-book.js").write_text(BOOK_JS)
    extensions = ["myst_nb", *(["dartlib.book.progress"] if progress else [])]
    (out / "conf.py").write_text(SPHINX_CONF.format(title=f"DART results ({profile} profile)", extensions=extensions))
    return out


def build_book(*, profile: str, out: Path | None = None, quiet: bool = True, progress: bool = False) -> Path:
    """Build ``profile``'s book into ``out`` (default ``build/book/<profile>/``): the source tree
    in ``src/`` and the site in ``html/``; returns the site's ``index.html``. Sphinx's warnings are
    errors, so a broken reference fails the build. Folders that killed builds of the same book
    left behind are removed first (:func:`remove_abandoned_builds`). ``progress``: each stage on
    stderr with its time, and progress bars over the pages Sphinx reads and writes (the command
    line's ``book``)."""
    from sphinx.cmd.build import build_main

    import os
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


_LEFT_BEHIND = r"\.(?P<what>building|old|build)-(?P<pid>\d+)-(?P<token>[0-9a-f]+)(?P<lock>\.lock)?"


@contextlib.contextmanager
def _build_lock(path: Path):
    """An exclusive lock on ``path`` (created) for the ``with`` block; the file is removed after it.
    The kernel releases the lock when the process ends, however it ends."""
    import fcntl
    import os

    from dartlib.data.files import open_lock

    fd = open_lock(path, folder=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _owner_gone(lock: Path, pid: int) -> bool:
    """Whether the build that made ``lock`` (process ``pid``) has ended: its lock file is not held
    (or, without one, the process no longer exists)."""
    import fcntl
    import os

    if lock.is_file() and not lock.is_symlink():
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # cannot open it (another user's): leave it
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: the build runs
            return False
        finally:
            os.close(fd)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def remove_abandoned_builds(root: Path) -> list[Path]:
    """Remove what builds of the book ``root`` left beside it when killed before they could clean
    up: ``.<name>.building-<pid>-<token>/`` (a half-built book), ``.<name>.old-<pid>-<token>/`` (the
    previous book, swapped out) and their ``.<name>.build-<pid>-<token>.lock``, when the build that
    made them no longer runs (a running build's are left alone). Returns the paths removed."""
    pattern = re.compile(re.escape(f".{root.name}") + _LEFT_BEHIND + "$")
    removed = []
    if not root.parent.is_dir():
        return removed
    for path in sorted(root.parent.iterdir()):
        found = pattern.match(path.name)
        if not found or found["lock"]:
            continue
        lock = root.with_name(f".{root.name}.build-{found['pid']}-{found['token']}.lock")
        if found["what"] != "build" and _owner_gone(lock, int(found["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    for path in sorted(root.parent.glob(f".{root.name}.build-*.lock")):
        found = pattern.match(path.name)
        if found and _owner_gone(path, int(found["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
