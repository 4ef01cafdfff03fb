"""The results book: a static HTML site per profile, built by Sphinx with myst-nb from the
profile's executed notebooks, plus five generated pages: an overview (what reproduces, the claims
ledger), the claims page (each claim's sentence, reading and checks with their margins in standard
errors: ``claims.claims_page``), a gallery (every figure, captioned with the paper figure it reproduces), the deviations
from the paper's settings, and the rendered tables (Table 1 with its per-corruption tables
(Appendix, Tables 19 to 21), the cost table (Appendix, "additional cost"), every other table).

Nothing is executed: the book shows what the notebooks showed when they ran
(``results/<profile>/notebooks/``, committed; on the smoke profile the committed notebooks
themselves). ``python -m dartlib book --profile cpu`` (``make book PROFILE=cpu``) writes
``build/book/<profile>/html/index.html``.
"""

from __future__ import annotations

import html
import math
import re
import shutil
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import jupyter_server_mathjax
import pandas as pd

from dartlib.experiments.grid import read_results
from dartlib.paths import NOTEBOOKS_DIR, PROFILES_DIR, REPO_ROOT
from dartlib.profiles import load_profile
from dartlib.reporting import claims as claims_ledger
from dartlib.reporting.cost_tables import cost_rows
from dartlib.reporting.paper import load_table
from dartlib.reporting.table1_report import per_corruption_table, rendered_table, row_order, with_row_labels

BOOK_DIR = REPO_ROOT / "build" / "book"
DOCS_DIR = REPO_ROOT / "docs"
STATUS_COLOURS = {"HOLDS": "#c8e6c9", "WITHIN NOISE": "#fff9c4", "FAILS": "#ffcdd2", "NOT RUN": "#e0e0e0"}
TABLE1_METHODS = ("noadapt", "bnadapt", "tent", "pl", "note", "delta", "ods", "lame", "sar")

# figure file (figures/<profile>/<name>.png) -> what it reproduces; the gallery's captions
FIGURE_CAPTIONS = {
    "toy_illustration_and_curves": "Figure 6 (Appendix C): the toy Gaussian mixture and its accuracy curves",
    "toy_confusion_analytic_vs_simulated": "Figure 7 (Appendix C): the toy model's confusion, closed form against simulation",
    "toy_optimal_w": "Figure 8 (Appendix C): the toy model's optimal refinement W",
    "data_corruptions_fmnist": "the test-time corruptions on Fashion-MNIST (the smoke profile's stand-in for CIFAR-10-C)",
    "data_corruptions_cifar10": "the 15 CIFAR-10-C corruptions at severity 5 (Section 5.1)",
    "data_dirichlet_batches": "the Dirichlet batches of DART's intermediate training (Section 4.2)",
    "data_dirichlet_simplex": "Dirichlet label distributions on the simplex (Section 4.2)",
    "data_protocol_histograms": "class histograms of the test protocols (CIFAR-10C-LT, CIFAR-10C-imb; Section 5.1)",
    "source_training_curves": "the source model's training curves (Appendix A)",
    "source_noadapt_corruptions": "NoAdapt accuracy per corruption beside the paper's NoAdapt row (Table 1)",
    "fig1_confusion": "Figure 1: BNAdapt's confusion matrices under label shift",
    "confusion_lt_rho1": "Figure 1 / Appendix C: confusion matrices, CIFAR-10C-LT rho = 1",
    "confusion_lt_rho10": "Figure 1 / Appendix C: confusion matrices, CIFAR-10C-LT rho = 10",
    "confusion_lt_rho100": "Figure 1 / Appendix C: confusion matrices, CIFAR-10C-LT rho = 100",
    "dart_training_curves": "DART's intermediate training curves (Section 4.2, Algorithm 1)",
    "dart_w_b_gaussian_noise": "Appendix D: the W and b that g_phi outputs, per alpha and rho",
    "dart_pseudo_label_distribution": "Appendix G: mean pseudo-label distribution with and without DART",
    "fig3_accuracy_vs_rho": "Figure 3: accuracy against the imbalance ratio rho (NoAdapt, BNAdapt, BNAdapt+DART)",
    "fig4_prediction_deviation": "Figure 4: batch accuracy against D(u, p_bar) and the prediction deviation d",
    "table1_dart_gain": "Table 1: DART's gain per method and rho, ours beside the paper's",
    "table1_rho1_gain_vs_accuracy": "Table 1: DART's effect at rho = 1 against BNAdapt's accuracy",
    "ablations_gain": "Tables 3 to 5: the ablations of g_phi's inputs, sampling and outputs",
    "sensitivity": "Appendix (sensitivity): alpha, batch size, epochs and g_phi's hyperparameters",
    "more_settings": "Appendix (more settings): CIFAR-10C-imb and mixed domains",
    "online_imbalance": "Table 2 / Appendix: online imbalance, DART and DART-split",
    "hoc_transition": "Appendix (HOC): true and estimated confusion (transition) matrices",
    "hoc_tsne": "Appendix (HOC): t-SNE of the test features",
    "backbone_study": "backbone study: DART's gain against the source model's width and corruption severity",
}


@dataclass(frozen=True)
class BookSources:
    """Where one profile's book reads from."""

    profile: str
    notebooks: Path
    figures: Path
    results: Path


def book_sources(*, profile: str) -> BookSources:
    """The executed notebooks, figures and results of ``profile`` (none of them created here)."""
    notebooks = NOTEBOOKS_DIR if profile == "smoke" else REPO_ROOT / "results" / profile / "notebooks"
    return BookSources(profile, notebooks, REPO_ROOT / "figures" / profile, REPO_ROOT / "results" / profile)


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


def _claims_html(table: pd.DataFrame) -> str:
    head = ("<tr><th>claim</th><th>check</th><th>paper</th><th>ours ± SE</th><th>status</th><th>condition</th>"
            "<th>margin</th></tr>")
    rows = []
    for r in table.itertuples():
        ours = "—" if math.isnan(r.ours) else f"{r.ours:.1f} ± {r.se:.2f}"
        paper = "—" if math.isnan(r.paper) else f"{r.paper:.1f}"
        margin = "" if math.isnan(r.margin) else f"{r.margin:+.2f} SE"
        colour = STATUS_COLOURS[r.status]
        rows.append(f'<tr style="background:{colour}"><td>{html.escape(r.claim)}</td><td>{html.escape(r.check)}</td>'
                    f"<td>{paper}</td><td>{ours}</td><td><b>{r.status}</b></td>"
                    f"<td>{html.escape(r.condition)}</td><td>{margin}</td></tr>")
    return f'<table class="claims">\n{head}\n' + "\n".join(rows) + "\n</table>\n"


def overview_page(*, sources: BookSources, settings: dict) -> str:
    """The front page: the profile, what reproduces and what does not (the claims ledger)."""
    profile = sources.profile
    table = claims_ledger.evaluate(profile, corrupted_dataset=settings.get("corrupted_dataset"), folder=sources.results)
    counts = table["status"].value_counts()
    texts = {c["id"]: " ".join(c["quote"].split()) for c in claims_ledger.load_claims()}
    failing = [f"- `{cid}`: {texts[cid]}" for cid in dict.fromkeys(table[table.status == "FAILS"].claim)]
    not_run = [f"- `{cid}`: {texts[cid]}" for cid in dict.fromkeys(table[table.status == "NOT RUN"].claim)]
    return "\n".join([
        f"# DART results book: {profile} profile", "",
        "Results of the reproducibility suite for *Label Distribution Shift-Aware Prediction Refinement for "
        "Test-Time Adaptation* (DART), as the notebooks computed them. Every number here belongs to this profile:", "",
        f"> **{profile}**: {profile_description(profile=profile)}", "",
        "## What reproduces", "",
        f"The claims ledger checks each quantitative claim of the paper against this profile's results "
        f"(`data/paper/claims.yaml`; reduced profiles test the direction and rough size of an effect, not the "
        f"paper's number; each verdict at {claims_ledger.MARGIN_SE:g} standard errors, see the claims page): "
        f"**{int(counts.get('HOLDS', 0))} HOLDS, {int(counts.get('WITHIN NOISE', 0))} WITHIN NOISE, "
        f"{int(counts.get('FAILS', 0))} FAILS, {int(counts.get('NOT RUN', 0))} NOT RUN** of {len(table)} checks.", "",
        "Claims with a failing check:", "", *(failing or ["- none"]), "",
        "Claims not run on this profile (their data or grid is absent):", "", *(not_run or ["- none"]), "",
        "## The claims ledger", "",
        _claims_html(table),
        "## Pages", "",
        "```{toctree}", ":maxdepth: 1", "", "claims", "gallery", "tables", "deviations", "notebooks", "```", "",
    ])


def gallery_page(*, sources: BookSources) -> tuple[str, list[Path]]:
    """Every figure of the profile as an image with its caption; returns the page and the files
    it shows."""
    pngs = sorted(sources.figures.glob("*.png")) if sources.figures.is_dir() else []
    lines = [f"# Gallery ({sources.profile} profile)", "",
             f"Every figure in `figures/{sources.profile}/` (PDF beside each PNG), captioned with the part of the "
             f"paper it reproduces. Profile: {sources.profile}.", ""]
    if not pngs:
        lines.append(f"No figures in `figures/{sources.profile}/`: run `make reproduce PROFILE={sources.profile}`.")
    for png in pngs:
        caption = FIGURE_CAPTIONS.get(png.stem, png.stem.replace("_", " "))
        lines += [f"## {png.stem}", "", f"```{{figure}} figures/{png.name}", f":alt: {caption}", ":width: 100%", "",
                  f"{caption} ({sources.profile} profile).", "```", ""]
    return "\n".join(lines), pngs


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
    device = ", ".join(sorted(set(ours.device.astype(str))))
    return [f"Ours on {device}, {int(ours.images.iloc[0])} images; the paper's (`_paper`, `flops_g`) on its GPU, "
            "ResNet-26, CIFAR-10-C.", "", markdown_table(side[[k for k in keep if k in side]], digits=3), ""]


def _table1(results: Path, settings: dict) -> str:
    """Table 1 rendered from ``table1.csv`` itself, so the book never shows an older rendering."""
    table1 = results / "table1.csv"
    if not table1.is_file():
        return "Table 1 has not been computed on this profile (notebook 06)."
    frame = read_results(table1)
    methods = [m for m in TABLE1_METHODS if m in set(frame.method)]
    dataset = settings.get("corrupted_dataset", "")
    title = (f"Table 1, {dataset}-LT ({settings.get('profile')} profile: {settings.get('source_arch')}, "
             f"{frame.corruption.nunique()} corruption(s), seed(s) {', '.join(map(str, sorted(set(frame.seed))))}; "
             "paper: ResNet-26, official CIFAR-10-C, 4 seeds)")
    return rendered_table(frame, order=row_order(methods), title=title, corrupted_dataset=dataset)


def tables_page(*, sources: BookSources, settings: dict) -> str:
    """Table 1 with its per-corruption tables, the cost table, then every rendered table of
    ``results/<profile>/tables/``."""
    folder = sources.results / "tables"
    rendered = {p.stem: p.read_text() for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}
    rendered.pop("table1", None)
    lines = [f"# Tables ({sources.profile} profile)", "",
             "Ours beside the paper's where the paper has the cell: `ours (paper; ours - paper)`. Profile: "
             f"{sources.profile}.", "", "## Table 1", "", _table1(sources.results, settings), ""]
    per_corruption = _per_corruption_tables(sources.results)
    if per_corruption:
        lines += ["## Table 1 per corruption (Appendix, Tables 19 to 21)", "", *per_corruption]
    cost = _cost_table(sources.results)
    if cost:
        lines += ["## Cost (Appendix, additional cost)", "", *cost]
    for name, text in rendered.items():
        lines += [f"## {name}", "", text, ""]
    return _unlinked("\n".join(lines))


def notebooks_page(*, sources: BookSources, names: list[str]) -> str:
    """The executed notebooks' table of contents."""
    lines = [f"# Executed notebooks ({sources.profile} profile)", ""]
    if not names:
        lines.append(f"No executed notebooks of this profile: run `python -m dartlib run --profile {sources.profile} "
                     "--publish` to write them to `results/" + sources.profile + "/notebooks/`.")
        return "\n".join(lines) + "\n"
    lines += [f"As they ran on the {sources.profile} profile (outputs included, nothing re-executed).", "",
              "```{toctree}", ":maxdepth: 1", "", *[f"notebooks/{n}" for n in names], "```", ""]
    absent = [p.stem for p in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")) if p.stem not in names]
    if absent:
        numbers = " ".join(n[:2] for n in absent)
        lines += [f"Not yet executed on this profile: {', '.join(f'`{n}`' for n in absent)}. Their results files and "
                  "figures (tables and gallery) may be from an earlier run. To execute and keep them: "
                  f"`python -m dartlib run --profile {sources.profile} --publish {numbers}`.", ""]
    return "\n".join(lines)


def favicon_png(*, size: int = 16) -> bytes:
    """A small PNG (DART green square): with a declared icon the browser does not ask the server
    for /favicon.ico, which a static host answers with 404 and a console error."""
    row = b"\x00" + bytes((0x00, 0x9E, 0x73)) * size
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * size)) + chunk(b"IEND", b"")


SPHINX_CONF = '''# generated by dartlib.reporting.book; edits are overwritten
project = {title!r}
html_favicon = "favicon.png"
extensions = ["myst_nb"]
nb_execution_mode = "off"
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
# MathJax 2 from jupyter-server-mathjax, copied into the site (the book needs no network); it ships
# the STIX-Web fonts only
html_static_path = ["_static"]
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
# messageStyle none: no "Processing math" box over the page's corner while it typesets
mathjax2_config = {{"messageStyle": "none",
                    "tex2jax": {{"inlineMath": [["\\\\(", "\\\\)"]], "processEscapes": True,
                                 "ignoreClass": "document", "processClass": "math|output_area"}},
                    "HTML-CSS": {{"availableFonts": ["STIX-Web"], "preferredFont": "STIX-Web", "webFont": "STIX-Web",
                                 "imageFont": None,
                                 # its blank test font points at about:blank, which Chromium refuses with a console error
                                 "styles": {{"@font-face": {{"font-family": "MathJax_Blank", "src": "local('MathJax_Blank')"}}}}}}}}
html_theme = "alabaster"
html_title = {title!r}
html_theme_options = {{"page_width": "1200px", "sidebar_width": "230px"}}
html_show_sourcelink = False
exclude_patterns = ["_build"]
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]
'''


def write_book_source(*, profile: str, out: Path) -> Path:
    """The Sphinx source tree of ``profile``'s book under ``out`` (replaced); returns it."""
    sources = book_sources(profile=profile)
    settings = load_profile(profile)  # an unknown name lists the valid ones
    if out.exists():
        shutil.rmtree(out)
    (out / "figures").mkdir(parents=True)
    (out / "notebooks").mkdir()
    names = []
    for nb in sorted(sources.notebooks.glob("[0-9][0-9]_*.ipynb")) if sources.notebooks.is_dir() else []:
        shutil.copy2(nb, out / "notebooks" / nb.name)
        names.append(nb.stem)
    gallery, pngs = gallery_page(sources=sources)
    for png in pngs:
        shutil.copy2(png, out / "figures" / png.name)
    pages = {"index": overview_page(sources=sources, settings=settings), "gallery": gallery,
             "tables": tables_page(sources=sources, settings=settings), "deviations": deviations_page(sources=sources),
             "notebooks": notebooks_page(sources=sources, names=names),
             "claims": claims_ledger.claims_page(sources={profile: (sources.results, settings.get("corrupted_dataset"))},
                                                 title=f"The claims ledger ({profile} profile)")}
    for name, text in pages.items():
        (out / f"{name}.md").write_text(text)
    (out / "favicon.png").write_bytes(favicon_png())
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", out / "_static" / "mathjax")
    (out / "conf.py").write_text(SPHINX_CONF.format(title=f"DART results ({profile} profile)"))
    return out


def build_book(*, profile: str, out: Path | None = None, quiet: bool = True) -> Path:
    """Build ``profile``'s book into ``out`` (default ``build/book/<profile>/``): the source tree
    in ``src/`` and the site in ``html/``; returns the site's ``index.html``. Sphinx's warnings are
    errors, so a broken reference fails the build."""
    from sphinx.cmd.build import build_main

    root = out or BOOK_DIR / profile
    src = write_book_source(profile=profile, out=root / "src")
    html_dir = root / "html"
    if html_dir.exists():
        shutil.rmtree(html_dir)
    args = ["-b", "html", "-W", "--keep-going", "-E", "-d", str(root / "doctrees"), str(src), str(html_dir)]
    if quiet:
        args.insert(0, "-q")
    if build_main(args) != 0:
        raise RuntimeError(f"building the {profile} book failed (Sphinx's messages above); source: {src}")
    return html_dir / "index.html"
