"""Files written whole or not at all, and read back with damage reported as one error type.

Every file of the suite (caches, generated sets, checkpoints, results) is written to a
temporary name unique to the writing process and call, then renamed over the target: two
processes started together never share a temporary file, and an interrupted write leaves no
partial file. A file that is damaged all the same (truncated by a full disk, a copy cut short,
an edit by hand) raises :class:`DamagedFileError`, which names the file, what is wrong and how
to rebuild it, instead of the reader's own error (``mmap length is greater than file size``,
``UnpicklingError``, ``EOFError``, a JSON decoding error).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

REGENERATE = "delete it and run the same command again to regenerate it"


class DamagedFileError(RuntimeError):
    """A file exists but cannot be read as what it should hold; the message names the file,
    what is wrong and the remedy."""

    def __init__(self, path: Path | str, problem: str, remedy: str = REGENERATE) -> None:
        self.path, self.problem, self.remedy = Path(path), problem, remedy
        super().__init__(f"{path} is damaged: {problem}. Remedy: {remedy}")


def committed_remedy(path: Path | str) -> str:
    """The remedy for a damaged file that is part of the repository."""
    return f"restore it with `git checkout -- {path}`"


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path``, unique to this process and call, with ``path``'s suffix
    (``np.save`` and ``np.savez`` append theirs to names without it)."""
    return path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on failure it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_npy(path: Path, *, mmap_mode: str | None = None, remedy: str = REGENERATE) -> np.ndarray:
    """``np.load`` of one ``.npy`` array; a truncated or foreign file raises :class:`DamagedFileError`."""
    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        if not Path(path).is_file():
            raise
        raise DamagedFileError(path, f"not a readable .npy array ({err})", remedy) from None


def load_npz(path: Path, names: tuple[str, ...], *, remedy: str = REGENERATE) -> tuple[np.ndarray, ...]:
    """The arrays ``names`` of an ``.npz`` archive, read fully; damage raises :class:`DamagedFileError`."""
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as z:
            return tuple(z[name] for name in names)
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise DamagedFileError(path, f"not a complete .npz archive with {', '.join(names)} ({err})", remedy) from None


def read_json(path: Path, *, required: tuple[str, ...] = (), remedy: str = REGENERATE) -> dict:
    """A JSON object with at least the keys ``required``; anything else raises :class:`DamagedFileError`."""
    try:
        value = json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise DamagedFileError(path, f"not valid JSON ({err})", remedy) from None
    if not isinstance(value, dict):
        raise DamagedFileError(path, f"holds a {type(value).__name__}, not a JSON object", remedy)
    missing = [k for k in required if k not in value]
    if missing:
        raise DamagedFileError(path, f"lacks the entries {missing}", remedy)
    return value
