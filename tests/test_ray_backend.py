"""The Ray backend gives the local backend's rows, bit for bit, on a local Ray instance."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from dartlib.experiments.grid import Cell, read_results, run_grid
from dartlib.experiments.settings import Settings


def _smoke_grid():
    """A handful of the smoke profile's Table 1 cells and the factory of their shared context."""
    from dartlib.experiments.distributed import ContextFactory
    from dartlib.experiments.engine import prepare_context
    from dartlib.studies.table1 import profile_cells
    from dartlib.models.checkpoints import checkpoint_path
    from dartlib.paths import NOTEBOOKS_DIR
    from dartlib.profiles import load_profile
    from dartlib.runner import notebook_parameters

    params = {**notebook_parameters(NOTEBOOKS_DIR / "06_table1_main.ipynb"), **load_profile("smoke")}
    checkpoint = checkpoint_path(dataset=params["source_dataset"], arch=params["source_arch"],
                                 recipe=params["source_recipe"], seed=params["seed"])
    assert checkpoint.is_file(), f"the committed smoke source model is not at {checkpoint} (git checkout -- data/checkpoints)"
    settings = Settings.from_params(params)
    factory = ContextFactory(prepare_context, {"settings": settings})
    cells = [c for c in profile_cells(settings) if c.method in ("noadapt", "bnadapt") and c.shift_param == 100.0]
    return cells, factory


def test_ray_rows_equal_the_local_rows_and_a_failed_cell_spares_the_others(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    from dartlib.experiments.distributed import CellsFailed, run_grid_ray
    from dartlib.experiments.engine import evaluate_cell

    cells, factory = _smoke_grid()
    context = factory()
    local = run_grid(cells, lambda c: evaluate_cell(c, context), path=tmp_path / "local.csv", experiment="table1",
                     progress=False, inputs=context.inputs)
    broken = Cell(**{**cells[-1].__dict__, "refiner": "absent"})
    monkeypatch.setenv("RAY_worker_niceness", "0")  # as run_grid_ray starts Ray: workers at the driver's priority
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        with pytest.raises(CellsFailed, match=r"1 cell\(s\) failed: bnadapt\+absent") as failed:
            run_grid_ray([*cells, broken], factory, path=tmp_path / "ray.csv", experiment="table1", progress=False,
                         workers=2)
        assert "no refiner 'absent'" in failed.value.failures[0][1]  # the worker's traceback
        first = read_results(tmp_path / "ray.csv")
        resumed = run_grid_ray(cells, factory, path=tmp_path / "ray.csv", experiment="table1", progress=False)
    finally:
        ray.shutdown()
    assert len(local) == len(cells) == 3
    pd.testing.assert_frame_equal(resumed.drop(columns="seconds"), local.drop(columns="seconds"))
    stored = {p: (tmp_path / p).read_text().splitlines() for p in ("local.csv", "ray.csv")}
    seconds = local.columns.get_loc("seconds")
    assert sorted(line.split(",")[:seconds] + line.split(",")[seconds + 1:] for line in stored["local.csv"]) == \
        sorted(line.split(",")[:seconds] + line.split(",")[seconds + 1:] for line in stored["ray.csv"])
    assert (read_results(tmp_path / "ray.csv")["seconds"] == first["seconds"]).all()  # nothing computed twice


def test_a_missing_ray_names_the_install_command(monkeypatch):
    from dartlib.experiments.distributed import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match="pip install ray"):
        import_ray()


def test_sharding_is_the_local_backends(capsys):
    from dartlib import cli

    assert cli.main(["grid", "table1", "--profile", "smoke", "--backend", "ray", "--shard", "0/2"]) == 2
    assert "the ray backend schedules every cell itself" in capsys.readouterr().err
