"""Notebooks stay thin: loops, helpers and plotting live in dartlib, so no code cell (the
``parameters`` cell excepted) runs past MAX_LINES lines of code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_LINES = 15


def code_lines(source: str) -> int:
    """Lines of a cell that are neither blank nor comments."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def long_cells(path: Path) -> list[tuple[int, int]]:
    """(index, code lines) of every code cell over MAX_LINES, the ``parameters`` cell excepted."""
    cells = json.loads(path.read_text())["cells"]
    return [(i, n) for i, cell in enumerate(cells)
            if cell["cell_type"] == "code" and "parameters" not in cell.get("metadata", {}).get("tags", [])
            and (n := code_lines("".join(cell["source"]))) > MAX_LINES]


def test_code_lines_skip_blanks_and_comments():
    assert code_lines("# NBVAL_CHECK_OUTPUT\n\nx = 1\n    # why\ny = 2\n") == 2


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in NOTEBOOKS])
def test_no_long_code_cell(path: Path):
    assert not long_cells(path), f"{path.name}: cells (index, code lines) over {MAX_LINES}: {long_cells(path)}"


def test_notebook_16_prepares_the_test_sets_it_reads_before_it_reads_them():
    """Run alone on a fresh clone, notebook 16 generates the corrupted sets (no DataMissingError)."""

    [notebook] = [p for p in NOTEBOOKS if p.name.startswith("16_")]
    cells = json.loads(notebook.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    prepared = code.find("ensure_corrupted(settings.test.corrupted_dataset")
    assert prepared >= 0, "notebook 16 reads its corrupted sets without preparing them (dartlib.data.prepare.ensure_corrupted)"
    assert prepared < code.find("load(settings.test.corrupted_dataset")
