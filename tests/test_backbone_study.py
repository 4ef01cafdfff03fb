"""The backbone-strength study (dartlib.studies.backbone_strength): its cells, its summary arithmetic, and the
committed rows it reports."""

from __future__ import annotations

import pandas as pd
import pytest

from dartlib.studies.backbone_strength import (all_study_cells, cell_arch, cross_device, study_cells, study_points, study_table,
                                    trend)
from dartlib.experiments.grid import read_results
from dartlib.paths import REPO_ROOT

CPU = REPO_ROOT / "results" / "cpu"


def test_one_point_holds_the_cost_and_gain_cells():
    cells = study_cells(arch="resnet26-w8", severity=3, corruptions=["snow", "fog"], subset=100)
    assert len(cells) == 2 * (3 + 4)
    assert {(c.shift, c.shift_param) for c in cells} == {("lt", 1.0), ("online-imb", 50.0), ("online-imb", 5000.0)}
    assert not [c for c in cells if c.method == "noadapt" and c.refiner != "none"]
    assert all(cell_arch(c.params) == "resnet26-w8" and c.severity == 3 for c in cells)
    assert all("subset=100" in c.params for c in cells if c.shift == "online-imb")


def test_points_come_width_axis_first_then_milder_severities():
    cells = all_study_cells(corruptions=["snow"], severities=[1, 2, 5])
    points = list(dict.fromkeys((cell_arch(c.params), c.severity) for c in cells))
    assert points == [("resnet26-w8", 5), ("resnet26-w16", 5), ("resnet26-w16", 2), ("resnet26-w16", 1)]


def test_a_cell_without_arch_names_what_is_missing():
    with pytest.raises(ValueError, match="no arch="):
        cell_arch("subset=1000")


class _Context:
    """A TestTimeContext's part that run_cells reads before evaluating (the inputs digest)."""

    batch_size, device = 200, "cpu"

    def __init__(self, name):
        self.name = name

    def inputs(self, cell):
        return f"{self.name}-inputs"

    def save_shared_source(self, *, every=0.0):
        self.saved = every


def test_run_cells_runs_each_cell_with_its_backbones_context(monkeypatch, tmp_path):
    from dartlib.experiments import engine
    from dartlib.experiments.grid import Cell
    from dartlib.studies.backbone_strength import StudyContext

    seen = []
    monkeypatch.setattr(engine, "evaluate_cell", lambda cell, context, progress=False: (
        seen.append((cell.params, context.name)) or {"n": 10, "accuracy": 50.0}))
    study = StudyContext({"resnet26-w8": _Context("w8"), "resnet26-w16": _Context("w16")})
    cells = [Cell("cifar10c", "lt", 1.0, "snow", 5, "bnadapt", params=f"arch={a}") for a in ("resnet26-w8", "resnet26-w16")]
    rows = engine.run_cells(cells, study, path=tmp_path / "study.csv", experiment="backbone_study", progress=False)
    assert seen == [("arch=resnet26-w8", "w8"), ("arch=resnet26-w16", "w16")]
    assert list(rows["inputs"]) == ["w8-inputs", "w16-inputs"]


def test_the_study_context_keeps_every_backbones_shared_forwards_as_the_grid_command_asks():
    from dartlib.studies.backbone_strength import StudyContext

    contexts = {"resnet26-w8": _Context("w8"), "resnet26-w16": _Context("w16")}
    StudyContext(contexts).save_shared_source()  # `grid` calls this after its cells, on any study's context
    assert [c.saved for c in contexts.values()] == [0.0, 0.0]


def _rows(arch, severity, values):
    rows = []
    for (shift, param, method, refiner), accs in values.items():
        for corruption, acc in zip(["snow", "fog"], accs):
            rows.append({"shift": shift, "shift_param": param, "method": method, "refiner": refiner,
                         "corruption": corruption, "severity": severity, "params": f"arch={arch}", "accuracy": acc})
    return rows


def test_points_average_over_corruptions_and_take_differences():
    frame = pd.DataFrame(_rows("resnet26-w8", 5, {
        ("lt", 1.0, "noadapt", "none"): [50, 60], ("lt", 1.0, "bnadapt", "none"): [70, 80],
        ("lt", 1.0, "bnadapt", "dart"): [69, 79], ("online-imb", 50.0, "bnadapt", "none"): [30, 40],
        ("online-imb", 50.0, "bnadapt", "dart"): [50, 62]}))
    point = study_points(frame).iloc[0]
    assert point["bnadapt"] == 75 and point["noadapt"] == 55
    assert point["rho1_cost"] == pytest.approx(1.0)
    assert point["ir50_gain"] == pytest.approx(21.0)


def test_trend_signs_follow_the_points():
    points = pd.DataFrame({"bnadapt": [70, 72, 74], "rho1_cost": [0.9, 0.5, 0.1], "ir50_gain": [20, 22, 25]})
    table = trend(points).set_index("effect")["spearman_vs_bnadapt"]
    assert table["rho1_cost"] == pytest.approx(-1.0) and table["ir50_gain"] == pytest.approx(1.0)


def test_committed_study_is_complete_and_reports_its_measured_trend():
    rows = read_results(CPU / "backbone_study.csv")
    assert len(rows) == 630 and rows["accuracy"].between(0, 100).all()
    points = study_table(study=rows).set_index(["arch", "severity"])
    assert len(points) == 6
    cost = points.loc["resnet26-w16", "rho1_cost"]  # severities 1..5 of the width-16 model
    assert cost.sort_index().is_monotonic_increasing  # the milder the corruption, the smaller DART's cost
    assert points.loc[("resnet26-w16", 5), "rho1_cost"] == pytest.approx(0.76, abs=0.01)
    assert points.loc[("resnet26-w8", 5), "bnadapt"] == pytest.approx(68.94, abs=0.01)


def test_study_cells_equal_the_cpu_computed_rows_of_the_same_streams():
    # the study's g_phi is the former shortcut (STUDIED_REFINER): Table 1's and online imbalance's rows with it are kept in shortcut/
    check = cross_device(study=read_results(CPU / "backbone_study.csv"), table1=read_results(CPU / "shortcut" / "table1.csv"),
                         online=read_results(CPU / "shortcut" / "online_imbalance.csv"), arch="resnet26-w16")
    assert check["cells"].sum() == 7 * 15
    assert check["max_abs"].max() <= 0.011  # one image of 10,000 at most: the study ran on a GPU in fp32
