"""Every figure reads as a reviewer expects: no two of its text boxes (the title, panel titles, axis
labels, tick labels, legend entries) overlap once drawn, and the figures that show estimates carry
their uncertainty and the paper's values where they compare with them. Drawn by the figure
functions themselves on the golden smoke rows and the committed cpu rows (nothing computed)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dartlib.paths import REPO_ROOT
from test_book import _committed_study_figures, _smoke_figures

CPU = REPO_ROOT / "results" / "cpu"


def text_boxes(fig) -> list[tuple[str, object]]:
    """(what, window extent) of every drawn text of ``fig`` a reader reads as a label: the title,
    each panel's titles and axis labels, the tick labels drawn and every legend's title and entries."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [("suptitle", fig._suptitle)] if fig._suptitle is not None else []
    legends = list(fig.legends)
    for i, ax in enumerate(fig.axes):
        texts += [(f"axes {i} title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        texts += [(f"axes {i} x label", ax.xaxis.label), (f"axes {i} y label", ax.yaxis.label)]
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            texts += [(f"axes {i} {name} tick", tick.label1) for tick in axis._update_ticks()]
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
    for j, legend in enumerate(legends):
        texts += [(f"legend {j} entry", t) for t in legend.get_texts()] + [(f"legend {j} title", legend.get_title())]
    return [(f"{what} {t.get_text()!r}", t.get_window_extent(renderer)) for what, t in texts
            if t.get_visible() and t.get_text().strip()]


def overlapping(fig, *, tolerance_px: float = 1.0) -> list[str]:
    """Pairs of text boxes of ``fig`` that overlap by more than ``tolerance_px`` in both directions."""
    boxes = text_boxes(fig)
    found = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            width = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            height = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if width > tolerance_px and height > tolerance_px:
                found.append(f"{a} and {b}")
    return found


def _cpu_figures(tmp_path, monkeypatch) -> dict:
    """Figure 3, the sensitivity figure and the Table 1 gain figure from the committed cpu rows."""
    import matplotlib.pyplot as plt

    from dartlib.experiments.cell_options import cell_options
    from dartlib.experiments.grid import read_results
    from dartlib.experiments.settings import Settings
    from dartlib.reporting import figures
    from dartlib.studies import prediction_deviation, sensitivity, table1

    drawn = {}
    monkeypatch.setattr(figures, "figures_dir", lambda profile: tmp_path)
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    figures.apply_style()
    drawn["fig3_accuracy_vs_rho"] = prediction_deviation.show_figure3(
        pd.read_csv(CPU / "accuracy_vs_rho.csv"), title="cifar10c-LT, mean over 3 corruption(s) (cpu)", profile="cpu")
    rows = read_results(CPU / "sensitivity.csv")
    params = rows.params.fillna("").astype(str)
    alpha = rows[(rows.refiner == "none") | params.str.startswith("alpha=")].copy()
    alpha["refiner"] = [r if r == "none" else f"DART (alpha={cell_options(p)['alpha']:g})"
                        for r, p in zip(alpha.refiner, params[alpha.index])]
    batch = read_results(CPU / "sensitivity_batch.csv")
    batch["column"] = [cell_options(p)["test_batch"] for p in batch.params]
    drawn["sensitivity"] = sensitivity.plot_sensitivity(alpha_frame=alpha, batch_frame=batch,
                                                        settings=Settings.from_profile("cpu"))
    results = table1.with_row_labels(read_results(CPU / "table1.csv"))
    methods = [m for m in table1.TABLE1_METHODS if m in set(results.method)]
    order = table1.row_order(methods)
    gain = table1.dart_gain(table1.accuracy_by_row(results, order), methods)
    paper_gain = table1.dart_gain(table1.paper_table1(order), methods)
    drawn["table1_dart_gain"] = table1.show_dart_gain(gain, paper_gain, rows=results, corrupted_dataset="cifar10c",
                                                      profile="cpu")
    return drawn


@pytest.fixture(scope="module")
def every_figure(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("figures")
    try:
        drawn = {f"smoke {k}": v for k, v in _smoke_figures(tmp, monkeypatch).items()}
        drawn |= {f"cpu {k}": v for k, v in _committed_study_figures(tmp, monkeypatch).items()}
        drawn |= {f"cpu {k}": v for k, v in _cpu_figures(tmp, monkeypatch).items()}
        yield drawn
    finally:
        monkeypatch.undo()


def test_no_two_text_boxes_of_any_figure_overlap(every_figure):
    assert len(every_figure) >= 14, sorted(every_figure)
    problems = [f"{name}: {pair}" for name, fig in every_figure.items() for pair in overlapping(fig)]
    assert not problems, "\n".join(problems)


def test_the_overlap_check_finds_two_titles_drawn_on_each_other():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(3, 2))
    for ax in axes:
        ax.set_title("a title far wider than its panel")
    assert overlapping(fig)
    plt.close(fig)


def _errorbar_half_widths(ax) -> list[float]:
    """Half the length of every error bar drawn on ``ax`` (± 2 SE: twice the SE), in data units."""
    from matplotlib.container import ErrorbarContainer

    out = []
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            for collection in container.lines[2]:
                for (x0, y0), (x1, y1) in collection.get_segments():
                    out.append(max(abs(x1 - x0), abs(y1 - y0)) / 2)
    return out


def test_the_diagnosis_draws_the_paired_se_its_table_prints(every_figure):
    """Its rho = 1 panel's bars are ± 2 of the paired SE the overview's table prints (0.04 to 0.14
    on the committed rows), not the 1.8-point upper bound of rows read without their outcomes."""
    fig = every_figure["cpu diagnosis"]
    widths = _errorbar_half_widths(fig.axes[0])
    assert len(widths) >= 10
    se = [w / 2 for w in widths]
    assert 0.03 <= min(se) and max(se) <= 0.2, sorted(round(s, 3) for s in se)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("ρ = 1\n") and all("\n" in t for t in titles)


def test_estimate_figures_carry_their_se_and_the_papers_values(every_figure):
    fig3 = every_figure["cpu fig3_accuracy_vs_rho"]
    ax = fig3.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"BNAdapt (the paper)", "BNAdapt+DART (the paper)", "NoAdapt (the paper)"} <= set(labels)
    assert "cifar10c" not in ax.get_title() and ax.get_title().startswith("Figure 3")
    widths = _errorbar_half_widths(ax)
    rhos = pd.read_csv(CPU / "accuracy_vs_rho.csv").rho.nunique()
    assert len(widths) == 3 * rhos and all(0.2 < w < 2.5 for w in widths), widths  # every point, ± 2 SE in points
    gain = every_figure["cpu table1_dart_gain"].axes[0]
    assert len(_errorbar_half_widths(gain)) == 8 * 3  # every bar: 8 methods x 3 rho
    assert "± 2 SE" in gain.get_ylabel()


def test_sensitivity_puts_alpha_on_a_log_axis_and_bnadapt_in_the_legend(every_figure):
    fig = every_figure["cpu sensitivity"]
    left = fig.axes[0]
    assert left.get_xscale() == "symlog"
    ticks = {t.get_text(): t.get_position()[0] for t in left.get_xticklabels()}
    x = {a: left.transData.transform((float(a), 0))[0] for a in ("0", "0.01", "0.1", "1")}
    # a decade takes the same width (log), and alpha 0 has its own place left of 0.01
    assert math.isclose(x["0.1"] - x["0.01"], x["1"] - x["0.1"], rel_tol=1e-6)
    assert x["0"] < x["0.01"] and set(ticks) >= {"0", "0.01", "0.1", "1"}
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert any(text.startswith("BNAdapt (") for text in legend), legend
    assert len(_errorbar_half_widths(left)) >= 5 * 3
