"""``python -m dartlib reference check`` on damaged results files: each fault is planted into a copy
of the committed smoke results (tests/golden/smoke/, the files a smoke run writes) and must give
one line naming the file and the line, exit status 4, never a pandas traceback and never a
comparison of what is left of the file."""

from __future__ import annotations

import shutil

import pytest

from dartlib import cli
from dartlib.data.files import DamagedFileError
from dartlib.reporting import reference

GOLDEN = reference.REFERENCE_DIR / "smoke"


@pytest.fixture()
def results(tmp_path, monkeypatch):
    """A smoke results folder: the committed results copied, used in place of results/smoke/."""
    folder = tmp_path / "results"
    shutil.copytree(GOLDEN, folder)
    monkeypatch.setattr(reference, "results_dir", lambda profile: folder)
    assert reference.compare_profile("smoke")[1] == []
    return folder


def _set(path, column: str, value: str, line: int = 2) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    fields = lines[line - 1].split(",")
    fields[header.index(column)] = value
    lines[line - 1] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")


def _check(capsys) -> str:
    assert cli.main(["reference", "check", "--profile", "smoke"]) == 4
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and err.startswith("error: "), err
    assert "cells compared" not in captured.out  # no comparison of a damaged file
    return err


def test_extra_field_names_file_and_line(results, capsys):
    path = results / "source_models.csv"
    lines = path.read_text().splitlines()
    lines[2] += ",7"
    path.write_text("\n".join(lines) + "\n")
    err = _check(capsys)
    assert f"{path} is damaged: line 3 has" in err and "(an extra field)" in err
    with pytest.raises(DamagedFileError, match=r"source_models\.csv is damaged: line 3 has \d+ fields, the header \d+ "
                                               r"\(an extra field\)"):
        reference.compare_profile("smoke")


def test_empty_file_is_named(results, capsys):
    (results / "hoc.csv").write_text("")
    assert _check(capsys).startswith(f"error: {results / 'hoc.csv'} is damaged: empty. Remedy: run the notebook")


def test_truncated_file_is_reported_not_compared(results, capsys):
    path = results / "table1.csv"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.6)])
    assert "table1.csv is damaged: its last line" in _check(capsys)
    assert "is cut short (a truncated file)" in str(pytest.raises(DamagedFileError, reference.compare_profile, "smoke").value)


def test_file_cut_at_a_line_end_of_a_shifted_row(results, capsys):
    path = results / "ablations.csv"
    lines = path.read_text().splitlines()
    lines[4] = ",".join(lines[4].split(",")[2:])  # a row that lost its first two fields
    path.write_text("\n".join(lines) + "\n")
    assert "ablations.csv is damaged: line 5 has" in _check(capsys)


@pytest.mark.parametrize("value", ["nan", "-600", "inf", "", "6O0", "12.5"])
def test_bad_count_is_named_with_its_line(results, capsys, value):
    _set(results / "table1.csv", "n", value, line=4)
    err = _check(capsys)
    assert f"table1.csv is damaged: line 4 has n {value!r}" in err, err
    assert "not a finite count >= 0" in err


def test_accuracy_out_of_range_is_named(results, capsys):
    _set(results / "ablations.csv", "accuracy", "150.0", line=3)
    assert "ablations.csv is damaged: line 3 has accuracy '150.0', not a number in 0..100" in _check(capsys)


def test_damaged_stored_copy_says_git_checkout(results, tmp_path, monkeypatch, capsys):
    stored = tmp_path / "golden"
    shutil.copytree(GOLDEN, stored / "smoke")
    monkeypatch.setattr(reference, "REFERENCE_DIR", stored)
    (stored / "smoke" / "costs.csv").write_text("")
    assert f"Remedy: restore it with `git checkout -- {stored / 'smoke' / 'costs.csv'}`" in _check(capsys)


def test_duplicate_cell_in_a_grid_file_is_named(results, capsys):
    path = results / "table1.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[1]]) + "\n")
    err = _check(capsys)
    assert "table1.csv is damaged: lines 2 and" in err and "hold the same cell" in err
