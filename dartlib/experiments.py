"""Experiment grids: cells evaluated one by one, keyed by their full configuration.

A cell is one (dataset, shift, shift_param, corruption, severity, method, refiner, params, seed)
combination. ``run_grid`` appends each finished cell to ``results/<profile>/<experiment>.csv``
(rewritten to a temporary file and renamed, so the file is always complete), skips the cells
already there, and therefore resumes an interrupted run. Cells are independent, so a grid can be
split across processes or machines by handing each a subset of cells.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from itertools import product
from pathlib import Path

import pandas as pd
from tqdm import tqdm

SCHEMA = ["experiment", "dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner", "params",
          "seed", "n", "accuracy", "seconds", "key"]


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


def read_results(path: Path) -> pd.DataFrame:
    """A results CSV: text columns as strings (empty stays ""), numeric columns as numbers."""
    if not path.is_file():
        return pd.DataFrame(columns=SCHEMA)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in NUMERIC:
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def _write_atomic(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    frame.to_csv(tmp, index=False, float_format="%.6g")
    os.replace(tmp, path)


def run_grid(
    cells: Iterable[Cell],
    evaluate: Callable[[Cell], dict],
    *,
    path: Path,
    experiment: str,
    progress: bool = True,
) -> pd.DataFrame:
    """Evaluate every cell not yet in ``path``; ``evaluate(cell)`` returns at least ``n`` and
    ``accuracy`` (%). Returns the results of all requested cells."""
    cells = list(cells)
    done = read_results(path)
    finished = set(done["key"].astype(str)) if len(done) else set()
    todo = [c for c in cells if c.key not in finished]
    bar = tqdm(todo, desc=experiment, unit="cell", disable=not progress)
    for cell in bar:
        bar.set_postfix_str(cell.label())
        start = time.perf_counter()
        result = evaluate(cell)
        row = {**asdict(cell), "experiment": experiment, **result, "seconds": time.perf_counter() - start,
               "key": cell.key}
        done = pd.concat([done, pd.DataFrame([row])[SCHEMA]], ignore_index=True) if len(done) else pd.DataFrame([row])[SCHEMA]
        _write_atomic(done, path)
    keys = {c.key for c in cells}
    return done[done["key"].astype(str).isin(keys)].reset_index(drop=True)
