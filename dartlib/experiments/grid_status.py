"""How far a grid is, without running it: its cells counted by state (current, stale, suspect,
missing) and by whether :func:`dartlib.experiments.grid.run_grid` would borrow them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pandas as pd

from dartlib.experiments.grid import Cell, _states, borrowable


def grid_status(cells: Iterable[Cell], *, path: Path, inputs: Callable[[Cell], str] | None = None,
                reuse: Sequence[Path] = ()) -> pd.DataFrame:
    """How far a grid is, without running it: per (method, refiner), how many of its cells are
    stored and current, stored but stale or suspect (:func:`dartlib.experiments.grid.run_grid`
    recomputes them) and missing; ``borrowable``: how many of those it would copy from ``reuse``
    (:func:`dartlib.experiments.grid.borrowable`) instead of computing."""
    cells = list(cells)
    digests = {c.key: inputs(c) for c in cells} if inputs is not None else {}
    states = _states(cells, path, digests)
    todo = [c for c, state in zip(cells, states) if state != "current"]
    found = borrowable(todo, digests, reuse, path=path)  # its own file too, as run_grid does
    frame = pd.DataFrame({"method": [c.method for c in cells], "refiner": [c.refiner for c in cells],
                          "state": states, "borrowable": [c.key in found for c in cells]})
    table = pd.crosstab([frame.method, frame.refiner], frame.state).reindex(columns=["current", "stale", "suspect", "missing"],
                                                                           fill_value=0)
    order = list(dict.fromkeys(zip(frame.method, frame.refiner)))
    table = table.reindex(order)
    table["cells"] = table.sum(axis=1)
    table["borrowable"] = frame.groupby(["method", "refiner"], sort=False).borrowable.sum().reindex(order).astype(int)
    return table
