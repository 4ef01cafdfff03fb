"""dartlib.reporting.reference: results compared with stored values within stated tolerances."""

import numpy as np
import pandas as pd
import pytest

from dartlib.reporting import reference


def _table(acc, n=600):
    return pd.DataFrame({"experiment": "table1", "method": ["bnadapt", "bnadapt", "tent"], "refiner": ["none", "dart", "none"],
                         "shift_param": [1.0, 100.0, 1.0], "n": n, "accuracy": acc, "seconds": [0.1, 0.2, 0.3]})


def test_binomial_tolerance_is_three_standard_errors():
    # p = 0.85 over 600 images: SE = 100 * sqrt(0.85 * 0.15 / 600) = 1.458 points
    tol = reference.tolerance(reference.ACCURACY, np.array([85.0]), np.array([600]))
    assert tol[0] == pytest.approx(3 * 1.4577, abs=1e-3)
    # at 100% the variance is floored at 1/n: 3 * 100 / n
    assert reference.tolerance(reference.ACCURACY, np.array([100.0]), np.array([50]))[0] == pytest.approx(6.0)


def test_float_noise_within_tolerance_passes_and_timings_are_ignored():
    stored = _table([85.3, 84.8, 85.3])
    ours = _table([85.5, 84.6, 85.2])
    ours["seconds"] = [9.0, 9.0, 9.0]
    assert reference.compare_frames(ours, stored, file="table1.csv") == []


def test_a_lost_dart_gain_fails():
    # DART's refinement broken: BNAdapt+DART at rho = 100 falls from 84.8 to 79.7 (the BNAdapt value)
    problems = reference.compare_frames(_table([85.3, 79.7, 85.3]), _table([85.3, 84.8, 85.3]), file="table1.csv")
    assert len(problems) == 2 and "accuracy 79.7 vs stored 84.8" in problems[0] and "refiner=dart" in problems[0]
    assert "1 of 3 rows differ; the tolerance: an accuracy over n test images" in problems[1]


def test_changed_counts_and_rows_fail():
    assert "column 'n' differs" in reference.compare_frames(_table([85.3, 84.8, 85.3], n=599),
                                                            _table([85.3, 84.8, 85.3]), file="t.csv")[0]
    assert "2 rows" in reference.compare_frames(_table([85.3, 84.8, 85.3]).iloc[:2], _table([85.3, 84.8, 85.3]),
                                                file="t.csv")[0]


def test_rows_are_matched_by_configuration_not_order():
    stored = _table([85.3, 84.8, 80.0])
    assert reference.compare_frames(stored.iloc[::-1].reset_index(drop=True), stored, file="t.csv") == []


def test_compare_profile_reports_a_missing_results_file(tmp_path):
    ref, res = tmp_path / "ref", tmp_path / "res"
    ref.mkdir()
    res.mkdir()
    _table([85.3, 84.8, 85.3]).to_csv(ref / "table1.csv", index=False)
    compared, problems = reference.compare_profile("smoke", reference=ref, results=res)
    assert compared == 0 and "table1.csv: missing" in problems[0]
    _table([85.3, 84.8, 85.3]).to_csv(res / "table1.csv", index=False)
    assert reference.compare_profile("smoke", reference=ref, results=res) == (21, [])


def test_smoke_reference_covers_the_smoke_results():
    stored = sorted(p.name for p in (reference.REFERENCE_DIR / "smoke").glob("*.csv"))
    assert {"table1.csv", "source_models.csv", "intermediate_training.csv", "online_imbalance.csv"} <= set(stored)
