"""Claims on the cells of one results file, so that processes started on one grid compute each cell
once: a byte-range lock per cell key in ``.<results file>.claims.lock`` (:class:`CellClaims`), a
wait for a cell another process holds announced once (:class:`ClaimWaitWarning`) and bounded
(:func:`claim_wait_limit`, :class:`ClaimWaitTimeout`)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import sys
import time
import warnings
from pathlib import Path

from dartlib.data.files import open_lock

# Linux's struct flock (64-bit): short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = "hh4xqqi4x"


class ClaimWaitWarning(UserWarning):
    """A grid waits for a cell another process has claimed: which cell, which process, how long at most."""


class ClaimWaitTimeout(RuntimeError):
    """A grid waited the stated time (:func:`claim_wait_limit`) for a cell another process holds;
    the message names the cell, the process and what to do."""


def claim_wait_limit() -> float:
    """Seconds a grid waits for a cell another process computes: ``$DART_CLAIM_WAIT``, default
    21600 (6 hours, longer than any cell of the cpu profile takes)."""
    from dartlib.environment import setting

    return float(setting("DART_CLAIM_WAIT") or 21600)


class CellClaims:
    """Claims on the cells of one results file, shared by every process computing it: a byte-range
    lock (``fcntl``) per cell key in ``.<results file>.claims.lock`` beside it. The kernel releases
    a process's claims when it ends, however it ends (a kill -9 included), so a claim never
    outlives the process that made it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).with_name(f".{Path(path).name}.claims.lock")
        self._file = None

    def __enter__(self) -> CellClaims:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = os.fdopen(open_lock(self.path, folder=self.path.parent), "r+b", buffering=0)
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()  # releases every claim still held
        self._file = None

    @staticmethod
    def _offset(key: str) -> int:
        return int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)  # < 2**60: a valid file offset

    def claim(self, key: str, *, wait: bool = False, label: str = "", limit: float | None = None) -> bool:
        """Claim the cell ``key``: True when this process now holds it; False when another does.
        With ``wait``: wait until that one releases it or ends, then hold it; the wait is announced
        once (a :class:`ClaimWaitWarning` naming the cell, ``label``, and the holder's process id)
        and lasts at most ``limit`` seconds (default :func:`claim_wait_limit`), after which
        :class:`ClaimWaitTimeout` is raised."""
        if self._try(key):
            return True
        if not wait:
            return False
        limit = claim_wait_limit() if limit is None else limit
        holder = self.holder(key)
        cell = f"{label} (key {key})" if label else f"key {key}"
        warnings.warn(f"{self.path.name}: cell {cell} is claimed by process {holder or 'unknown'}; waiting for it "
                      f"to finish (at most {limit:g} s, DART_CLAIM_WAIT)", ClaimWaitWarning, stacklevel=2)
        start, pause = time.monotonic(), 0.05
        while not self._try(key):
            if time.monotonic() - start >= limit:
                raise ClaimWaitTimeout(
                    f"{self.path}: gave up after {limit:g} s waiting for cell {cell}, claimed by process "
                    f"{self.holder(key) or holder or 'unknown'}; let that process finish (or stop it: `kill <pid>`) "
                    f"and run the same command again, or wait longer with DART_CLAIM_WAIT=<seconds>")
            time.sleep(pause)
            pause = min(1.0, pause * 2)
        return True

    def _try(self, key: str) -> bool:
        try:
            fcntl.lockf(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self._offset(key))
        except (BlockingIOError, PermissionError):
            return False
        return True

    def holder(self, key: str) -> int | None:
        """The id of the process that holds the claim on ``key`` now (None if none, or not known:
        another system than Linux lays out its lock record otherwise)."""
        if not sys.platform.startswith("linux"):
            return None
        request = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, self._offset(key), 1, 0)
        try:
            kind, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(self._file, fcntl.F_GETLK, request))
        except OSError:
            return None
        return pid if kind != fcntl.F_UNLCK and pid > 0 else None

    def release(self, key: str) -> None:
        fcntl.lockf(self._file, fcntl.LOCK_UN, 1, self._offset(key))
