"""The claims ledger of a book, evaluated once per set of inputs and kept as checked JSON
(``build/book/.ledger-cache/<profile>-<key>.json``), so that the overview and the claims page read
one evaluation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dartlib.book import claims as claims_ledger
from dartlib.book.sources import BOOK_DIR, BookSources
from dartlib.experiments.settings import Settings
from dartlib.paths import REPO_ROOT


# What the ledger's evaluation reads: the claims, the paper's tables and the modules that judge. A
# change to any of them, or to a file of the profile's results folder, is a new cache key.
LEDGER_CODE = ("book/claims.py", "book/claim_readings.py", "book/verdict_rules.py", "analysis/noise.py",
               "experiments/outcomes.py", "experiments/grid.py", "reporting/paper.py", "reporting/tables.py")
LEDGER_CACHE = BOOK_DIR / ".ledger-cache"


def ledger_key(*, sources: BookSources, settings: Settings) -> str:
    """A digest of everything the ledger's evaluation of ``sources`` reads (see :data:`LEDGER_CODE`)."""
    import hashlib

    digest = hashlib.sha256(f"{sources.profile}\0{settings.test.corrupted_dataset}".encode())
    package = Path(claims_ledger.__file__).parent.parent
    files = [claims_ledger.CLAIMS_FILE, *sorted(claims_ledger.PAPER_DIR.glob("*.csv")),
             *(package / name for name in LEDGER_CODE)]
    if sources.results.is_dir():
        files += sorted(p for p in sources.results.rglob("*") if p.is_file() and "notebooks" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


def ledger_table(*, sources: BookSources, settings: Settings, cache: Path | None = LEDGER_CACHE) -> pd.DataFrame:
    """The claims ledger evaluated on ``sources`` (``claims.evaluate``), once per set of inputs:
    kept in ``cache`` (``build/book/.ledger-cache/<profile>-<key>.json``, :func:`ledger_key`) and
    read back while none of its inputs changed and its contents match the digest stored with them
    (:func:`_read_ledger`; one that does not is discarded with a warning and evaluated again);
    ``cache=None`` computes it afresh."""
    path = None
    if cache is not None:
        key = ledger_key(sources=sources, settings=settings)
        path = cache / f"{sources.profile}-{key}.json"
        if path.is_file():
            table = _read_ledger(path, key=key)
            if table is not None:
                return table
    table = claims_ledger.evaluate(sources.profile, corrupted_dataset=settings.test.corrupted_dataset,
                                   folder=sources.results)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in [*path.parent.glob(f"{sources.profile}-*.json"), *path.parent.glob(f"{sources.profile}-*.pkl")]:
            old.unlink(missing_ok=True)  # one entry per profile: the cache never grows (.pkl: the former format)
        _write_ledger(path, table, key=key)
    return table


def _ledger_payload(table: pd.DataFrame) -> str:
    """The table as JSON text: each column's dtype and values (floats written in their shortest exact
    form, so that the table read back equals the one written)."""
    import json

    return json.dumps({"dtypes": {str(c): str(t) for c, t in table.dtypes.items()},
                       "columns": {str(c): table[c].tolist() for c in table.columns}})


def _write_ledger(path: Path, table: pd.DataFrame, *, key: str) -> None:
    """The ledger's cache file: its key, the table (:func:`_ledger_payload`) and the payload's sha256,
    written whole or not at all. JSON, not a pickle: reading a cache never runs code."""
    import hashlib
    import json

    from dartlib.data.files import write_text_atomic

    payload = _ledger_payload(table)
    write_text_atomic(path, json.dumps({"key": key, "sha256": hashlib.sha256(payload.encode()).hexdigest(),
                                        "table": payload}) + "\n")


def _read_ledger(path: Path, *, key: str) -> pd.DataFrame | None:
    """The table :func:`_write_ledger` kept at ``path``, or None (the file discarded with a
    :class:`~dartlib.data.files.CacheDiscardedWarning` naming it) where it is not valid JSON, was
    kept under another key, or its table does not match the digest stored with it."""
    import hashlib
    import json
    import warnings

    from dartlib.data.files import CacheDiscardedWarning

    try:
        stored = json.loads(path.read_text())
        payload = stored["table"]
        if stored["key"] != key:
            problem = f"it was kept for the inputs {str(stored['key'])[:20]}, not {key}"
        elif hashlib.sha256(payload.encode()).hexdigest() != stored["sha256"]:
            problem = "its table does not match the digest stored with it"
        else:
            content = json.loads(payload)
            return pd.DataFrame({c: pd.Series(values, dtype=content["dtypes"][c])
                                 for c, values in content["columns"].items()})
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
        problem = f"not a ledger cache file ({type(err).__name__}: {str(err)[:80]})"
    warnings.warn(f"{path}: {problem}; discarded, the ledger is evaluated again", CacheDiscardedWarning, stacklevel=3)
    path.unlink(missing_ok=True)
    return None
