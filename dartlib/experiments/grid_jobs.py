"""One grid's cells on one profile, as ``python -m dartlib grid`` runs them (docs/cli.md, the grids):
the cells chosen (by method, by refiner, by shard), their context prepared once, then the cells
computed, counted (current, stale, suspect, missing) or given their per-image outcomes.

A grid is described by its registry entry (:data:`dartlib.studies.grids.GRIDS`): how a profile's
context is prepared, and, where its cells need contexts of their own, ``context_of``. Nothing here
knows a grid by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dartlib.experiments.engine import TestTimeContext, evaluate_cell, run_cells
from dartlib.models.checkpoints import TrainedInputsMissing
from dartlib.experiments.grid import Cell, shard
from dartlib.experiments.grid_status import grid_status
from dartlib.experiments.outcome_backfill import fill_outcomes
from dartlib.experiments.settings import Settings


class CellChoiceError(ValueError):
    """A method or refiner asked for that none of the grid's cells has; the message lists the valid ones."""


def choose_cells(cells: Sequence[Cell], *, methods: Sequence[str] = (), refiners: Sequence[str] = (),
                 shard_spec: str | None = None) -> list[Cell]:
    """The cells whose method is one of ``methods`` and whose refiner is one of ``refiners`` (empty:
    any), then every n-th from i of those (``shard_spec`` ``i/n``, :func:`dartlib.experiments.grid.shard`);
    an unknown method or refiner raises :class:`CellChoiceError` naming the grid's own."""
    cells = list(cells)
    for field, keep in (("method", methods), ("refiner", refiners)):
        if not keep:
            continue
        valid = list(dict.fromkeys(getattr(c, field) for c in cells))
        unknown = [v for v in keep if v not in valid]
        if unknown:
            raise CellChoiceError(f"unknown {field} {', '.join(unknown)}; valid: {', '.join(valid)}")
        cells = [c for c in cells if getattr(c, field) in keep]
    return shard(cells, shard_spec) if shard_spec else cells


@dataclass
class GridJob:
    """A grid's chosen ``cells`` with their prepared ``context`` (``meta``: the source model's
    metadata), ``context_of(cell)`` the context a cell runs in, and ``path`` the grid's results file."""

    experiment: str
    cells: list[Cell]
    context: TestTimeContext
    meta: dict
    context_of: Callable[[Cell], TestTimeContext]
    path: Path

    def _inputs(self, cell: Cell) -> str:
        return self.context_of(cell).inputs(cell)

    def status(self, *, reuse: Sequence[Path] = ()) -> pd.DataFrame:
        """Current, stale, suspect and missing cells per method and refiner, and how many of those
        :meth:`run` would borrow from ``reuse``; computes nothing."""
        return grid_status(self.cells, path=self.path, inputs=self._inputs, reuse=reuse)

    def run(self, *, reuse: Sequence[Path] = ()) -> None:
        """Compute the cells not yet current (borrowing equal rows from ``reuse``), resumable."""
        run_cells(self.cells, self.context_of, path=self.path, experiment=self.experiment, cell_progress=True,
                  reuse=list(reuse))
        self.context.save_shared_source()  # a context with a logits store keeps its forwards for the next run

    def fill_outcomes(self, *, borrowers: Sequence[Path] = ()) -> dict[str, int]:
        """Recompute the current rows that lack per-image outcomes (docs/noise.md): an equal accuracy
        adds them, a different one replaces the row and the copies in ``borrowers``' files; the counts
        of :func:`dartlib.experiments.outcome_backfill.fill_outcomes`."""
        counts = fill_outcomes(self.cells, lambda cell: evaluate_cell(cell, self.context_of(cell)), path=self.path,
                               experiment=self.experiment, inputs=self._inputs, borrowers=list(borrowers))
        self.context.save_shared_source()
        return counts


def prepare_job(*, experiment: str, prepare: Callable, context_of: Callable | None, settings: Settings,
                cells: list[Cell], path: Path, command: str) -> GridJob:
    """The context of ``cells`` prepared once by the grid's ``prepare``, which loads the trained inputs
    and trains nothing (the grid's training stage runs before it, or not at all for ``grid --status``);
    a missing one raises :class:`~dartlib.models.checkpoints.TrainedInputsMissing` naming ``command``,
    the grid's own)."""
    try:
        context, meta = prepare(settings=settings, progress=True)[:2]
    except TrainedInputsMissing as err:
        raise TrainedInputsMissing(err.paths, command=command) from None
    of_cell = context_of(settings, context) if context_of else (lambda _: context)
    return GridJob(experiment=experiment, cells=cells, context=context, meta=meta, context_of=of_cell, path=path)
