"""Experiment grids: cells evaluated one by one, keyed by their full configuration.

A cell is one (dataset, shift, shift_param, corruption, severity, method, refiner, params, seed)
combination. ``run_grid`` appends each finished cell to ``results/<profile>/<experiment>.csv``
(rewritten to a temporary file and renamed, so the file is always complete), skips the cells
already there, and therefore resumes an interrupted run. Cells are independent, so a grid can be
split across processes or machines by handing each a subset of cells (:func:`shard`); processes
sharing one results file take a lock around each append, so none overwrites another's rows, and
claim each cell before computing it (:class:`dartlib.experiments.cell_claims.CellClaims`), so that N
processes started on one grid compute each cell once.
To use more cores, GPUs or machines, :func:`dartlib.experiments.distributed.run_grid_ray` runs the
cells on Ray workers and stores the same rows (docs/scale-out.md).

A cell's key names its configuration, not the trained inputs it was computed with (the source
model, g_phi, NOTE's IABN copy). Callers that know those pass ``inputs`` (a digest per cell, e.g.
:meth:`dartlib.experiments.engine.TestTimeContext.inputs`); it is stored with the row, and a stored row whose
digest differs from the current one is computed again and replaced, so retraining g_phi with
other settings never leaves results of the old one in a table. A row without a digest (written
by a caller that passes none) is reused by such callers only; where a digest is known, a row
that cannot show it is computed again.

Two experiments may share cells (notebook 09's CIFAR-10C-imb table and notebook 11's grid run the
same NoAdapt and BNAdapt streams). ``run_grid(..., reuse=[other.csv])`` copies such a row instead of
computing it, but only when its digest is known and equals the stored one: a row is never borrowed
on its key alone.

A stored row is checked against itself and its sidecar when read (:func:`read_results`): a row
whose ``key`` is not the hash of its own fields (an edited row), or whose per-image outcomes
contradict it (:func:`dartlib.experiments.outcomes.sidecar_check`), is *suspect*: never current,
left out of what readers get (with a :class:`SuspectRowsWarning`), and computed again by the grid,
which then replaces it.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from itertools import product
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from dartlib.data.files import DamagedFileError, atomic_path, exclusive_lock
from dartlib.experiments.cell_claims import CellClaims
from dartlib.experiments.cell_options import CellOptions, cell_options
from dartlib.experiments.outcomes import CellOutcomes, checked_outcomes, read_sidecar, sidecar, sidecar_check, write_lines

SCHEMA = ["experiment", "dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner", "params",
          "seed", "n", "accuracy", "seconds", "key", "inputs"]


@dataclass(frozen=True)
class Cell:
    dataset: str
    shift: str
    shift_param: float | None
    corruption: str
    severity: int | None
    method: str
    refiner: str = "none"
    params: str = ""
    seed: int = 0

    @property
    def key(self) -> str:
        """A stable identifier of the full configuration."""
        blob = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def options(self) -> CellOptions:
        """The typed options :attr:`params` writes (``limit=1000,test_batch=16,alpha=0.1``:
        :func:`~dartlib.experiments.cell_options.cell_options`)."""
        return cell_options(self.params)

    def label(self) -> str:
        param = "" if self.shift_param is None else f"={self.shift_param:g}"
        ref = "" if self.refiner == "none" else f"+{self.refiner}"
        return f"{self.method}{ref} {self.dataset}/{self.corruption} {self.shift}{param} s{self.seed}"


def grid(**axes: Sequence) -> list[Cell]:
    """The cartesian product of the given axes (names of :class:`Cell` fields; others default)."""
    names = [f.name for f in fields(Cell)]
    unknown = set(axes) - set(names)
    if unknown:
        raise ValueError(f"unknown grid axes {sorted(unknown)}; valid: {', '.join(names)}")
    keys = list(axes)
    return [Cell(**dict(zip(keys, values))) for values in product(*(axes[k] for k in keys))]


NUMERIC = ["shift_param", "severity", "seed", "n", "accuracy", "seconds"]


def read_results(path: Path, *, suspect: str = "drop") -> pd.DataFrame:
    """A results CSV: text columns as strings (empty stays ""), numeric columns as numbers; a
    schema column the file lacks (``seconds``, ``key``) is added empty. A file that cannot be
    parsed, or a row whose ``accuracy`` is not a number in 0..100 or whose other numeric fields
    are not numbers (a damaged or truncated row), raises
    :class:`~dartlib.data.files.DamagedFileError` naming the file and the row. Suspect rows
    (:func:`suspect_rows`) are left out with a :class:`SuspectRowsWarning` (``suspect="drop"``,
    what every reader gets) or kept (``"keep"``: the grid's own bookkeeping, which replaces them)."""
    if suspect not in ("drop", "keep"):
        raise ValueError(f"suspect must be 'drop' or 'keep', not {suspect!r}")
    if not path.is_file():
        return pd.DataFrame(columns=SCHEMA)
    stamps = _file_stamps(path)  # before reading: a file rewritten meanwhile is checked again next time
    remedy = f"delete the damaged row (or the whole file {path.name}) and run the grid again to recompute it"
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - 1))
        if fh.read(1) not in (b"\n", b""):
            raise DamagedFileError(path, "its last line is cut short (a truncated file)", remedy)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DamagedFileError(path, f"not a results CSV ({str(err).strip()})", remedy) from None
    if "accuracy" not in frame:
        raise DamagedFileError(path, f"no accuracy column (columns: {', '.join(map(str, frame.columns))})", remedy)
    for col in SCHEMA:  # files written outside the runner may lack its bookkeeping columns
        if col not in frame:
            frame[col] = ""
    for col in NUMERIC:
        raw = frame[col]
        frame[col] = pd.to_numeric(raw, errors="coerce")
        bad = frame[col].isna() & (raw.str.strip() != "") & (raw.str.lower() != "nan")
        if col == "accuracy":
            bad |= ~frame[col].between(0, 100)
        if col == "n":  # a count: finite, >= 0, present
            bad |= (raw.str.strip() != "") & ~(frame[col].between(0, float("inf")) & (frame[col] % 1 == 0))
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            what = {"accuracy": "a number in 0..100", "n": "a finite count >= 0"}.get(col, "a number")
            raise DamagedFileError(path, f"line {i + 2} has {col} {raw.iloc[i]!r}, not {what} ({int(bad.sum())} such rows)",
                                   remedy)
    keys = frame["key"].astype(str)
    twice = keys[(keys != "") & keys.duplicated(keep=False)]
    if len(twice):
        lines = [i + 2 for i in twice.index[twice == twice.iloc[0]]]
        raise DamagedFileError(path, f"lines {' and '.join(map(str, lines))} hold the same cell (key {twice.iloc[0]}) "
                               f"with accuracies {', '.join(str(frame['accuracy'].iloc[i - 2]) for i in lines)} "
                               f"({twice.nunique()} such keys); a cell has one result",
                               "delete every row but the one to keep (or all of them and run the grid again)")
    if suspect == "drop":
        doubtful = _suspect_cached(frame, path, stamps)
        if doubtful:
            key, why = next(iter(doubtful.items()))
            warnings.warn(f"{path}: {len(doubtful)} row(s) are suspect and left out (key {key}: {why}); the grid "
                          f"computes them again", SuspectRowsWarning, stacklevel=2)
            frame = frame[~frame["key"].astype(str).isin(doubtful)].reset_index(drop=True)
    return frame


def folder_outcomes(folder: Path) -> dict[tuple[str, str], CellOutcomes]:
    """Every checked outcome of the results files in ``folder`` (:func:`checked_outcomes`), keyed by
    (key, inputs): what :mod:`dartlib.analysis.noise` needs to put an SE on that folder's rows."""
    out: dict[tuple[str, str], CellOutcomes] = {}
    for side in sorted(Path(folder).glob("*.outcomes.csv")):
        results = side.with_name(side.name.replace(".outcomes.csv", ".csv"))
        if results.is_file():
            out.update(checked_outcomes(read_results(results), results))
    return out


def suspect_rows(frame: pd.DataFrame, path: Path) -> dict[str, str]:
    """The rows of results file ``path`` (read as ``frame``) that cannot be trusted, key -> why: a
    ``key`` that is not the hash of the row's own fields (the row was edited), or per-image
    outcomes in the sidecar that contradict the row
    (:func:`dartlib.experiments.outcomes.sidecar_check`)."""
    out = {}
    for i, row in enumerate(frame.to_dict("records")):
        key = str(row["key"])
        if key and key not in _field_keys(row):
            out[key] = f"line {i + 2}'s key is not the hash of its fields (the row was edited)"
    if len(frame):
        out.update({k: why for k, why in sidecar_check(frame, path).suspect.items() if k not in out})
    return out


_SUSPECT: dict[tuple, dict[str, str]] = {}


def _file_stamps(path: Path) -> tuple:
    """What identifies a version of results file ``path`` and of its sidecar: (mtime, size, inode)."""
    from dartlib.experiments.outcomes import sidecar

    out = []
    for f in (Path(path), sidecar(Path(path))):
        try:
            st = f.stat()
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return (str(Path(path).resolve()), *out)


def _suspect_cached(frame: pd.DataFrame, path: Path, stamps: tuple) -> dict[str, str]:
    """:func:`suspect_rows` of a results file as read, remembered per version of the file and its
    sidecar (``stamps``), so that a grid checking its file before each cell hashes its rows once."""
    if stamps not in _SUSPECT:
        if len(_SUSPECT) >= 16:
            _SUSPECT.pop(next(iter(_SUSPECT)))
        _SUSPECT[stamps] = suspect_rows(frame, path)
    return dict(_SUSPECT[stamps])


def _field_keys(row: Mapping[str, object]) -> set[str]:
    """The keys a writer may have given the cell of ``row``: its ``shift_param`` as the float the
    file holds, or as the whole number a grid may have been declared with."""
    def number(value: object, kind: type) -> object:
        return None if value is None or value == "" or pd.isna(value) else kind(value)

    try:
        base = dict(dataset=str(row["dataset"]), shift=str(row["shift"]), corruption=str(row["corruption"]),
                    severity=number(row["severity"], int), method=str(row["method"]), refiner=str(row["refiner"]),
                    params=str(row["params"]), seed=int(row["seed"]))
    except (TypeError, ValueError):
        return set()
    param = number(row["shift_param"], float)
    forms = {param, int(param)} if param is not None and float(param).is_integer() else {param}
    return {Cell(shift_param=p, **base).key for p in forms}

def row_key(row: Mapping[str, object]) -> str:
    """The key of the cell a stored row describes, read from its fields; for a row stored before
    rows carried keys (its ``key`` empty), so that the recomputed row replaces it."""
    return str(row["key"]) if str(row["key"]) else _stored_cell(row).key


def _write_atomic(frame: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")


def parse_shard(spec: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n), with 0 <= i < n."""
    try:
        i, n = (int(v) for v in spec.split("/"))
    except ValueError:
        raise ValueError(f"shard must read i/n with integers 0 <= i < n, got {spec!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"shard must read i/n with integers 0 <= i < n, got {spec!r}")
    return i, n


def shard(cells: Sequence[Cell], spec: str) -> list[Cell]:
    """The ``i``-th of ``n`` interleaved parts of a grid, ``spec`` = "i/n" (0 <= i < n)."""
    i, n = parse_shard(spec)
    return list(cells)[i::n]


def _results_lock(path: Path):
    """The exclusive lock that every writer of results file ``path`` (and of its outcomes) holds."""
    return exclusive_lock(path)


def _append_rows(rows: list[dict], path: Path, *, outcomes: list[dict] = ()) -> None:
    """Add finished cells to ``path`` under an exclusive lock, re-reading the file first so that
    rows written meanwhile by other processes are kept; older rows of the same cells are replaced.
    ``outcomes``: their per-image outcome lines (:mod:`dartlib.experiments.outcomes`), written to
    the sidecar first, so that a row never names outcomes that are not there."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with _results_lock(path):
        write_lines(list(outcomes), path)
        done = read_results(path, suspect="keep")  # a suspect row stays until its cell's new row replaces it
        keys = {str(r["key"]) for r in rows}
        done = done[pd.Series([row_key(r) not in keys for r in done.to_dict("records")], index=done.index, dtype=bool)]
        new = pd.DataFrame(rows)[SCHEMA]
        # a cell without shift_param gives an object column of None: concatenated, it would turn the
        # file's numeric column to objects and rewrite every other row's 1 as 1.0
        new[NUMERIC] = new[NUMERIC].apply(pd.to_numeric)
        done = pd.concat([done, new], ignore_index=True) if len(done) else new
        _write_atomic(done, path)


def drop_rows(keys: Iterable[str], *, path: Path) -> None:
    """Remove the rows of ``keys`` and their outcome lines from results file ``path``, under its lock."""
    keys = {str(k) for k in keys}
    with _results_lock(path):
        done = read_results(path, suspect="keep")
        _write_atomic(done[~done["key"].astype(str).isin(keys)], path)
        side = read_sidecar(path)
        if len(side):
            with atomic_path(sidecar(path)) as tmp:
                side[~side["key"].astype(str).isin(keys)].to_csv(tmp, index=False)


def _states(cells: list[Cell], path: Path, digests: dict[str, str]) -> list[str]:
    """Per cell: ``current`` (stored, with the digest its inputs have now, where that is known),
    ``stale`` (stored with another digest, or without one where one is known), ``suspect``
    (stored, but the row contradicts its key or its outcomes: :func:`suspect_rows`) or ``missing``."""
    done = read_results(path, suspect="keep")
    stored = dict(zip(done["key"].astype(str), done["inputs"].astype(str))) if len(done) else {}
    doubtful = _suspect_cached(done, path, _file_stamps(path)) if len(done) else {}
    return ["missing" if c.key not in stored else "suspect" if c.key in doubtful else
            "stale" if c.key in digests and stored[c.key] != digests[c.key] else "current" for c in cells]


def _unlabelled(cell: Cell) -> str:
    """The key of ``cell`` without its refiner's name: two cells that differ only in what their
    refiner is called."""
    return replace(cell, refiner="" if cell.refiner == "none" else "*").key


def _stored_cell(row: Mapping[str, object]) -> Cell:
    def number(value: object, kind: type) -> object:
        return None if value is None or value == "" or pd.isna(value) else kind(value)

    return Cell(dataset=str(row["dataset"]), shift=str(row["shift"]), shift_param=number(row["shift_param"], float),
                corruption=str(row["corruption"]), severity=number(row["severity"], int), method=str(row["method"]),
                refiner=str(row["refiner"]), params=str(row["params"]), seed=int(row["seed"]))


def borrowable(todo: Sequence[Cell], digests: Mapping[str, str], reuse: Sequence[Path], *,
               path: Path | None = None) -> dict[str, tuple[Path, dict]]:
    """The cells of ``todo`` that another results file of ``reuse`` holds, by cell key: (that file,
    its row). A row matches by a known, equal digest and by key, or by every field but the
    refiner's name: the digest covers the refiner's weights and settings
    (:meth:`dartlib.experiments.engine.TestTimeContext.inputs`), so a row of ``alpha0.1-epochs50``
    is the row of a profile's ``dart`` when both name the same trained g_phi. ``path``, the grid's
    own file, is searched first, under other names only (a cell's own row there is stale). Reads only."""
    found: dict[str, tuple[Path, dict]] = {}
    left = [c for c in todo if digests.get(c.key)]
    sources = list(dict.fromkeys(Path(p).resolve() for p in ([path] if path is not None else []) + list(reuse)))
    for other in sources:
        if not left:
            break
        if not other.is_file():
            continue
        records = read_results(Path(other)).to_dict("records")
        by_key = {str(r["key"]): r for r in records}
        by_inputs = {(_unlabelled(_stored_cell(r)), str(r["inputs"])): r for r in records if str(r["inputs"])}
        still = []
        for cell in left:
            digest = digests[cell.key]
            row = by_key.get(cell.key)
            if row is None or str(row["inputs"]) != digest:
                row = by_inputs.get((_unlabelled(cell), digest))
            if row is None:
                still.append(cell)
            else:
                found[cell.key] = (Path(other), row)
        left = still
    return found


def _borrow(todo: list[Cell], digests: dict[str, str], reuse: Sequence[Path], *, path: Path,
            experiment: str) -> list[Cell]:
    """Copy into ``path`` the rows of ``reuse`` that :func:`borrowable` finds for cells of
    ``todo``, each stored under the cell's own refiner name and key with its outcome line; return
    the cells still to compute."""
    found = borrowable(todo, digests, reuse, path=path)
    for other in dict.fromkeys(source for source, _ in found.values()):
        mine = {key: row for key, (source, row) in found.items() if source == other}
        cells = {c.key: c for c in todo if c.key in mine}
        borrowed = [{**row, "experiment": experiment, "refiner": cells[key].refiner, "key": key}
                    for key, row in mine.items()]
        targets: dict[str, list[str]] = {}  # a stored row's key -> the cells it is copied to
        for key, row in mine.items():
            targets.setdefault(str(row["key"]), []).append(key)
        side = read_sidecar(other)
        lines = [{**line, "key": key} for line in side.to_dict("records") for key in targets.get(line["key"], ())
                 if line["inputs"] == digests[key]]
        _append_rows(borrowed, path, outcomes=lines)  # one locked rewrite of the file, not one per row
    return [c for c in todo if c.key not in found]


def run_grid(
    cells: Iterable[Cell],
    evaluate: Callable[[Cell], dict],
    *,
    path: Path,
    experiment: str,
    progress: bool = True,
    inputs: Callable[[Cell], str] | None = None,
    reuse: Sequence[Path] = (),
) -> pd.DataFrame:
    """Evaluate every cell not yet in ``path``; ``evaluate(cell)`` returns at least ``n`` and
    ``accuracy`` (%). ``inputs(cell)``: a digest of the trained inputs the cell uses; a stored row
    with another digest is recomputed (see the module docstring). ``reuse``: other results files
    whose rows of the same cell, stored with the same known digest, are copied (under this
    ``experiment``) instead of computed. Returns the results of all requested cells, in the order
    requested (not the order they were computed or borrowed in).

    Processes running on the same ``path`` share the work: each claims a cell before computing it
    (:class:`CellClaims`), skips the cells another process holds and, once through its list, waits
    for those and computes only the ones still not current (their process ended first). Each cell
    is computed once, and the file ends with the rows one process alone would have written."""
    cells = list(cells)
    digests = {c.key: inputs(c) for c in cells} if inputs is not None else {}
    todo = pending_cells(cells, path=path, experiment=experiment, digests=digests, reuse=reuse)
    # progress=False forces the bar off; otherwise tqdm decides (TQDM_DISABLE=1 silences it)
    bar = tqdm(total=len(todo), desc=experiment, unit="cell", **({} if progress else {"disable": True}))
    with CellClaims(path) as claims:
        held = []
        for wait, queue in ((False, todo), (True, held)):
            for cell in queue:
                if not claims.claim(cell.key, wait=wait, label=cell.label()):
                    held.append(cell)  # another process computes it now: look again at the end
                    continue
                try:
                    if _states([cell], path, digests) != ["current"]:  # not stored meanwhile by another
                        bar.set_postfix_str(cell.label())
                        start = time.perf_counter()
                        result = evaluate(cell)
                        store_row(cell, result, path=path, experiment=experiment,
                                  seconds=time.perf_counter() - start, digest=digests.get(cell.key, ""))
                finally:
                    claims.release(cell.key)
                bar.update()
    bar.close()
    return stored_rows(cells, path=path)


def pending_cells(cells: list[Cell], *, path: Path, experiment: str, digests: dict[str, str],
                  reuse: Sequence[Path] = ()) -> list[Cell]:
    """The cells of a grid that are not current in ``path`` (missing, or stored with another input
    digest than ``digests`` gives), less those borrowed from ``reuse`` (see :func:`run_grid`), in grid order."""
    states = _states(cells, path, digests)
    stale = [c.key for c, state in zip(cells, states) if state == "stale"]
    if stale:  # never used, never silently: say which file's rows are replaced
        warnings.warn(f"{path}: {len(stale)} stored row(s) were computed under other inputs than this run's "
                      f"(settings, trained models, test data or code revision); they are removed from the file and "
                      f"recomputed", StaleRowsWarning, stacklevel=3)
        # removed now, not as each is recomputed: a run stopped part-way leaves a file whose every row is current
        drop_rows(stale, path=path)
    if states.count("suspect"):
        warnings.warn(f"{path}: {states.count('suspect')} stored row(s) contradict their key or their per-image "
                      f"outcomes; they are not used, and are recomputed", SuspectRowsWarning, stacklevel=3)
    todo = [c for c, state in zip(cells, states) if state != "current"]
    return _borrow(todo, digests, reuse, path=path, experiment=experiment)


class StaleRowsWarning(UserWarning):
    """Stored rows of a grid whose input digest differs from the run's: they are recomputed."""


class SuspectRowsWarning(StaleRowsWarning):
    """Stored rows that contradict their key or their per-image outcomes (:func:`suspect_rows`):
    left out of what readers get, and recomputed by the grid."""


def store_row(cell: Cell, result: dict, *, path: Path, experiment: str, seconds: float, digest: str) -> None:
    """Append one finished cell (``result``: at least ``n`` and ``accuracy``) to ``path``, replacing
    an older row of the same cell."""
    result = dict(result)
    outcomes = result.pop("outcomes", None)
    row = {**asdict(cell), "experiment": experiment, **result, "seconds": seconds, "key": cell.key, "inputs": digest}
    lines = [{"key": cell.key, "inputs": digest, **outcomes.encode()}] if outcomes is not None else []
    _append_rows([row], path, outcomes=lines)


def stored_rows(cells: list[Cell], *, path: Path) -> pd.DataFrame:
    """The stored rows of ``cells``, in the order of ``cells`` (as read back from the file, so a
    fresh run and a resumed one return the same values)."""
    done = read_results(path)
    position = {c.key: i for i, c in enumerate(cells)}
    done = done[done["key"].astype(str).isin(position)]
    order = done["key"].astype(str).map(position)
    return done.iloc[order.argsort(kind="stable").to_numpy()].reset_index(drop=True)
