"""A study's table outside the grids is computed once per set of inputs (dartlib.experiments.keyed_tables)."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from dartlib.experiments.keyed_tables import AlteredTableWarning, inputs_digest, is_current, keyed_table, stamp_path


def test_a_table_is_computed_once_per_inputs_and_again_when_they_change(tmp_path):
    path, calls = tmp_path / "shapes.csv", []

    def compute() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"variant": ["a", "b"], "value": [1.0 / 3, 2.0]})

    first = keyed_table(path, inputs=inputs_digest("rev1", 0.1), compute=compute)
    again = keyed_table(path, inputs=inputs_digest("rev1", 0.1), compute=compute)
    assert len(calls) == 1 and first.equals(again)
    assert first.value.tolist() == [0.333333, 2.0]  # what is returned is what is stored
    assert stamp_path(path).read_text().splitlines()[0] == inputs_digest("rev1", 0.1)
    keyed_table(path, inputs=inputs_digest("rev1", 0.2), compute=compute)  # a changed setting
    assert len(calls) == 2 and is_current(path, inputs=inputs_digest("rev1", 0.2))


def test_a_table_without_its_stamp_is_not_current(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"x": [1]}).to_csv(path, index=False)
    assert not is_current(path, inputs="abc")
    stamp_path(path).write_text(f"abc\nsha256 {hashlib.sha256(path.read_bytes()).hexdigest()}\n")
    assert is_current(path, inputs="abc") and not is_current(path, inputs="abd")
    assert inputs_digest(1, 2) != inputs_digest(12) and inputs_digest(1, 2) != inputs_digest(2, 1)


def test_a_table_altered_after_it_was_computed_is_computed_again(tmp_path):
    """The stamp records the table's sha256: an edited number is not current (a warning names the
    file) and is replaced by the computed table; so is a table under a one-line stamp (written before
    tables were sealed), which cannot tell an edit from the computed table."""
    path, calls = tmp_path / "shapes.csv", []

    def compute() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"variant": ["a"], "value": [0.5]})

    keyed_table(path, inputs="k1", compute=compute)
    assert stamp_path(path).read_text().splitlines()[1] == f"sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}"
    path.write_text(path.read_text().replace("0.5", "0.9"))  # a hand-edited result
    with pytest.warns(AlteredTableWarning, match="shapes.csv: cannot be shown to be the table computed \\(its sha256"):
        table = keyed_table(path, inputs="k1", compute=compute)
    assert len(calls) == 2 and table.value.tolist() == [0.5]
    stamp_path(path).write_text("k1\n")  # the stamp of a table computed before tables carried their digest
    path.write_text(path.read_text().replace("0.5", "0.7"))
    with pytest.warns(AlteredTableWarning, match="records no sha256 of it"):
        assert not is_current(path, inputs="k1")
    assert keyed_table(path, inputs="k1", compute=compute).value.tolist() == [0.5] and len(calls) == 3


def test_a_reader_that_cannot_recompute_gets_the_sealed_table_or_a_refusal_naming_the_remedy(tmp_path):
    from dartlib.data.files import DamagedFileError
    from dartlib.experiments.keyed_tables import sealed_table

    path = tmp_path / "costs.csv"
    assert sealed_table(path, remedy="run notebook 10") is None
    written = keyed_table(path, inputs="x", compute=lambda: pd.DataFrame({"method": ["bnadapt"], "wall_clock_s": [2.5]}))
    assert sealed_table(path, remedy="run notebook 10").equals(written)
    path.write_text(path.read_text().replace("2.5", "1.5"))  # a number edited by hand
    with pytest.raises(DamagedFileError, match=r"costs\.csv is damaged: its bytes are not those costs\.inputs records\. "
                                               r"Remedy: run notebook 10"):
        sealed_table(path, remedy="run notebook 10")
    stamp_path(path).unlink()
    with pytest.raises(DamagedFileError, match="costs.inputs records no sha256"):
        sealed_table(path, remedy="run notebook 10")
