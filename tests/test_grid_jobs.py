"""What ``python -m dartlib grid`` does with a grid (dartlib.experiments.grid_jobs): the cells chosen by
method, refiner and shard, the context prepared once and asked for each cell's inputs, the missing
trained inputs named with the grid's own command; and which grids borrow a grid's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from dartlib.models.checkpoints import TrainedInputsMissing
from dartlib.experiments.grid import grid, store_row
from dartlib.experiments.grid_jobs import CellChoiceError, choose_cells, prepare_job
from dartlib.studies.grids import borrowers_of

CELLS = grid(dataset=["cifar10c"], shift=["iid"], shift_param=[None], corruption=["gaussian_noise"], severity=[5],
             method=["noadapt", "bnadapt", "tent"], refiner=["none", "dart"], seed=[0, 1])


def test_cells_are_chosen_by_method_and_refiner_then_sharded():
    chosen = choose_cells(CELLS, methods=["tent", "bnadapt"], refiners=["dart"])
    assert [(c.method, c.refiner, c.seed) for c in chosen] == [("bnadapt", "dart", 0), ("bnadapt", "dart", 1),
                                                               ("tent", "dart", 0), ("tent", "dart", 1)]
    # the shard is taken of the chosen cells, not of the whole grid
    assert choose_cells(CELLS, methods=["tent", "bnadapt"], refiners=["dart"], shard_spec="1/3") == [chosen[1]]
    assert choose_cells(CELLS) == CELLS and choose_cells(CELLS, shard_spec="0/3") == CELLS[0::3]


def test_an_unknown_method_or_refiner_names_the_grids_own():
    with pytest.raises(CellChoiceError, match=r"^unknown method tnet, sarr; valid: noadapt, bnadapt, tent$"):
        choose_cells(CELLS, methods=["tent", "tnet", "sarr"])
    with pytest.raises(CellChoiceError, match=r"^unknown refiner dart-split; valid: none, dart$"):
        choose_cells(CELLS, refiners=["dart-split"])


class _Context:
    """A prepared context as the engine gives one: each cell's input digest, and its shared forwards."""

    def __init__(self, digest: str) -> None:
        self.digest, self.asked = digest, []

    def inputs(self, cell) -> str:
        self.asked.append(cell.key)
        return self.digest

    def save_shared_source(self) -> None:
        pass


def test_a_job_prepares_once_and_counts_current_stale_and_missing_cells(tmp_path: Path):
    path = tmp_path / "table1.csv"
    cells = choose_cells(CELLS, methods=["tent"], refiners=["none"])  # seeds 0 and 1
    store_row(cells[0], {"n": 100, "accuracy": 71.5}, path=path, experiment="table1", seconds=1.0, digest="d-now")
    store_row(cells[1], {"n": 100, "accuracy": 70.0}, path=path, experiment="table1", seconds=1.0, digest="d-old")
    extra = grid(dataset=["cifar10c"], shift=["iid"], shift_param=[None], corruption=["gaussian_noise"], severity=[5],
                 method=["tent"], seed=[2])
    context, prepared, made = _Context("d-now"), [], []

    def prepare(*, settings, progress):
        prepared.append(progress)
        return context, {"arch": "small-cnn", "clean_test_accuracy": 89.0}

    def context_of(settings, shared):
        made.append(shared)
        return lambda cell: shared

    job = prepare_job(experiment="table1", prepare=prepare, context_of=context_of, settings=None,
                      cells=[*cells, *extra], path=path, command="python -m dartlib grid table1")
    table = job.status()
    assert prepared == [True] and made == [context]  # one context, made once, for every cell
    assert table.loc[("tent", "none")].to_dict() == {"current": 1, "stale": 1, "suspect": 0, "missing": 1, "cells": 3,
                                                    "borrowable": 0}
    assert sorted(context.asked) == sorted(c.key for c in [*cells, *extra])


def test_missing_trained_inputs_name_the_grids_own_command(tmp_path: Path):
    def prepare(*, settings, progress):
        raise TrainedInputsMissing([tmp_path / "refiner.pt"])

    with pytest.raises(TrainedInputsMissing) as err:
        prepare_job(experiment="ablations", prepare=prepare, context_of=None, settings=None, cells=CELLS,
                    path=tmp_path / "ablations.csv",
                    command="python -m dartlib grid ablations --profile cpu")
    assert err.value.paths == [tmp_path / "refiner.pt"]
    assert "`python -m dartlib grid ablations --profile cpu` trains them" in str(err.value)


def test_the_grids_borrowing_table1_get_its_recomputed_rows():
    assert borrowers_of("table1") == ["jpeg_bound", "diagnosis", "paper_config", "all_corruptions"]
    assert borrowers_of("ablations") == [] and "diagnosis" in borrowers_of("paper_config")
