"""The table renderer against golden files (tests/golden/report_table.*)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dartlib.reporting import tables as report

GOLDEN = Path(__file__).parent / "golden"


def _frames():
    rows = []
    for seed, noise in ((0, -0.2), (1, 0.2)):
        for rho, bn, dart in ((1, 85.0, 84.8), (100, 70.0, 85.0)):
            rows.append({"method": "bnadapt", "refiner": "none", "shift_param": float(rho), "seed": seed, "accuracy": bn + noise})
            rows.append({"method": "bnadapt", "refiner": "dart", "shift_param": float(rho), "seed": seed, "accuracy": dart + noise})
        rows.append({"method": "noadapt", "refiner": "none", "shift_param": 1.0, "seed": seed, "accuracy": 71.0})
    ours = pd.DataFrame(rows)
    paper = pd.DataFrame([
        {"method": "noadapt", "refiner": "none", "shift_param": 1.0, "accuracy": 71.7, "std": 0.0},
        {"method": "bnadapt", "refiner": "none", "shift_param": 1.0, "accuracy": 85.2, "std": 0.0},
        {"method": "bnadapt", "refiner": "dart", "shift_param": 1.0, "accuracy": 85.2, "std": 0.1},
        {"method": "bnadapt", "refiner": "none", "shift_param": 100.0, "accuracy": 63.0, "std": 0.1},
        {"method": "bnadapt", "refiner": "dart", "shift_param": 100.0, "accuracy": 81.1, "std": 0.4},
    ])
    return ours, paper


def test_compare_numbers():
    ours, paper = _frames()
    table = report.compare(ours, paper)
    assert list(dict.fromkeys(table.index.get_level_values(0))) == ["BNAdapt", "BNAdapt+DART", "NoAdapt"]
    e = table.loc[("BNAdapt+DART", "100")]
    assert e["ours"] == pytest.approx(85.0) and e["ours_std"] == pytest.approx(0.2)
    assert e["paper"] == 81.1 and e["delta"] == pytest.approx(3.9)
    assert table.loc[("NoAdapt", "1"), "delta"] == pytest.approx(-0.7)


@pytest.mark.parametrize("fmt,ext", [("markdown", "md"), ("latex", "tex"), ("csv", "csv")])
def test_render_matches_golden(fmt, ext):
    ours, paper = _frames()
    text = report.render(report.compare(ours, paper), fmt=fmt, title="toy")
    assert text == (GOLDEN / f"report_table.{ext}").read_text()


def test_unknown_format_lists_the_valid_ones():
    ours, paper = _frames()
    with pytest.raises(ValueError, match="valid: csv, markdown, latex"):
        report.render(report.compare(ours, paper), fmt="html")


def test_row_labels():
    assert report.row_label("note", "none") == "NOTE"
    assert report.row_label("bnadapt", "dart-split") == "BNAdapt+DART-split"
    assert report.row_label("bnadapt", "dart-additive") == "BNAdapt+dart-additive"


def test_row_order():
    ours, paper = _frames()
    table = report.compare(ours, paper, row_order=["NoAdapt", "BNAdapt", "BNAdapt+DART"])
    assert list(dict.fromkeys(table.index.get_level_values(0))) == ["NoAdapt", "BNAdapt", "BNAdapt+DART"]


def test_beside_paper_averages_per_seed_and_writes(tmp_path, monkeypatch):
    import pandas as pd

    from dartlib.reporting import tables as report

    monkeypatch.setattr(report, "results_dir", lambda profile: tmp_path / profile)
    rows = pd.DataFrame({"method": "bnadapt", "refiner": "none", "shift_param": 1.0, "seed": [0, 0, 1, 1],
                         "accuracy": [80.0, 90.0, 84.0, 86.0]})
    table = report.beside_paper(rows, None, profile="smoke", name="t", title="t")
    assert table.loc[("BNAdapt", "1"), "ours"] == 85.0 and table.loc[("BNAdapt", "1"), "ours_std"] == 0.0
    assert (tmp_path / "smoke" / "tables" / "t.md").is_file()


def test_beside_paper_drops_the_delta_where_our_mean_covers_other_corruptions(tmp_path, monkeypatch):
    import pandas as pd

    from dartlib.reporting import tables as report

    monkeypatch.setattr(report, "results_dir", lambda profile: tmp_path / profile)
    rows = pd.DataFrame({"method": ["bnadapt"] * 3 + ["tent"] * 2, "refiner": "none", "shift_param": 1.0, "seed": 0,
                         "corruption": ["a", "b", "c", "a", "b"], "accuracy": [70.0, 80.0, 90.0, 60.0, 70.0]})
    paper = pd.DataFrame({"method": ["bnadapt", "tent"], "refiner": "none", "shift_param": 1.0, "corruption": "mean",
                          "accuracy": [81.0, 66.0], "std": [0.5, 0.5]})
    full = report.beside_paper(rows, paper, profile="cpu", name="t", title="t", paper_covers=["a", "b", "c"])
    assert full.loc[("BNAdapt", "1"), "delta"] == -1.0
    assert full.loc[("TENT", "1"), "paper"] == 66.0 and np.isnan(full.loc[("TENT", "1"), "delta"])
    assert full.loc[("TENT", "1"), "ours"] == 65.0
    text = (tmp_path / "cpu" / "tables" / "t.md").read_text()
    assert "| TENT | 65.0 (66.0; n/c) |" in text and "-1.0" not in text.split("| TENT |")[1]
    assert "| BNAdapt | **80.0** (81.0; -1.0) |" in text and "n/c: not compared" in text
    assert "n/c" not in report.render(report.compare(rows[rows.method == "bnadapt"], paper), fmt="markdown")
    unchecked = report.beside_paper(rows, paper, profile="cpu", name="t", title="t")
    assert unchecked.loc[("TENT", "1"), "delta"] == -1.0


def test_a_single_seed_cell_shows_its_value_without_a_spread():
    ours, paper = _frames()
    one = ours[ours.seed == 0]
    text = report.render(report.compare(one, paper), fmt="markdown")
    assert "| BNAdapt | **84.8** (85.2; -0.4) | 69.8 (63.0; +6.8) |" in text
    assert "±" not in text.split("\n\n")[0]
    assert "± 0.2" in report.render(report.compare(ours, paper), fmt="markdown")


def test_more_settings_figure_labels_the_methods_as_the_tables_do(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from dartlib.experiments.grid import read_results
    from dartlib.experiments.settings import Settings
    from dartlib.reporting import figures
    from dartlib.studies.appendix_settings import plot_more_settings

    monkeypatch.setattr(figures, "figures_dir", lambda profile: tmp_path)
    rows = read_results(Path(__file__).parent / "golden" / "smoke" / "more_settings.csv")
    settings = Settings.from_params({"profile": "smoke", "corrupted_dataset": "fmnistc"})
    fig = plot_more_settings(imb=rows[rows.experiment == "app_cifar10c_imb"],
                             mixed=rows[rows.experiment == "app_mixed"], settings=settings)
    bars = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert bars == ["NoAdapt", "BNAdapt", "BNAdapt+DART", "ROID", "ROID+DART"]  # the grid's order, not A-Z
    curves = fig.axes[0].get_legend().get_texts()
    assert [t.get_text().split(" (")[0] for t in curves] == ["BNAdapt", "BNAdapt+DART", "TENT", "TENT+DART"]
    assert (tmp_path / "more_settings.png").is_file()


def test_sensitivity_figure_labels_the_methods_as_the_tables_do(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from dartlib.experiments.settings import Settings
    from dartlib.reporting import figures
    from dartlib.studies.sensitivity import plot_sensitivity

    monkeypatch.setattr(figures, "figures_dir", lambda profile: tmp_path)
    cell = dict(dataset="d", shift="lt", corruption="fog", severity=5, params="", seed=0, n=1000)  # a results row's
    alpha_frame = pd.DataFrame({"method": "bnadapt", "shift_param": 1.0, "accuracy": [80.0, 81.0, 82.0],
                                "refiner": ["none", "DART (alpha=0)", "DART (alpha=1)"], **cell})
    methods = [("noadapt", "none"), ("bnadapt", "none"), ("bnadapt", "dart"), ("tent", "none"), ("tent", "dart")]
    batch_frame = pd.DataFrame([{"method": m, "refiner": r, "column": b, "accuracy": 70.0 + i + b / 100,
                                 "shift_param": float("nan"), **cell}
                                for b in (16, 64) for i, (m, r) in enumerate(methods)])
    fig = plot_sensitivity(alpha_frame=alpha_frame, batch_frame=batch_frame,
                           settings=Settings.from_params({"profile": "smoke", "alpha_values": [0, 1]}))
    curves = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert curves == ["NoAdapt", "BNAdapt", "BNAdapt+DART", "TENT", "TENT+DART"]
    assert [c.lines[0].get_ydata()[0] for c in fig.axes[1].containers] == [70.16, 71.16, 72.16, 73.16, 74.16]
    # each point ± 2 SE: without per-image outcomes the binomial bound, 2 sqrt(a (100 - a) / n)
    bar = fig.axes[1].containers[0].lines[2][0].get_segments()[0]
    assert abs((bar[1][1] - bar[0][1]) / 2 - 2 * (70.16 * 29.84 / 1000) ** 0.5) < 1e-9
    assert (tmp_path / "sensitivity.png").is_file()


def test_a_single_seed_cell_shows_its_standard_error_a_bound_without_outcomes():
    """One seed has no spread over seeds: the table shows the SE of the mean over the corruptions
    it averages (analysis.noise), marked SE; without per-image outcomes it is the upper bound
    sum(sqrt(a(100 - a)/n)) / m, marked ≤; with them, clustered by image."""
    import numpy as np

    from dartlib.experiments.outcomes import CellOutcomes

    ours = pd.DataFrame([
        {"method": "bnadapt", "refiner": "none", "shift_param": 1.0, "corruption": c, "seed": 0, "accuracy": a,
         "n": 10000, "dataset": "d", "key": c, "inputs": "x"} for c, a in (("fog", 80.0), ("snow", 60.0))])
    table = report.table_beside_paper(ours, None)
    e = table.loc[("BNAdapt", "1")]
    assert e["ours"] == pytest.approx(70.0) and e["ours_n"] == 1
    assert e["ours_se"] == pytest.approx(((80 * 20 / 10000) ** 0.5 + (60 * 40 / 10000) ** 0.5) / 2)
    assert "**70.0** ± ≤0.44 SE" in report.render(table)
    # the same images right under both corruptions where snow is right: per-image means 1, 0.5, 0
    order = np.arange(10000)
    outcomes = {("fog", "x"): CellOutcomes.from_stream(order=order, correct=order < 8000, size=10000),
                ("snow", "x"): CellOutcomes.from_stream(order=order, correct=order < 6000, size=10000)}
    e = report.table_beside_paper(ours, None, outcomes=outcomes).loc[("BNAdapt", "1")]
    z = np.select([order < 6000, order < 8000], [1.0, 0.5], 0.0)
    assert e["ours_se"] == pytest.approx(100 * z.std(ddof=1) / 100)
    assert not e["ours_se_bound"]
