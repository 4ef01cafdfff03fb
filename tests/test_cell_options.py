"""A cell's options are typed values with one writer and one reader (dartlib.experiments.cell_options),
and the text they write is the one the committed keys were made of."""

import csv
import re

import pytest

from dartlib.experiments.cell_options import CELL_OPTIONS, CellOptions, cell_options, options_text
from dartlib.experiments.settings import Settings
from dartlib.paths import REPO_ROOT


def _committed_params() -> set[str]:
    texts = set()
    # the committed rows (results/, the stored smoke copy in tests/golden/) and the paper's tables
    for path in [*(REPO_ROOT / "results").rglob("*.csv"), *(REPO_ROOT / "tests" / "golden").rglob("*.csv"),
                 *(REPO_ROOT / "data" / "paper").glob("*.csv")]:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            if "params" in (reader.fieldnames or []):
                texts |= {row["params"] for row in reader}
    return texts


def test_every_committed_params_text_reads_into_typed_values_and_writes_back_byte_for_byte():
    texts = _committed_params()
    assert {"int_batch=64;hidden=1000", "equal_steps_batch=32;hidden=500", "subset=1000,epochs=10",
            "alpha=0,limit=500", "bn=adapted,views=32", "dart_use=report"} <= texts
    assert [t for t in texts if cell_options(t).text != t] == []


def test_every_profiles_cells_write_params_that_read_back_unchanged():
    from dartlib.studies.grids import GRIDS

    for profile in ("smoke", "cpu"):
        settings = Settings.from_profile(profile)
        for name, spec in GRIDS.items():
            for cell in spec.cells(settings):
                assert cell.options.text == cell.params, (profile, name, cell.label())


def test_values_are_typed_and_both_separators_read():
    options = cell_options("alpha=0.1,limit=1000")
    assert options == {"alpha": 0.1, "limit": 1000} and type(options["limit"]) is int
    assert cell_options("int_batch=32;hidden=250") == {"int_batch": 32, "hidden": 250}
    assert cell_options("bn=adapted")["bn"] == "adapted"
    assert cell_options("") == {} and cell_options(float("nan")) == {}
    assert cell_options("alpha=0.10")["alpha"] == cell_options("alpha=0.1")["alpha"]


def test_the_writer_gives_the_committed_form():
    assert options_text(int_batch=64, hidden=1000) == "int_batch=64;hidden=1000"
    assert options_text(alpha=0.0) == "alpha=0" and options_text(alpha=0.01) == "alpha=0.01"
    assert options_text(limit=None) == "" and options_text(subset=1000.0) == "subset=1000"
    assert (CellOptions.of(subset=1000) | cell_options("epochs=10")).text == "subset=1000,epochs=10"
    assert (CellOptions.of(test_batch=16) | CellOptions.of(limit=None)).text == "test_batch=16"


def test_an_unknown_option_or_a_wrong_value_is_refused_naming_it():
    with pytest.raises(KeyError, match="unknown cell option 'limt'; valid: limit, subset"):
        cell_options("limt=5")
    with pytest.raises(ValueError, match="limit='1.5': not a whole number"):
        cell_options("limit=1.5")
    with pytest.raises(ValueError, match="limit='1e3': not a whole number"):
        cell_options("limit=1e3")  # read, it would not write back as it was
    with pytest.raises(ValueError, match="alpha=inf: not a finite number"):
        options_text(alpha=float("inf"))
    with pytest.raises(ValueError, match="alpha='high': not a number"):
        options_text(alpha="high")
    with pytest.raises(ValueError, match="given twice"):
        CellOptions.of(limit=5) | CellOptions.of(limit=6)
    with pytest.raises(ValueError, match="not name=value"):
        cell_options("limit")


def test_no_module_writes_a_cells_params_by_hand():
    """Cells' params come from options_text / CellOptions, never an f-string such as
    ``params=[f"subset={n}"]`` (a value written by hand is one the reader may not read back)."""
    names = "|".join(CELL_OPTIONS)
    by_hand = re.compile(r"(?:params|extra|subset)=\[?f\"[^\"]*\b(?:" + names + r")=")
    found = [f"{path.relative_to(REPO_ROOT)}:{i}" for path in (REPO_ROOT / "dartlib").rglob("*.py")
             for i, line in enumerate(path.read_text().splitlines(), 1) if by_hand.search(line)]
    assert found == []
