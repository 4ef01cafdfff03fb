"""The results book's generated pages (the site itself is checked in a browser, test_browser.py)."""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib

import pandas as pd
import pytest

from dartlib.paths import REPO_ROOT
from dartlib.experiments.settings import Settings
from dartlib.profiles import load_profile
from dartlib.registry import UnknownNameError
from dartlib.book import gallery, site as book


def test_every_committed_figure_has_a_caption_naming_what_it_reproduces():
    names = {p.stem for p in (REPO_ROOT / "figures").glob("*/*.png")}
    assert names, "no committed figures found"
    assert sorted(names - set(gallery.FIGURE_CAPTIONS)) == []


def test_markdown_table_rounds_and_marks_missing_cells():
    frame = pd.DataFrame({"a": [1.234, float("nan")], "b": ["x", "y"]}, index=pd.Index(["r1", "r2"], name="method"))
    assert book.markdown_table(frame).splitlines() == [
        "| method | a | b |", "| --- | --- | --- |", "| r1 | 1.2 | x |", "| r2 | – | y |"]


def test_repository_links_become_code_spans_and_web_links_stay():
    text = "[scale-out](scale-out.md), [paper](https://example.org/paper), [csv](../results/cpu/a.csv), [x](#here)"
    assert book._unlinked(text) == ("scale-out (`scale-out.md`), [paper](https://example.org/paper), "
                                    "csv (`results/cpu/a.csv`), [x](#here)")


def test_favicon_is_a_png_that_decodes():
    data = (book.ASSETS / "favicon.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (16, 16)
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    assert len(zlib.decompress(data[idat + 4:idat + 4 + length])) == 16 * (1 + 3 * 16)


def test_the_cpu_pages_state_the_profile_the_ledger_and_the_tables():
    sources = book.book_sources(profile="cpu")
    overview = book.overview_page(sources=sources, settings=Settings.from_profile("cpu"))
    assert "cpu" in overview and "CIFAR-10" in overview
    # the committed seed replicas of the profile's own g_phi, the paper's (notebook 15): three seeds of DART's rho = 1
    # cost beside the paper's 0.0
    assert "| CIFAR-10C-LT / rho 1 / BNAdapt+DART − BNAdapt | -1.1 ± 0.2 | 3 | +0.0 |" in overview
    assert f"Over the {len(book.ledger_table(sources=sources, settings=Settings.from_profile('cpu')))} checks: HOLDS: " in overview
    tables = book.tables_page(sources=sources, settings=Settings.from_profile("cpu"))
    # rendered from results/cpu/table1.csv with its per-image outcomes (clustered SE; every row has them)
    assert "| BNAdapt | 71.4 ± 0.30 SE (85.2; -13.8) |" in tables
    assert "| SAR+DART | 71.1 ± 0.30 SE (86.7; -15.6) | 71.1 ± 0.48 SE (86.4; -15.3) |" in tables
    for heading in ("## Table 1", "## Table 1 per corruption (Appendix, Tables 19 to 21)", "### rho = 100",
                    "## Cost (Appendix, additional cost)"):
        assert heading in tables
    deviations = book.deviations_page(sources=sources)
    assert "| method | setting | paper | reference code | ours | why |" in deviations
    assert "](" not in deviations.replace("](http", "")  # no repository link left to break


def test_an_unknown_profile_lists_the_valid_names(tmp_path):
    with pytest.raises(UnknownNameError, match="smoke, cpu"):
        book.write_book_source(profile="cpuu", out=tmp_path / "src")


# --- the gallery, the figure style and the captions -------------------------------------------------

def test_the_gallery_follows_the_papers_order_with_readable_titles():
    text, pngs = book.gallery_page(sources=book.book_sources(profile="cpu"))
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == len(pngs) == len(list((REPO_ROOT / "figures" / "cpu").glob("*.png")))
    stems = {p.stem for p in pngs}
    assert not [h for h in headings if h in stems or h.replace(" ", "_") in stems or " " not in h]  # titles, not file names
    numbered = [int(h.split()[1].rstrip(":,")) for h in headings if h.startswith("Figure ")]
    assert numbered == sorted(numbered) and numbered[:3] == [1, 3, 4]
    assert headings.index("Figure 1: Confusion patterns of BNAdapt under label shift") == 0
    first_own = next(i for i, h in enumerate(headings) if not h.startswith(("Figure", "Table")))
    assert all(not h.startswith(("Figure", "Table")) for h in headings[first_own:]), "paper figures come first"


def test_every_figure_is_shown_at_one_scale(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dartlib.reporting import figures

    figures.apply_style()
    widths = {}
    for name, inches in (("full", figures.WIDTH), ("half", figures.HALF_WIDTH)):
        fig, ax = plt.subplots(figsize=(inches, 3))
        ax.plot([0, 1], [0, 1])
        fig.savefig(tmp_path / f"{name}.png", bbox_inches=None)
        plt.close(fig)
        widths[name] = gallery.shown_width_percent(tmp_path / f"{name}.png")
    assert widths["full"] == 100
    assert abs(widths["half"] - 100 * figures.HALF_WIDTH / figures.WIDTH) <= 2  # bbox "tight" trims a little


def test_notebook_06_displays_table_1_as_markdown_that_renders_as_a_table():
    from IPython.core.formatters import format_display_data

    from dartlib.studies.table1 import MarkdownText

    data, _ = format_display_data(MarkdownText("| a | b |\n|---|---|\n| 1 | 2 |"))
    assert data["text/markdown"] == data["text/plain"] == "| a | b |\n|---|---|\n| 1 | 2 |"
    for path in (REPO_ROOT / "notebooks" / "06_table1_main.ipynb",
                 REPO_ROOT / "results" / "cpu" / "notebooks" / "06_table1_main.ipynb"):
        import nbformat

        cell = next(c for c in nbformat.read(path, as_version=4).cells if "print_rendered_table(" in c.source)
        assert [o.output_type for o in cell.outputs] == ["display_data"], path
        assert cell.outputs[0].data["text/markdown"].splitlines()[2].startswith("| method |"), path


def _figure_text(fig) -> str:
    from matplotlib.text import Text

    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text())


def _smoke_figures(tmp_path, monkeypatch) -> dict:
    """The figures that stored (golden smoke) results or a synthetic input can draw, by file name:
    the figure as its module draws it."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    import matplotlib.pyplot as plt

    from dartlib.experiments.cell_options import cell_options
    from dartlib.experiments.grid import read_results
    from dartlib.experiments.settings import Settings
    from dartlib.reporting import data_views, figures
    from dartlib.studies import appendix_settings, online_imbalance, prediction_deviation, sensitivity, table1

    drawn = {}
    monkeypatch.setattr(figures, "figures_dir", lambda profile: tmp_path)
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    real_save = figures.save_figure

    def keep(fig, *, profile, name):
        drawn[name] = fig
        return real_save(fig, profile=profile, name=name)

    golden = REPO_ROOT / "tests" / "golden" / "smoke"
    figures.apply_style()
    settings = Settings.from_profile("smoke")
    for module in (data_views, online_imbalance, sensitivity, appendix_settings, prediction_deviation, table1):
        monkeypatch.setattr(module, "save_figure", keep)
    online_imbalance.plot_online_imbalance(results=read_results(golden / "online_imbalance.csv"), settings=settings)
    rows = read_results(golden / "sensitivity.csv")
    params = rows.params.fillna("").astype(str)
    alpha = rows[(rows.refiner == "none") | params.str.startswith("alpha=")].copy()
    alpha["refiner"] = [r if r == "none" else f"DART (alpha={cell_options(p)['alpha']:g})"
                        for r, p in zip(alpha.refiner, params[alpha.index])]
    batch = read_results(golden / "sensitivity_batch.csv")
    batch["column"] = [cell_options(p)["test_batch"] for p in batch.params]
    sensitivity.plot_sensitivity(alpha_frame=alpha, batch_frame=batch, settings=settings)
    more = read_results(golden / "more_settings.csv")
    appendix_settings.plot_more_settings(imb=more[more.experiment == "app_cifar10c_imb"],
                                         mixed=more[more.experiment == "app_mixed"], settings=settings)
    prediction_deviation.show_figure4(pd.read_csv(golden / "prediction_deviation.csv"), title="t", profile="smoke")
    prediction_deviation.show_figure3(pd.read_csv(golden / "accuracy_vs_rho.csv"), title="t", profile="smoke")
    monkeypatch.setattr(data_views, "corrupt", lambda images, **kw: images)  # the layout, not the corruptions
    image = np.zeros((28, 28, 3), dtype=np.uint8)
    drawn["data_corruptions_cifar10"] = data_views.plot_corruption_grid(image, title="t", seed=0)
    drawn["data_corruptions_fmnist"] = drawn["data_corruptions_cifar10"]
    labels = np.random.default_rng(0).integers(0, 10, 6000)
    data_views.show_dirichlet_figures(labels, dataset="d", delta=10.0, n_chunks=25, batch_size=64, k=10, seed=0,
                                         profile="smoke")
    return drawn


# what a caption may name, and the text its figure must then show
CAPTION_TERMS = {
    r"\balpha\b": r"alpha|α", r"\brho\b": r"rho|ρ", r"batch size": r"batch size", r"epoch": r"epoch",
    r"hidden": r"hidden", r"imbalance ratio|\bIR\b": r"imbalance ratio|\bIR\b", r"\bNoAdapt\b": r"NoAdapt",
    r"\bBNAdapt\+DART\b": r"BNAdapt\+DART", r"DART-split": r"DART-split", r"\bTENT\b": r"TENT",
    r"D\(u, p_bar\)": r"D\(u, p_bar\)", r"prediction deviation": r"prediction deviation", r"i\.i\.d\.": r"i\.i\.d\.",
    r"Dirichlet": r"Dirichlet", r"mixed domains": r"mixed domains", r"CIFAR-10C-imb": r"imb",
}


def _severities(text: str) -> set[int]:
    found = {int(n) for n in re.findall(r"severity (\d)", text)}
    for low, high in re.findall(r"severities (\d) to (\d)", text):
        found |= set(range(int(low), int(high) + 1))
    return found


def test_each_caption_names_only_what_its_figure_plots(tmp_path, monkeypatch):
    drawn = _smoke_figures(tmp_path, monkeypatch)
    entries = {f.stem: f for f in gallery.GALLERY}
    assert len(drawn) >= 9
    problems = []
    for stem, fig in drawn.items():
        caption, shown = entries[stem].caption, _figure_text(fig)
        for named, expected in CAPTION_TERMS.items():
            if re.search(named, caption) and not re.search(expected, shown):
                problems.append(f"{stem}: the caption names {named!r}, the figure shows no {expected!r}")
        if _severities(caption) != _severities(shown):
            problems.append(f"{stem}: caption severities {sorted(_severities(caption))}, "
                            f"figure severities {sorted(_severities(shown))}")
    assert not problems, "\n".join(problems)


def _assert_the_one_style(drawn: dict) -> None:
    """Each figure's layout engine, width and font sizes are figures.py's."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.text import Text

    from dartlib.reporting import figures

    allowed = set(figures.FONT_SIZES.values()) | {figures.ANNOTATION_SIZE}
    for stem, fig in drawn.items():
        assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine), stem
        assert round(fig.get_figwidth(), 2) in (figures.WIDTH, figures.HALF_WIDTH), stem
        sizes = {t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()}
        assert sizes <= allowed, (stem, sorted(sizes - allowed))


def test_every_figure_uses_the_one_style(tmp_path, monkeypatch):
    _assert_the_one_style(_smoke_figures(tmp_path, monkeypatch))
    # sizes, fonts and layout come from figures.py only: no module that draws sets its own
    drawing = [m for layer in ("reporting", "studies", "book") for m in sorted((REPO_ROOT / "dartlib" / layer).glob("*.py"))
               if m.name != "figures.py" and "plt." in m.read_text()]
    assert len(drawing) >= 12, [m.name for m in drawing]
    for module in drawing:
        source = module.read_text()
        assert "tight_layout" not in source, module.name
        assert not re.search(r"fontsize=\d", source), module.name
        assert not re.search(r"figsize=\(\d", source), module.name


def test_the_overview_shows_the_seed_replicas_beside_the_papers_mean_and_std(tmp_path):
    """Two seeds of notebook 15's replicas (fixture rows in the results format) make the overview
    print the seed table with DART's effect seed by seed; one seed prints nothing."""
    from dartlib.experiments.grid import SCHEMA, row_key
    from dartlib.experiments.settings import Settings

    rows = []
    for name, seed, dart in (("table1", 0, 70.0), ("seed1", 1, 71.0)):
        for corruption in ("fog", "snow"):
            for refiner, acc in (("none", 71.0), (name, dart)):
                rows.append(dict(experiment="diagnosis", dataset="cifar10c", shift="lt", shift_param=1.0,
                                 corruption=corruption, severity=5, method="bnadapt", refiner=refiner, params="",
                                 seed=seed, n=10000, accuracy=acc, seconds=1.0, key=f"{name}/{seed}/{corruption}/{refiner}",
                                 inputs="x"))
    rows = [{**r, "key": row_key({**r, "key": ""})} for r in rows]  # a row's key is its fields' hash
    pd.DataFrame(rows)[SCHEMA].to_csv(tmp_path / "diagnosis.csv", index=False)
    sources = book.BookSources(profile="cpu", notebooks=tmp_path, figures=tmp_path, results=tmp_path)
    from dartlib.experiments.settings import SHORTCUT

    # a profile whose own g_phi is the former shortcut reads that refiner's replicas ("table1", "seed1", "seed2")
    settings = Settings.from_profile("cpu", lt_rhos=[1], online_irs=[], **SHORTCUT)
    section = "\n".join(book._seed_section(sources=sources, settings=settings))
    assert "**Over seeds.**" in section and "g_phi 10 epochs at alpha 30" in section
    assert "| CIFAR-10C-LT / rho 1 / BNAdapt+DART − BNAdapt | -0.5 ± 0.5 | 2 | +0.0 |" in section
    # one whose own is the paper's reads the paper's replicas, which these rows do not hold
    paper = "\n".join(book._seed_section(sources=sources, settings=settings.replace(dart_epochs=50, dart_alpha=0.1)))
    assert "g_phi 50 epochs at alpha 0.1" in paper and "-0.5 ± 0.5" not in paper
    pd.DataFrame(rows[:4])[SCHEMA].to_csv(tmp_path / "diagnosis.csv", index=False)  # seed 0 only
    assert book._seed_section(sources=sources, settings=settings) == []


def test_the_overview_shows_the_diagnosis_of_the_failing_claims():
    """The cpu book's overview holds notebook 15's diagnosis table, read from the committed rows
    (results/cpu/diagnosis.csv): the 50-epoch refiner's rho = 1 cost and IR 5000 margin as
    notebook 15 prints them; a profile without diagnosis rows gets no section."""
    results = REPO_ROOT / "results" / "cpu"
    sources = book.BookSources(profile="cpu", notebooks=results / "notebooks", figures=results, results=results)
    section = "\n".join(book._diagnosis_section(sources=sources))
    assert section.startswith("**Why DART's cost at ρ = 1 and its margin over NoAdapt on CIFAR-10C-imb fail.**")
    row = next(line for line in section.split("<tr>") if line.startswith("<td>epochs</td><td>50 "))
    assert "<td>-0.22 ± 0.04</td><td>+0.54 *</td>" in row and "<td>-2.78 ± 0.26</td><td>+16.85 *</td>" in row
    assert book._diagnosis_section(sources=dataclasses.replace(sources, results=REPO_ROOT / "results" / "gpu")) == []


def _committed_study_figures(tmp_path, monkeypatch) -> dict:
    """Notebook 14's and 15's figures drawn from the committed cpu rows (nothing computed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dartlib.studies.backbone_strength import study_results, study_table
    from dartlib.studies.diagnosis import diagnosis_results
    from dartlib.experiments.grid import read_results
    from dartlib.reporting import figures
    from dartlib.studies import diagnosis_report
    from dartlib.studies.backbone_strength import plot_study

    monkeypatch.setattr(figures, "figures_dir", lambda profile: tmp_path)
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    figures.apply_style()
    cpu = load_profile("cpu")
    rows = study_results(profile="cpu", compute=False, archs=cpu["study_archs"], severities=cpu["study_severities"],
                         progress=False)
    gpu = REPO_ROOT / "results" / "gpu"
    points = study_table(study=rows, gpu_table1=read_results(gpu / "table1.csv"),
                         gpu_online=read_results(gpu / "online_imbalance.csv"))
    rows, _ = diagnosis_results(profile="cpu", compute=False, names=cpu["diagnosis_variants"], progress=False)
    return {"backbone_study": plot_study(points, profile="cpu"),
            "diagnosis": diagnosis_report.diagnosis_figure(rows=rows, profile="cpu")}


def test_the_diagnosis_and_backbone_figures_use_the_one_style(tmp_path, monkeypatch):
    """Their width, font sizes and layout are figures.py's, each has a title, every line the
    diagnosis draws is in its legend, and no two point labels of the backbone study overlap."""
    from matplotlib.text import Annotation

    drawn = _committed_study_figures(tmp_path, monkeypatch)
    _assert_the_one_style(drawn)
    assert all(fig.get_suptitle() for fig in drawn.values()), "a figure without a title"
    diagnosis = drawn["diagnosis"]
    legend = {t.get_text() for leg in diagnosis.legends for t in leg.get_texts()}
    drawn_labels = {line.get_label() for ax in diagnosis.axes for line in ax.get_lines()
                    if not line.get_label().startswith("_")}
    assert {"Table 1's refiner", "the paper"} <= drawn_labels <= legend | {"variant, ± 2 SE"}, (drawn_labels, legend)
    assert "variant, ± 2 SE" in legend
    study = drawn["backbone_study"]
    study.canvas.draw()
    renderer = study.canvas.get_renderer()
    for ax in study.axes:
        boxes = [(a.get_text(), a.get_window_extent(renderer)) for a in ax.texts if isinstance(a, Annotation)]
        overlapping = [(p[0], q[0]) for i, p in enumerate(boxes) for q in boxes[i + 1:] if p[1].overlaps(q[1])]
        assert not overlapping, f"point labels overlap in backbone_study: {overlapping}"


def test_table_columns_say_what_they_are_and_tables_are_titled_by_content():
    table = "**t**\n\n| method | 1 | 10 | LT 100 | imb 20 | hidden 250, rho=1 |\n|---|---|---|---|---|---|\n| a | 1 | 10 | 2 | 3 | 4 |"
    headed = book.headed_columns(table, kind="rho").splitlines()
    assert headed[2] == "| method | rho = 1 | rho = 10 | LT, rho = 100 | imb, IR 20 | hidden 250, rho=1 |"
    assert headed[4] == "| a | 1 | 10 | 2 | 3 | 4 |"  # the cells unchanged
    assert book.column_heading("5000", kind="IR") == "IR 5000"
    stems = {p.stem for p in REPO_ROOT.glob("results/*/tables/*.md")}
    assert stems and sorted(stems - set(book.RENDERED_TABLES)) == []  # every rendered table has a title
    assert book.table_title("app_alpha")[0] == "Appendix: sensitivity to alpha"
    page = book.tables_page(sources=book.book_sources(profile="cpu"), settings=Settings.from_profile("cpu"))
    titles = [line[3:] for line in page.splitlines() if line.startswith("## ")]
    assert not [t for t in titles if t in stems], titles
    assert "| method | rho = 1 | rho = 10 | rho = 100 |" in page
    assert "| method | IR 1 | IR 20 | IR 50 | IR 5000 |" in page


def test_the_smoke_book_shows_the_last_runs_notebooks_and_says_what_to_run_without_results(tmp_path):
    """The smoke book shows the committed notebooks, each replaced by the last run's executed copy
    (runs/smoke/) where there is one; with no results it says to run `make reproduce` first."""
    committed, runs, results = tmp_path / "notebooks", tmp_path / "runs", tmp_path / "results"
    for folder in (committed, runs, results):
        folder.mkdir()
    for name in ("00_data", "01_toy"):
        (committed / f"{name}.ipynb").write_text("{}")
    (runs / "01_toy.ipynb").write_text("{}")
    sources = book.BookSources(profile="smoke", notebooks=committed, figures=tmp_path, results=results, runs=runs)
    assert book.executed_notebooks(sources) == [committed / "00_data.ipynb", runs / "01_toy.ipynb"]
    assert not book.has_results(sources)
    assert "`make reproduce`" in book.missing_results_note("smoke")
    assert "`make reproduce PROFILE=cpu`" in book.missing_results_note("cpu")
    (results / "table1.csv").write_text("x\n")
    assert book.has_results(sources)


def test_the_books_table1_shows_the_profiles_own_cells_not_other_rows_of_its_file(tmp_path):
    """A results file may hold rows of another configuration (the gpu profile's holds its former
    refiner's, params alpha=30): the book's Table 1 reads only the profile's own cells."""
    from dartlib.experiments.grid import Cell

    settings = Settings.from_profile("cpu")
    rows = pd.read_csv(REPO_ROOT / "results" / "cpu" / "table1.csv", dtype=str, keep_default_na=False)
    rows.to_csv(tmp_path / "table1.csv", index=False)
    alone, alone_per_corruption = book._table1(tmp_path, settings), book._per_corruption_tables(tmp_path, settings)
    other = rows[(rows.method == "bnadapt") & (rows.refiner == "dart")].assign(params="alpha=30", accuracy="0.0")
    other["key"] = [Cell(r.dataset, r.shift, float(r.shift_param), r.corruption, int(r.severity), r.method, r.refiner,
                         r.params, int(r.seed)).key for r in other.itertuples()]  # rows as their own cells wrote them
    pd.concat([rows, other]).to_csv(tmp_path / "table1.csv", index=False)
    assert "BNAdapt+DART" in alone and book._table1(tmp_path, settings) == alone
    assert book._per_corruption_tables(tmp_path, settings) == alone_per_corruption
