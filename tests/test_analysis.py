"""Confusion rates, their similarity across corruptions, and the per-batch deviation table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dartlib.analysis.confusion import confusion_rates, matrices_from_rows, matrix_rows, offdiagonal_similarity
from dartlib.analysis.deviation import batch_deviation_table


def test_confusion_rates_are_row_normalised():
    labels = np.array([0, 0, 0, 1, 1, 2])
    preds = np.array([0, 1, 1, 1, 1, 0])
    m = confusion_rates(preds, labels, 4)
    np.testing.assert_allclose(m[0], [1 / 3, 2 / 3, 0, 0])
    np.testing.assert_allclose(m[1], [0, 1, 0, 0])
    np.testing.assert_allclose(m[2], [1, 0, 0, 0])
    assert not m[3].any()  # absent class: a zero row, not NaN


def test_offdiagonal_similarity():
    rng = np.random.default_rng(0)
    base = rng.random((5, 5))
    same, _ = offdiagonal_similarity({"a": base, "b": base * 2 + np.eye(5), "c": base})
    assert same == pytest.approx(1.0)  # scaling and the diagonal do not matter
    flipped, corr = offdiagonal_similarity({"a": base, "b": -base})
    assert flipped == pytest.approx(-1.0) and corr.shape == (2, 2)


def test_matrices_round_trip_through_their_long_table():
    rng = np.random.default_rng(0)
    stored = {("a", 1.0): rng.random((3, 3)), ("b", 10.0): rng.random((3, 3))}
    import pandas as pd

    table = pd.concat([matrix_rows(m, labels={"set": s, "rho": r}, column="rate") for (s, r), m in stored.items()])
    assert len(table) == 18 and list(table.columns) == ["set", "rho", "true", "pred", "rate"]
    back = matrices_from_rows(table, by=["set", "rho"], column="rate")
    assert list(back) == list(stored) and all(np.array_equal(back[k], stored[k]) for k in stored)
    one = matrices_from_rows(matrix_rows(stored[("a", 1.0)], labels={"m": "x"}).iloc[::-1], by="m")
    assert list(one) == ["x"] and np.array_equal(one["x"], stored[("a", 1.0)])  # the order of rows does not matter


def test_batch_deviation_table():
    logits = [torch.tensor([[5.0, 0.0], [0.0, 5.0]]), torch.zeros(2, 2)]
    labels = np.array([0, 1, 0, 1])
    table = batch_deviation_table(logits, labels, np.arange(4), batch_size=2)
    assert table.accuracy.tolist() == [100.0, 50.0]  # ties in the second batch go to class 0
    # a uniform prediction: d = D(u, p_bar) = log 2; a confident balanced batch: p_bar uniform, d large
    assert table.d[1] == pytest.approx(np.log(2)) and table.ce_u_pbar[1] == pytest.approx(np.log(2))
    assert table.ce_u_pbar[0] == pytest.approx(np.log(2)) and table.d[0] > 2.5
