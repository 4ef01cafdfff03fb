"""Per-image outcomes of a results row: which test images a cell classified correctly.

A cell's accuracy is a mean over its stream's images; the noise of a mean over corruptions, or of
a difference of two methods on the same streams, depends on how the cells' images overlap
(every corruption of CIFAR-10-C is the same 10,000 images in the same order). So each row keeps,
beside the results CSV, two compressed arrays over its test set (how often its stream holds each
image, how often the cell got it right: bit masks where no image repeats): ``<experiment>.outcomes.csv`` next to ``<experiment>.csv``, one line per row,
keyed by the row's ``key`` and input digest ``inputs`` (:mod:`dartlib.analysis.noise` reads them).

The sidecar is written under the results file's lock, before the row itself, so a row never
refers to outcomes that were not written. Reading checks each line against its row: the masks'
accuracy must equal the row's (to the CSV's 6 significant digits) and their count its ``n``; a
line that disagrees is not used (its row falls back to the conservative SE, and the grid's
``--outcomes`` recomputes it).
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dartlib.data.files import DamagedFileError, atomic_path

COLUMNS = ["key", "inputs", "size", "members", "correct"]


@dataclass(frozen=True)
class CellOutcomes:
    """A cell's stream over a test set of ``size`` images: ``members[i]`` how many times image ``i``
    is in the stream (0 or 1 but for streams that draw an image again, such as an online-imbalance
    subset larger than a class), ``correct[i]`` how many of those times the cell got it right."""

    members: np.ndarray
    correct: np.ndarray

    @classmethod
    def from_stream(cls, *, order: np.ndarray, correct: np.ndarray, size: int) -> CellOutcomes:
        """From a stream's image indices (``order``) and the correctness of each prediction in
        stream order."""
        order = np.asarray(order, dtype=np.int64)
        members = np.bincount(order, minlength=size).astype(np.int64)
        hits = np.bincount(order, weights=np.asarray(correct, dtype=np.float64), minlength=size).astype(np.int64)
        return cls(members=members, correct=hits)

    @property
    def n(self) -> int:
        return int(self.members.sum())

    @property
    def accuracy(self) -> float:
        """Accuracy (%) computed as the engine computes it: 100 * (correct / n)."""
        return 100.0 * (int(self.correct.sum()) / self.n)

    def encode(self) -> dict:
        return {"size": len(self.members), "members": _pack(self.members), "correct": _pack(self.correct)}

    @classmethod
    def decode(cls, *, size: int, members: str, correct: str) -> CellOutcomes:
        return cls(members=_unpack(members, size), correct=_unpack(correct, size))


def _pack(counts: np.ndarray) -> str:
    """Counts of 0 and 1 as a bit mask (zlib, base64); larger counts as "u16:" + their uint16 values."""
    if counts.max(initial=0) <= 1:
        return base64.b64encode(zlib.compress(np.packbits(counts.astype(bool)).tobytes(), 9)).decode("ascii")
    return "u16:" + base64.b64encode(zlib.compress(counts.astype("<u2").tobytes(), 9)).decode("ascii")


def _unpack(text: str, size: int) -> np.ndarray:
    if text.startswith("u16:"):
        return np.frombuffer(zlib.decompress(base64.b64decode(text[4:])), dtype="<u2")[:size].astype(np.int64)
    bits = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8))[:size]
    return bits.astype(np.int64)


def sidecar(path: Path) -> Path:
    """The outcomes file of results file ``path``: ``<stem>.outcomes.csv`` beside it."""
    return path.with_name(f"{path.stem}.outcomes.csv")


def read_sidecar(path: Path) -> pd.DataFrame:
    """The outcome lines of results file ``path`` (its sidecar); an empty frame where there is none."""
    side = sidecar(path)
    if not side.is_file():
        return pd.DataFrame(columns=COLUMNS)
    try:
        frame = pd.read_csv(side, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DamagedFileError(side, f"not an outcomes file ({str(err).strip()})",
                               f"delete {side.name}; the grid's --outcomes run rewrites it") from None
    if list(frame.columns) != COLUMNS:
        raise DamagedFileError(side, f"columns {', '.join(frame.columns)}, not {', '.join(COLUMNS)}",
                               f"delete {side.name}; the grid's --outcomes run rewrites it")
    return frame


def write_lines(lines: list[dict], path: Path) -> None:
    """Add outcome lines (``key``, ``inputs`` and :meth:`CellOutcomes.encode`) to the sidecar of
    results file ``path``, replacing older lines of the same keys. The caller holds the results
    file's lock (:func:`dartlib.experiments.grid._append_rows`)."""
    if not lines:
        return
    done = read_sidecar(path)
    done = done[~done["key"].isin({line["key"] for line in lines})]
    new = pd.DataFrame(lines)[COLUMNS].astype(str)
    frame = pd.concat([done, new], ignore_index=True) if len(done) else new
    with atomic_path(sidecar(path)) as tmp:
        frame.to_csv(tmp, index=False)


def checked_outcomes(rows: pd.DataFrame, side: pd.DataFrame) -> dict[tuple[str, str], CellOutcomes]:
    """The outcomes of ``rows`` (results rows with ``key``, ``inputs``, ``n``, ``accuracy``) that
    their sidecar lines hold and that agree with the row: same input digest, the masks' count equal
    to ``n`` and their accuracy equal to the row's to 6 significant digits. Keyed by (key, inputs)."""
    lines = {(k, d): (int(s), m, c) for k, d, s, m, c in side[COLUMNS].itertuples(index=False)}
    out = {}
    for key, inputs, n, accuracy in rows[["key", "inputs", "n", "accuracy"]].itertuples(index=False):
        line = lines.get((str(key), str(inputs)))
        if line is None:
            continue
        cell = CellOutcomes.decode(size=line[0], members=line[1], correct=line[2])
        if cell.n == int(n) and float(f"{cell.accuracy:.6g}") == float(f"{float(accuracy):.6g}"):
            out[(str(key), str(inputs))] = cell
    return out


def folder_outcomes(folder: Path) -> dict[tuple[str, str], CellOutcomes]:
    """Every checked outcome of the results files in ``folder`` (:func:`checked_outcomes`), keyed by
    (key, inputs): what :mod:`dartlib.analysis.noise` needs to put an SE on that folder's rows."""
    from dartlib.experiments.grid import read_results

    out: dict[tuple[str, str], CellOutcomes] = {}
    for side in sorted(Path(folder).glob("*.outcomes.csv")):
        results = side.with_name(side.name.replace(".outcomes.csv", ".csv"))
        if results.is_file():
            out.update(checked_outcomes(read_results(results), read_sidecar(results)))
    return out
