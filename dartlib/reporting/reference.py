"""A profile's results against the values stored with the suite, within stated tolerances.

The committed weights (:mod:`dartlib.models.artefacts`) remove training's machine dependence, but
inference and test-time updates still run on each machine's math kernels: another CPU type
rounds differently in the last bits, which flips the predictions of a few near-tie images, and a
test-time method that updates on its own predictions can carry such a flip a little further. So
the notebooks' printed numbers are masked for nbval (``tests/nbval_sanitize.cfg`` keeps their
text, counts and verdicts), and the numbers themselves are compared here, column by column,
with the tolerance and reason of :data:`RULES`. Every results file of the profile must have its
stored copy (``tests/golden/<profile>/``) with the same rows, the same configuration columns and
digests, and values within tolerance; a real regression (a sign flipped in DART's refinement, a
changed label-shift protocol) moves accuracies by several points, or changes counts, and fails.

Refresh the stored values after an intended change with ``python -m dartlib reference update``
(and say why in the commit).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dartlib.paths import REPO_ROOT, results_dir

REFERENCE_DIR: Path = REPO_ROOT / "tests" / "golden"
# Measured times (and the machine a timing names): they vary from run to run and machine to machine
# and are not compared.
TIMING_COLUMNS: frozenset[str] = frozenset({"seconds", "wall_clock_s", "wall_clock_vs_bnadapt", "machine"})
# A grid row's input digest covers this machine's test data (a corrupted set generated here): a
# cache key, not a result. Another CPU may generate a set a few grey levels apart, which the
# accuracies' tolerances cover; its digest is not compared.
CACHE_COLUMNS: frozenset[str] = frozenset({"inputs"})
# Binomial standard errors an accuracy may move: see Rule("accuracy").
ACCURACY_SES: float = 3.0


@dataclass(frozen=True)
class Rule:
    """How a float column is compared: ``|ours - stored| <= abs_tol + rel_tol * |stored|``, or,
    for ``binomial``, within :data:`ACCURACY_SES` standard errors of an accuracy (%) over ``n``
    images (never less than one image's worth, 100 / n)."""

    abs_tol: float = 0.0
    rel_tol: float = 0.0
    binomial: bool = False
    reason: str = ""


ACCURACY = Rule(binomial=True, reason=(
    "an accuracy over n test images: another CPU's rounding flips a few near-tie predictions, and a "
    "test-time method that updates on its predictions can carry a flip on; 3 binomial standard errors "
    "bound that while a broken method or protocol moves accuracies by more"))
# Per file and column; "*" applies to every file. Columns not named: exact for strings and
# integers, DEFAULT for floats.
DEFAULT = Rule(rel_tol=1e-3, abs_tol=1e-3, reason="a deterministic float: last-bit rounding only")
RULES: dict[tuple[str, str], Rule] = {
    ("*", "accuracy"): ACCURACY,
    # Figure 3's curve: means over long-tailed streams of at least 2,478 images (rho = 100), which
    # the file does not list; 3 binomial standard errors at 85% over 2,478 images are 2.1 points.
    # Notebook 16: inference from its committed ResNet-18 and g_phi (dartlib.studies.own_model), stored
    # from a run on an AMD EPYC (lscpu "Model name"; the files' metadata names the CPU they were
    # trained on); other kernels (ONEDNN_MAX_CPU_ISA=SSE41 MKL_CBWR=COMPATIBLE) gave the same five numbers.
    ("own_model.csv", "accuracy"): Rule(binomial=True, reason=(
        "inference from notebook 16's committed model and g_phi (stored from an AMD EPYC run): another CPU's "
        "rounding flips a few near-tie predictions, which 3 binomial standard errors bound; a model trained "
        "from scratch instead of the committed one moves these by several points and fails")),
    ("accuracy_vs_rho.csv", "accuracy"): Rule(abs_tol=2.0, reason=(
        "a mean accuracy over long-tailed streams of at least 2,478 images: about 3 binomial standard errors")),
}


def rule_for(file: str, column: str) -> Rule:
    return RULES.get((file, column), RULES.get(("*", column), DEFAULT))


def tolerance(rule: Rule, stored: np.ndarray, n: np.ndarray | None) -> np.ndarray:
    """Per-row tolerance of ``rule`` around the ``stored`` values."""
    stored = np.asarray(stored, dtype=float)
    if rule.binomial:
        if n is None:
            raise ValueError("a binomial tolerance needs an n column; give this file's column a rule of its own "
                             "in dartlib.reporting.reference.RULES")
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        p = np.clip(stored / 100.0, 0.0, 1.0)
        se = 100.0 * np.sqrt(np.maximum(p * (1 - p), 1.0 / n) / n)
        return np.maximum(ACCURACY_SES * se, 100.0 / n)
    return rule.abs_tol + rule.rel_tol * np.abs(stored)


def compare_frames(ours: pd.DataFrame, stored: pd.DataFrame, *, file: str) -> list[str]:
    """Differences between a results table and its stored copy beyond the stated tolerances, as
    readable lines (empty when they agree)."""
    problems: list[str] = []
    if list(ours.columns) != list(stored.columns):
        return [f"{file}: columns {list(ours.columns)} differ from the stored {list(stored.columns)}"]
    if len(ours) != len(stored):
        return [f"{file}: {len(ours)} rows, the stored copy has {len(stored)}"]
    floats = [c for c in stored.columns if pd.api.types.is_float_dtype(stored[c]) or pd.api.types.is_float_dtype(ours[c])]
    exact = [c for c in stored.columns if c not in floats and c not in TIMING_COLUMNS | CACHE_COLUMNS]
    # Rows are matched by their configuration (every exact column), whatever their order.
    ours = ours.sort_values(exact, kind="stable").reset_index(drop=True) if exact else ours
    stored = stored.sort_values(exact, kind="stable").reset_index(drop=True) if exact else stored
    for column in exact:
        a, b = _as_text(ours[column]), _as_text(stored[column])
        bad = np.flatnonzero(a != b)
        if len(bad):
            i = bad[0]
            problems.append(f"{file}: column {column!r} differs in {len(bad)} row(s), e.g. {a[i]!r} vs stored {b[i]!r}")
    n = stored["n"].to_numpy() if "n" in stored.columns else None
    for column in floats:
        if column in TIMING_COLUMNS:
            continue
        rule = rule_for(file, column)
        a = pd.to_numeric(ours[column], errors="coerce").to_numpy(dtype=float)
        b = pd.to_numeric(stored[column], errors="coerce").to_numpy(dtype=float)
        both_nan = np.isnan(a) & np.isnan(b)
        tol = tolerance(rule, b, n if rule.binomial else None)
        bad = np.flatnonzero(~both_nan & ~(np.abs(a - b) <= tol))
        for i in bad[:5]:
            where = ", ".join(f"{c}={ours[c].iloc[i]}" for c in exact if c not in ("experiment", "key", "inputs"))
            problems.append(f"{file}: {column} {a[i]:.4g} vs stored {b[i]:.4g} (tolerance {tol[i]:.3g}) at {where}")
        if len(bad):
            more = f"{len(bad) - 5} more row(s) beyond tolerance; " if len(bad) > 5 else ""
            problems.append(f"{file}: {column}: {more}{len(bad)} of {len(b)} rows differ; the tolerance: "
                            f"{rule.reason or 'see dartlib.reporting.reference.RULES'}")
    return problems


def _as_text(column: pd.Series) -> np.ndarray:
    return np.array(["" if pd.isna(v) else str(v) for v in column], dtype=object)


def read_table(path: Path, *, remedy: str) -> pd.DataFrame:
    """A results CSV, read strictly: an empty or truncated file, a line with more or fewer fields
    than the header, an ``n`` that is not a finite count >= 0 or an ``accuracy`` outside 0..100
    raises :class:`~dartlib.data.files.DamagedFileError` naming the file, the line and ``remedy``
    (never a parser traceback, never a comparison of what is left). A grid's file (a ``key``
    column) is also read by the grid's own reader (:func:`dartlib.experiments.grid.read_results`:
    one row per cell)."""
    import csv

    from dartlib.data.files import DamagedFileError

    data = path.read_bytes()
    if not data.strip():
        raise DamagedFileError(path, "empty", remedy)
    if not data.endswith(b"\n"):
        lines = data.count(b"\n") + 1
        raise DamagedFileError(path, f"its last line ({lines}) is cut short (a truncated file)", remedy)
    try:
        rows = list(csv.reader(data.decode("utf-8").splitlines()))
    except (UnicodeDecodeError, csv.Error) as err:
        raise DamagedFileError(path, f"not a CSV file ({err})", remedy) from None
    header = rows[0]
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DamagedFileError(path, f"line {line} has {len(row)} fields, the header {len(header)} "
                                         f"({'an extra field' if len(row) > len(header) else 'a shifted or cut line'})",
                                   remedy)
    if len(rows) < 2:
        raise DamagedFileError(path, "a header and no rows", remedy)
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    text = pd.read_csv(path, keep_default_na=False, dtype=str)  # the fields as written, for the messages
    checks = {"n": ("a finite count >= 0", lambda v: np.isfinite(v) & (v >= 0) & (v == np.round(v))),
              "accuracy": ("a number in 0..100", lambda v: np.isnan(v) | ((v >= 0) & (v <= 100)))}
    for column, (allowed, holds) in checks.items():
        if column not in frame:
            continue
        raw = frame[column]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        bad = ~holds(values) | (np.isnan(values) & raw.notna().to_numpy() & (raw.astype(str).str.lower() != "nan"))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DamagedFileError(path, f"line {i + 2} has {column} {text[column].iloc[i]!r}, not {allowed} "
                                         f"({int(bad.sum())} such rows)", remedy)
    if "key" in frame:
        from dartlib.experiments.grid import read_results

        read_results(path)
    return frame


def _read(path: Path, *, remedy: str = "") -> pd.DataFrame:
    return read_table(path, remedy=remedy or "delete it and run the notebook that writes it again")


def compare_profile(profile: str, *, reference: Path | None = None, results: Path | None = None) -> tuple[int, list[str]]:
    """Compare every stored results file of ``profile`` with the one the run wrote; returns
    (values compared, problems). A stored file the run did not write is a problem too."""
    reference = reference or REFERENCE_DIR / profile
    results = results or results_dir(profile)
    if not reference.is_dir():
        return 0, [f"{reference}: no stored values for profile {profile!r}"]
    compared, problems = 0, []
    for stored_path in sorted(reference.glob("*.csv")):
        ours_path = results / stored_path.name
        if not ours_path.is_file():
            problems.append(f"{ours_path}: missing (the run should have written it; `python -m dartlib run "
                            f"--profile {profile}` runs every notebook)")
            continue
        ours = _read(ours_path, remedy=f"run the notebook that writes it again (`python -m dartlib run --profile "
                                       f"{profile}`), or delete it first")
        stored = _read(stored_path, remedy=f"restore it with `git checkout -- {stored_path}`")
        problems += compare_frames(ours, stored, file=stored_path.name)
        compared += int(stored.size)
    return compared, problems


def check_profile(profile: str) -> str:
    """:func:`compare_profile`, raising ``AssertionError`` with every problem; returns a one-line
    summary whose text is the same on every machine."""
    compared, problems = compare_profile(profile)
    if problems:
        raise AssertionError(f"{len(problems)} difference(s) from the stored values:\n" + "\n".join(problems))
    files = len(list((REFERENCE_DIR / profile).glob("*.csv")))
    return f"{files} results files of profile {profile} agree with the stored values ({compared} cells compared)"


def update_reference(profile: str) -> Path:
    """Store the profile's current results files as the reference (after an intended change)."""
    target = REFERENCE_DIR / profile
    target.mkdir(parents=True, exist_ok=True)
    from dartlib.data.files import atomic_path

    for path in sorted(results_dir(profile).glob("*.csv")):
        if path.name.endswith(".outcomes.csv"):  # per-image outcomes are not results rows (docs/noise.md)
            continue
        with atomic_path(target / path.name) as tmp:  # each file whole or not at all
            shutil.copyfile(path, tmp)
    return target


def has_reference(profile: str) -> bool:
    return (REFERENCE_DIR / profile).is_dir()

