"""Per-image outcomes beside a results file: written with each row, borrowed with it, checked when
read, and given to rows computed before they were kept by recomputing them (``grid --outcomes``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dartlib.experiments.grid import Cell, StaleRowsWarning, fill_outcomes, read_results, run_grid
from dartlib.experiments.outcomes import CellOutcomes, checked_outcomes, folder_outcomes, read_sidecar, sidecar

CELLS = [Cell("sim", "lt", float(rho), c, 5, "bnadapt") for rho in (1, 10) for c in ("fog", "snow")]


def _evaluate(cell: Cell) -> dict:
    rng = np.random.default_rng(int(cell.shift_param) * 7 + len(cell.corruption))
    order = rng.permutation(500)[:400]
    correct = rng.random(400) < 0.7
    o = CellOutcomes.from_stream(order=order, correct=correct, size=500)
    return {"n": 400, "accuracy": 100.0 * (int(correct.sum()) / 400), "outcomes": o}


def test_a_grid_writes_outcomes_that_agree_with_its_rows(tmp_path):
    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    rows = read_results(path)
    assert "outcomes" not in rows.columns
    got = checked_outcomes(rows, read_sidecar(path))
    assert len(got) == len(CELLS)
    for cell in CELLS:
        assert got[(cell.key, "d1")].accuracy == pytest.approx(_evaluate(cell)["accuracy"])
    # borrowed rows bring their outcomes
    other = tmp_path / "h.csv"
    run_grid(CELLS[:2], lambda c: pytest.fail("borrowed, not computed"), path=other, experiment="h", progress=False,
             inputs=lambda c: "d1", reuse=[path])
    assert len(checked_outcomes(read_results(other), read_sidecar(other))) == 2
    assert len(folder_outcomes(tmp_path)) == len(CELLS)  # keyed by (key, inputs): the borrowed ones are the same


def test_an_outcome_line_that_disagrees_with_its_row_is_not_used(tmp_path):
    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[0, "accuracy"] = "12.5"  # a tampered row: its outcomes no longer match
    frame.to_csv(path, index=False)
    got = checked_outcomes(read_results(path), read_sidecar(path))
    assert len(got) == len(CELLS) - 1 and (CELLS[0].key, "d1") not in got


def test_fill_outcomes_checks_old_rows_and_replaces_one_that_does_not_reproduce(tmp_path):
    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    sidecar(path).unlink()  # rows computed before outcomes were kept
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[1, "accuracy"] = "12.5"
    frame.to_csv(path, index=False)
    with pytest.warns(StaleRowsWarning, match="gave"):
        counts = fill_outcomes(CELLS, _evaluate, path=path, experiment="g", inputs=lambda c: "d1", progress=False)
    assert counts == {"checked": 3, "replaced": 1, "already": 0, "skipped": 0}
    rows = read_results(path)
    assert float(rows.loc[rows.key == CELLS[1].key, "accuracy"].iloc[0]) == pytest.approx(_evaluate(CELLS[1])["accuracy"])
    assert len(checked_outcomes(rows, read_sidecar(path))) == len(CELLS)
    again = fill_outcomes(CELLS, _evaluate, path=path, experiment="g", inputs=lambda c: "d1", progress=False)
    assert again == {"checked": 0, "replaced": 0, "already": 4, "skipped": 0}


def test_fill_outcomes_gives_a_borrowed_copy_the_recomputed_row_and_its_outcomes(tmp_path):
    path, other = tmp_path / "g.csv", tmp_path / "h.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    sidecar(path).unlink()  # rows computed before outcomes were kept
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[1, "accuracy"] = "12.5"  # one that will not reproduce
    frame.to_csv(path, index=False)
    run_grid(CELLS[:3], lambda c: pytest.fail("borrowed"), path=other, experiment="h", progress=False,
             inputs=lambda c: "d1", reuse=[path])  # h borrows three rows, 12.5 among them
    with pytest.warns(StaleRowsWarning):
        fill_outcomes(CELLS, _evaluate, path=path, experiment="g", inputs=lambda c: "d1", progress=False,
                      borrowers=[other])
    copies = read_results(other)
    assert copies.experiment.eq("h").all() and len(copies) == 3
    recomputed = copies.loc[copies.key == CELLS[1].key, "accuracy"].iloc[0]
    assert float(recomputed) == pytest.approx(_evaluate(CELLS[1])["accuracy"])
    assert len(checked_outcomes(copies, read_sidecar(other))) == 3


def test_every_committed_row_agrees_with_its_outcome_line():
    """A committed row whose sidecar line (same key and inputs) disagrees with it loses its SE
    silently (:func:`checked_outcomes` drops the line): the row or the line is stale."""
    from dartlib.paths import REPO_ROOT

    disagreeing = []
    for side_path in sorted((REPO_ROOT / "results").glob("*/*.outcomes.csv")):
        path = side_path.with_name(side_path.name.replace(".outcomes.csv", ".csv"))
        rows, side = read_results(path), read_sidecar(path)
        kept = checked_outcomes(rows, side)
        lines = set(zip(side["key"].astype(str), side["inputs"].astype(str)))
        disagreeing += [f"{path.name}: {k}" for k, d in zip(rows["key"].astype(str), rows["inputs"].astype(str))
                        if (k, d) in lines and (k, d) not in kept]
    assert not disagreeing, disagreeing
