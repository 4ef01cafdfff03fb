"""Per-image outcomes beside a results file: written with each row, borrowed with it, checked when
read, and given to rows computed before they were kept by recomputing them (``grid --outcomes``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dartlib.experiments.grid import Cell, StaleRowsWarning, folder_outcomes, read_results, run_grid
from dartlib.experiments.outcome_backfill import fill_outcomes
from dartlib.experiments.outcomes import CellOutcomes, checked_outcomes, sidecar, sidecar_check

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
    got = checked_outcomes(rows, path)
    assert len(got) == len(CELLS)
    for cell in CELLS:
        assert got[(cell.key, "d1")].accuracy == pytest.approx(_evaluate(cell)["accuracy"])
    # borrowed rows bring their outcomes
    other = tmp_path / "h.csv"
    run_grid(CELLS[:2], lambda c: pytest.fail("borrowed, not computed"), path=other, experiment="h", progress=False,
             inputs=lambda c: "d1", reuse=[path])
    assert len(checked_outcomes(read_results(other), other)) == 2
    assert len(folder_outcomes(tmp_path)) == len(CELLS)  # keyed by (key, inputs): the borrowed ones are the same


def test_an_outcome_line_that_disagrees_with_its_row_is_not_used(tmp_path):
    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[0, "accuracy"] = "12.5"  # a tampered row: its outcomes no longer match
    frame.to_csv(path, index=False)
    got = checked_outcomes(read_results(path, suspect="keep"), path)
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
    assert len(checked_outcomes(rows, path)) == len(CELLS)
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
    assert len(checked_outcomes(copies, other)) == 3


def test_every_committed_row_agrees_with_its_outcome_line():
    """A committed row whose key is not the hash of its fields, or whose sidecar line (same key and
    inputs) disagrees with it, is suspect: not current for its grid and not shown to readers; none
    may be, and no sidecar line may be an orphan or a duplicate."""
    from dartlib.paths import REPO_ROOT

    from dartlib.experiments.grid import suspect_rows

    disagreeing = []
    for path in sorted((REPO_ROOT / "results").glob("*/*.csv")):
        if path.name.endswith(".outcomes.csv") or "key" not in path.read_text().partition("\n")[0].split(","):
            continue
        rows = read_results(path, suspect="keep")
        disagreeing += [f"{path.name}: {k} ({why})" for k, why in suspect_rows(rows, path).items()]
    for side_path in sorted((REPO_ROOT / "results").glob("*/*.outcomes.csv")):
        path = side_path.with_name(side_path.name.replace(".outcomes.csv", ".csv"))
        check = sidecar_check(read_results(path, suspect="keep"), path)
        disagreeing += [f"{side_path.name}: orphan line {n}" for n in check.orphans]
        disagreeing += [f"{side_path.name}: duplicate line {n}" for n in check.duplicates]
    assert not disagreeing, disagreeing


def _tamper(path, line: int, column: str, value: str) -> None:
    """Edit one field of line ``line`` (2 = the first row) of a CSV in place, as an editor would."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[line - 2, column] = value
    frame.to_csv(path, index=False)


def test_an_edited_row_whose_key_is_not_its_fields_hash_is_suspect_and_recomputed(tmp_path):
    from dartlib.experiments.grid import SuspectRowsWarning
    from dartlib.experiments.grid_status import grid_status

    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    sidecar(path).unlink()  # no outcomes to contradict it: the key alone must give it away
    _tamper(path, 2, "method", "tent")  # the bnadapt row made a tent row, key kept
    _tamper(path, 2, "accuracy", "99.0")
    status = grid_status(CELLS, path=path, inputs=lambda c: "d1")
    assert status.loc[("bnadapt", "none")].tolist() == [3, 0, 1, 0, 4, 0]
    with pytest.warns(SuspectRowsWarning, match="not the hash of its fields"):
        rows = read_results(path)
    assert len(rows) == 3 and CELLS[0].key not in set(rows.key) and not rows.method.eq("tent").any()
    with pytest.warns(SuspectRowsWarning):
        again = run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    assert len(again) == 4 and again.method.eq("bnadapt").all()
    assert float(again.accuracy.iloc[0]) == pytest.approx(_evaluate(CELLS[0])["accuracy"], abs=1e-4)


def test_a_row_its_outcomes_contradict_is_suspect_for_status_readers_and_the_grid(tmp_path):
    from dartlib.experiments.grid import SuspectRowsWarning
    from dartlib.experiments.grid_status import grid_status

    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    _tamper(path, 3, "accuracy", "99.0")  # the row's accuracy, its sidecar line unchanged
    assert grid_status(CELLS, path=path, inputs=lambda c: "d1").loc[("bnadapt", "none")].tolist() == [3, 0, 1, 0, 4, 0]
    with pytest.warns(SuspectRowsWarning, match="its outcomes give accuracy"):
        assert CELLS[1].key not in set(read_results(path).key)
    with pytest.warns(StaleRowsWarning, match="suspect"):
        counts = fill_outcomes(CELLS, _evaluate, path=path, experiment="g", inputs=lambda c: "d1", progress=False)
    assert counts == {"checked": 0, "replaced": 1, "already": 3, "skipped": 0}
    assert grid_status(CELLS, path=path, inputs=lambda c: "d1").loc[("bnadapt", "none")].tolist() == [4, 0, 0, 0, 4, 0]


def test_outcomes_that_mark_right_an_image_outside_the_stream_make_the_row_suspect(tmp_path):
    from dartlib.experiments.grid import suspect_rows

    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    side = pd.read_csv(sidecar(path), dtype=str, keep_default_na=False)
    cell = CellOutcomes.decode(size=500, members=side.members[0], correct=side.correct[0])
    inside, outside = np.flatnonzero(cell.correct)[0], np.flatnonzero(cell.members == 0)[0]
    moved = cell.correct.copy()
    moved[inside], moved[outside] = 0, 1  # same count and accuracy, one hit on an image not in the stream
    side.loc[0, "correct"] = CellOutcomes(members=cell.members, correct=moved).encode()["correct"]
    side.to_csv(sidecar(path), index=False)
    why = suspect_rows(read_results(path, suspect="keep"), path)
    assert list(why) == [CELLS[0].key] and "not in its stream" in why[CELLS[0].key]


def test_a_garbage_sidecar_line_is_one_error_naming_the_file_and_deleting_the_line_repairs_it(tmp_path):
    from dartlib.data.files import DamagedFileError

    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    _tamper(sidecar(path), 3, "members", "AAAA@@garbage")  # header valid, arrays not
    with pytest.raises(DamagedFileError) as err:
        read_results(path)
    message = str(err.value)
    assert "\n" not in message and str(sidecar(path)) in message and "line 3 " in message
    assert "delete line 3 of g.outcomes.csv (its row is kept, without outcomes; `python -m dartlib grid g --profile" in message
    assert "otherwise the notebook that writes g.csv does" in message
    with pytest.raises(DamagedFileError, match="line 3"):
        fill_outcomes(CELLS, _evaluate, path=path, experiment="g", inputs=lambda c: "d1", progress=False)
    lines = sidecar(path).read_text().splitlines()
    sidecar(path).write_text("\n".join(lines[:2] + lines[3:]) + "\n")  # the remedy the message states
    counts = fill_outcomes(CELLS, _evaluate, path=path, experiment="g", inputs=lambda c: "d1", progress=False)
    assert counts == {"checked": 1, "replaced": 0, "already": 3, "skipped": 0}


def test_orphan_and_duplicate_sidecar_lines_are_reported(tmp_path):
    from dartlib.experiments.outcomes import SidecarWarning

    path = tmp_path / "g.csv"
    run_grid(CELLS, _evaluate, path=path, experiment="g", progress=False, inputs=lambda c: "d1")
    lines = sidecar(path).read_text().splitlines()
    orphan = lines[1].replace(CELLS[0].key, "0123456789abcdef", 1)
    sidecar(path).write_text("\n".join(lines + [lines[2], orphan]) + "\n")  # line 6 repeats line 3; line 7 no row's
    with pytest.warns(SidecarWarning) as caught:
        check = sidecar_check(read_results(path, suspect="keep"), path)
    assert check.orphans == [7] and check.duplicates == [6] and check.suspect == {}
    assert len(check.agree) == 4
    text = " ".join(str(w.message) for w in caught)
    assert "line(s) 7 hold the outcomes of no row" in text and "line(s) 6 repeat a key" in text
