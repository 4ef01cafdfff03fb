"""Per-image outcomes for rows stored without them: each such cell of a grid computed again under its
claim (:func:`fill_outcomes`), its outcomes added where the accuracy reproduces and the row replaced
where it does not, and the row as it now is given to every file that borrowed it
(:func:`copy_to_borrowers`)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tqdm import tqdm

from dartlib.experiments.cell_claims import CellClaims
from dartlib.experiments.grid import (Cell, StaleRowsWarning, _append_rows, _results_lock, _states, read_results,
                                      store_row)
from dartlib.experiments.outcomes import read_sidecar, sidecar_check, write_lines


def copy_to_borrowers(key: str, *, path: Path, borrowers: Sequence[Path]) -> list[Path]:
    """Give each file of ``borrowers`` that holds the row ``key`` with the digest it has in ``path``
    (a row it borrowed, :func:`dartlib.experiments.grid.run_grid`'s ``reuse``) ``path``'s row and
    outcomes, under its own experiment name; returns the files changed. So a row recomputed in its
    own file never leaves an older copy elsewhere."""
    source = read_results(path)
    row = source[source["key"].astype(str) == key]
    if row.empty:
        return []
    row = row.iloc[0].to_dict()
    side = read_sidecar(path)
    lines = side[side["key"].astype(str) == key].to_dict("records")
    changed = []
    for other in borrowers:
        if not Path(other).is_file() or Path(other).resolve() == Path(path).resolve():
            continue
        stored = read_results(Path(other))
        copy = stored[(stored["key"].astype(str) == key) & (stored["inputs"].astype(str) == str(row["inputs"]))]
        if copy.empty:
            continue
        theirs = read_sidecar(Path(other))
        if (float(copy.accuracy.iloc[0]) == float(row["accuracy"])
                and theirs[theirs["key"].astype(str) == key].to_dict("records") == lines):
            continue
        _append_rows([{**row, "experiment": copy.experiment.iloc[0]}], Path(other), outcomes=lines)
        changed.append(Path(other))
    return changed


def fill_outcomes(cells: Iterable[Cell], evaluate: Callable[[Cell], dict], *, path: Path, experiment: str,
                  inputs: Callable[[Cell], str] | None = None, progress: bool = True,
                  borrowers: Sequence[Path] = ()) -> dict[str, int]:
    """Give the current rows of ``cells`` in ``path`` that lack per-image outcomes
    (:mod:`dartlib.experiments.outcomes`) theirs, by computing each such cell again: a recomputed
    accuracy equal to the stored one (to the file's 6 significant digits) adds the outcomes and
    leaves the row as it is; one that differs replaces the row (it did not reproduce, so the new
    value is stored); a suspect row (:func:`dartlib.experiments.grid.suspect_rows`) is recomputed and
    replaced. Cells that are missing or stale are left to :func:`dartlib.experiments.grid.run_grid`.
    ``borrowers``: the results files that may hold copies of these rows; each copy is given the row
    and outcomes as they now are (:func:`copy_to_borrowers`). Returns counts: checked (equal),
    replaced, already (had outcomes), skipped (not current)."""
    from dartlib.experiments.outcomes import checked_outcomes

    cells = list(cells)
    digests = {c.key: inputs(c) for c in cells} if inputs is not None else {}
    states = _states(cells, path, digests)
    done = read_results(path, suspect="keep")
    have = checked_outcomes(done, path)
    stored = dict(zip(done["key"].astype(str), zip(done["inputs"].astype(str), done["accuracy"])))
    counts = {"checked": 0, "replaced": 0, "already": 0, "skipped": 0}
    todo = []
    for cell, state in zip(cells, states):
        if state == "suspect":
            todo.append(cell)  # its row contradicts itself or its outcomes: recomputed and replaced below
        elif state != "current":
            counts["skipped"] += 1
        elif (cell.key, stored[cell.key][0]) in have:
            counts["already"] += 1
        else:
            todo.append(cell)
    bar = tqdm(total=len(todo), desc=f"{experiment} outcomes", unit="cell", **({} if progress else {"disable": True}))
    # as run_grid: a cell another process holds is skipped and waited for once this one is through its
    # list, so processes started together share the cells instead of queueing behind one another
    with CellClaims(path) as claims:
        held = []
        for wait, queue in ((False, todo), (True, held)):
            for cell in queue:
                if not claims.claim(cell.key, wait=wait, label=cell.label()):
                    held.append(cell)
                    continue
                try:
                    _fill_one(cell, evaluate, path=path, experiment=experiment, digests=digests, counts=counts,
                              borrowers=borrowers, bar=bar)
                finally:
                    claims.release(cell.key)
                bar.update()
    bar.close()
    return counts


def _fill_one(cell: Cell, evaluate: Callable[[Cell], dict], *, path: Path, experiment: str, digests: dict[str, str],
              counts: dict[str, int], borrowers: Sequence[Path], bar: tqdm) -> None:
    """One cell of :func:`fill_outcomes`, computed under its claim; the stored row is read again
    first, since another process may have given it outcomes (or replaced it) meanwhile."""
    done = read_results(path, suspect="keep")
    row = done[done["key"].astype(str) == cell.key]
    if row.empty:
        counts["skipped"] += 1
        return
    digest, accuracy = str(row["inputs"].iloc[0]), float(row["accuracy"].iloc[0])
    state = _states([cell], path, digests)[0]
    if state == "current" and (cell.key, digest) in sidecar_check(done, path).agree:
        counts["already"] += 1  # given its outcomes by another process while this one waited
        return
    if state not in ("current", "suspect"):
        counts["skipped"] += 1
        return
    bar.set_postfix_str(cell.label())
    start = time.perf_counter()
    result = evaluate(cell)
    seconds = time.perf_counter() - start
    if state == "current" and float(f"{result['accuracy']:.6g}") == accuracy:
        line = {"key": cell.key, "inputs": digest, **result["outcomes"].encode()}
        with _results_lock(path):
            write_lines([line], path)
        counts["checked"] += 1
    else:
        why = "its stored row is suspect" if state == "suspect" else f"stored {accuracy:.6g}"
        warnings.warn(f"{path}: {cell.label()} gave {result['accuracy']:.6g}, {why}; the row is replaced by the "
                      f"recomputed value", StaleRowsWarning, stacklevel=3)
        store_row(cell, result, path=path, experiment=experiment, seconds=seconds, digest=digests.get(cell.key, digest))
        counts["replaced"] += 1
    copy_to_borrowers(cell.key, path=path, borrowers=borrowers)
