"""A study's table that is not a grid of cells (one analysis over several streams, e.g. the
diagnosis's batch shapes or its identifiability bound), kept under the digest of what made it.

``<name>.csv`` is stored with ``<name>.inputs`` beside it, one line: the digest of the inputs the
table was computed from (its settings, the trained inputs and test streams it read, the revision of
its code). :func:`keyed_table` computes the table only where that line is absent or differs from
the digest of the current inputs, so that a notebook run again over a current table recomputes
nothing, and a changed setting recomputes it. Both files are written atomically, the table first.

The stamp's second line, ``sha256 <hex>``, is the digest of the table's bytes as written: a table
altered after it was computed (an edited number) is not current, and is recomputed with an
:class:`AlteredTableWarning`. A stamp of one line (written before tables carried their digest) is
read as before, on its inputs alone, until the table is next computed.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from dartlib.data.files import DamagedFileError, atomic_path, write_text_atomic


def inputs_digest(*parts: object) -> str:
    """sha256 (16 hex digits) of ``parts`` as text, in order."""
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:16]


def study_inputs(study: str, *, revision: int, values: Sequence[object] = (), models: Sequence[object] = (),
                 sets: Sequence[tuple[str, str, int]] = ()) -> str:
    """The digest of what a study's table is computed from: its name and ``revision`` (raised when
    its code changes what it computes), its settings ``values``, the weights of each trained input in
    ``models`` (a source model, a refiner: :func:`dartlib.models.artefacts.weights_digest`), the
    digest of each test set in ``sets`` (``(dataset, corruption, severity)``,
    :func:`dartlib.experiments.cell_streams.test_set_digest`), and the torch version and device that
    compute it."""
    import torch

    from dartlib.devices import default_device
    from dartlib.experiments.cell_streams import test_set_digest
    from dartlib.models.artefacts import weights_digest

    return inputs_digest(f"{study}@{revision}", *values, *(weights_digest(getattr(m, "module", m)) for m in models),
                         *(test_set_digest(d, corruption=c, severity=s) for d, c, s in sets),
                         f"torch {torch.__version__}", default_device())


def stamp_path(path: Path) -> Path:
    """``<name>.inputs`` beside ``<name>.csv``."""
    return Path(path).with_suffix(".inputs")


class AlteredTableWarning(UserWarning):
    """A keyed table whose bytes are not those its stamp recorded: it is computed again."""


def _table_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def is_current(path: Path, *, inputs: str) -> bool:
    """Whether ``path`` exists, was computed from ``inputs`` and is as it was written: its stamp's
    second line records the table's sha256. A stamp without it (written before tables were sealed)
    cannot tell an altered table from the one computed, so its table is computed again."""
    path, stamp = Path(path), stamp_path(path)
    if not (path.is_file() and stamp.is_file()):
        return False
    lines = stamp.read_text().split("\n")
    if lines[0].strip() != inputs:
        return False
    recorded = lines[1].strip() if len(lines) > 1 else ""
    if recorded != f"sha256 {_table_digest(path)}":
        why = (f"its sha256 is not the one {stamp.name} records" if recorded else
               f"{stamp.name} records no sha256 of it, written before tables were sealed")
        warnings.warn(f"{path}: cannot be shown to be the table computed ({why}); it is computed again",
                      AlteredTableWarning, stacklevel=2)
        return False
    return True


def keyed_table(path: Path, *, inputs: str, compute: Callable[[], pd.DataFrame],
                float_format: str = "%.6g") -> pd.DataFrame:
    """The table at ``path`` when it was computed from ``inputs``; else ``compute()``, written to
    ``path`` with ``inputs`` beside it, and returned as read back (the stored precision)."""
    path = Path(path)
    if not is_current(path, inputs=inputs):
        table = compute()
        with atomic_path(path) as tmp:
            table.to_csv(tmp, index=False, float_format=float_format)
        write_text_atomic(stamp_path(path), f"{inputs}\nsha256 {_table_digest(path)}\n")
    return pd.read_csv(path)


def sealed_table(path: Path, *, remedy: str) -> pd.DataFrame | None:
    """A keyed table as its study wrote it, for a reader that cannot rebuild its inputs (the book):
    None where it is absent; refused with :class:`~dartlib.data.files.DamagedFileError` (naming the
    file and ``remedy``, the command that computes it again) where its stamp is missing or records
    another sha256 than the table's bytes."""
    path, stamp = Path(path), stamp_path(path)
    if not path.is_file():
        return None
    lines = stamp.read_text().split("\n") if stamp.is_file() else []
    recorded = lines[1].strip() if len(lines) > 1 else ""
    if recorded != f"sha256 {_table_digest(path)}":
        raise DamagedFileError(path, f"its bytes are not those {stamp.name} records" if recorded
                               else f"{stamp.name} records no sha256 of it", remedy)
    return pd.read_csv(path)
