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
line that disagrees makes its row *suspect* (:func:`sidecar_check`): the row is not current for
the grid, which computes it again, and readers of the results file do not see it
(:func:`dartlib.experiments.grid.read_results`). A line whose arrays cannot be decoded is a damaged
sidecar (one line naming it and the line to delete); lines of no row (orphans) and a key held by
two lines (duplicates) are reported with a :class:`SidecarWarning`.
"""

from __future__ import annotations

import base64
import binascii
import warnings
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
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
    """The counts :func:`_pack` wrote for ``size`` images; ValueError where ``text`` is not such a
    packing (not base64, not zlib, or another number of images)."""
    try:
        if text.startswith("u16:"):
            raw = zlib.decompress(base64.b64decode(text[4:], validate=True))
            if len(raw) != 2 * size:
                raise ValueError(f"{len(raw) // 2} counts for {size} images")
            return np.frombuffer(raw, dtype="<u2").astype(np.int64)
        raw = zlib.decompress(base64.b64decode(text, validate=True))
    except (binascii.Error, zlib.error) as err:
        raise ValueError(f"not a packed array ({err})") from None
    if len(raw) != (size + 7) // 8:
        raise ValueError(f"a bit mask of {8 * len(raw)} images for {size}")
    return np.unpackbits(np.frombuffer(raw, dtype=np.uint8))[:size].astype(np.int64)


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
    _decoded(str(side), *_stamp(side))  # a line that cannot be decoded is a damaged file, named here
    return frame


class SidecarWarning(UserWarning):
    """Sidecar lines that belong to no row of the results file (orphans), or a key held by more
    than one line (duplicates): reported, never used."""


def _stamp(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


@lru_cache(maxsize=32)
def _decoded(side: str, *_stamp: int) -> dict[str, list[tuple[int, str, CellOutcomes]]]:
    """Every line of sidecar ``side`` decoded, by key: (line number, inputs, outcomes); cached per
    version of the file (its mtime, size and inode). A line that does not decode raises
    :class:`DamagedFileError` naming it and the remedy."""
    frame = pd.read_csv(side, dtype=str, keep_default_na=False)
    out: dict[str, list[tuple[int, str, CellOutcomes]]] = {}
    for i, (key, inputs, size, members, correct) in enumerate(frame[COLUMNS].itertuples(index=False)):
        try:
            if not size.isascii() or not size.isdigit() or int(size) < 1:
                raise ValueError(f"size {size!r} is not a positive count")
            cell = CellOutcomes.decode(size=int(size), members=members, correct=correct)
        except ValueError as err:
            raise DamagedFileError(side, f"line {i + 2} (key {key!r}) holds no outcomes ({err})",
                                   f"delete line {i + 2} of {Path(side).name} (its row is kept, without outcomes; "
                                   f"{_refill(Path(side))})") from None
        out.setdefault(str(key), []).append((i + 2, str(inputs), cell))
    return out


def _refill(side: Path) -> str:
    """How the outcomes of a row of sidecar ``side`` are computed again (the grids are a layer above
    this one, so the remedy names both ways rather than looking the grid up)."""
    name, profile = side.name.removesuffix(".outcomes.csv"), side.parent.name
    return (f"`python -m dartlib grid {name} --profile {profile} --outcomes` computes them again where {name} is a grid "
            f"(`python -m dartlib grid --help` lists them); otherwise the notebook that writes {name}.csv does, when it "
            "next runs")


@dataclass(frozen=True)
class SidecarCheck:
    """What a results file's sidecar says of its rows (:func:`sidecar_check`): ``agree`` the
    outcomes that agree with their row, by (key, inputs); ``suspect`` the rows the sidecar
    contradicts, key -> why; ``orphans`` and ``duplicates`` line numbers of the sidecar."""

    agree: dict[tuple[str, str], CellOutcomes] = field(default_factory=dict)
    suspect: dict[str, str] = field(default_factory=dict)
    orphans: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)


def _disagreement(cell: CellOutcomes, n: object, accuracy: object) -> str:
    """Why ``cell`` cannot be the outcomes of a row of ``n`` images at ``accuracy`` ("" if it can)."""
    if (cell.correct > cell.members).any():
        return f"its outcomes mark right {int((cell.correct > cell.members).sum())} image(s) not in its stream"
    if pd.isna(n) or cell.n != int(n):
        return f"its outcomes count {cell.n} images, the row n={n}"
    if cell.n and float(f"{cell.accuracy:.6g}") != float(f"{float(accuracy):.6g}"):
        return f"its outcomes give accuracy {cell.accuracy:.6g}, the row {float(accuracy):.6g}"
    return ""


def sidecar_check(rows: pd.DataFrame, path: Path) -> SidecarCheck:
    """Check results rows ``rows`` (of results file ``path``) against its sidecar. A row with a
    line of its key and input digest that disagrees with it (another count, another accuracy to 6
    significant digits, an image right that is not in its stream) is suspect; so is a row whose key
    has two lines that differ. A line of another input digest (the row was recomputed since) is
    neither used nor suspect. Orphan and duplicate lines are reported (:class:`SidecarWarning`)."""
    side = sidecar(Path(path))
    if not side.is_file():
        return SidecarCheck()
    read_sidecar(Path(path))
    lines = _decoded(str(side), *_stamp(side))
    check = SidecarCheck()
    keys = set()
    for key, inputs, n, accuracy in rows[["key", "inputs", "n", "accuracy"]].itertuples(index=False):
        key, inputs = str(key), str(inputs)
        keys.add(key)
        held = [(number, cell) for number, digest, cell in lines.get(key, ()) if digest == inputs]
        if not held:
            continue
        why = [w for w in (_disagreement(cell, n, accuracy) for _, cell in held) if w]
        if why:
            check.suspect[key] = f"line {held[0][0]} of {side.name}: {why[0]}"
        elif len(held) > 1 and any(not _same(held[0][1], cell) for _, cell in held[1:]):
            check.suspect[key] = f"lines {', '.join(str(h[0]) for h in held)} of {side.name} differ"
        else:
            check.agree[(key, inputs)] = held[0][1]
    for key, held in lines.items():
        if key not in keys:
            check.orphans.extend(number for number, _, _ in held)
        elif len(held) > 1:
            check.duplicates.extend(number for number, _, _ in held[1:])
    if check.orphans:
        warnings.warn(f"{side}: line(s) {_numbers(check.orphans)} hold the outcomes of no row of {Path(path).name} "
                      f"(orphans); they are not used (delete them)", SidecarWarning, stacklevel=3)
    if check.duplicates:
        warnings.warn(f"{side}: line(s) {_numbers(check.duplicates)} repeat a key an earlier line holds "
                      f"(duplicates); delete them", SidecarWarning, stacklevel=3)
    return check


def _same(a: CellOutcomes, b: CellOutcomes) -> bool:
    return np.array_equal(a.members, b.members) and np.array_equal(a.correct, b.correct)


def _numbers(numbers: list[int]) -> str:
    shown = ", ".join(map(str, sorted(numbers)[:6]))
    return shown + (f" ... ({len(numbers)} lines)" if len(numbers) > 6 else "")


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


def checked_outcomes(rows: pd.DataFrame, path: Path) -> dict[tuple[str, str], CellOutcomes]:
    """The outcomes of ``rows`` (results rows of results file ``path`` with ``key``, ``inputs``,
    ``n``, ``accuracy``) that their sidecar lines hold and that agree with the row
    (:func:`sidecar_check`). Keyed by (key, inputs)."""
    return sidecar_check(rows, Path(path)).agree
