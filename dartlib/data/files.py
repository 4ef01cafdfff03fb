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

import errno
import hashlib
import json
import os
import secrets
import shutil
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


class CacheDiscardedWarning(UserWarning):
    """A cache that failed its check when read (what made it, the digest of its contents stored
    beside it, or a recomputed spot check): it was discarded and is being rebuilt from fresh
    computations; the message names the file."""


class DiscardedStateWarning(UserWarning):
    """A saved resume state (a pass's or a fine-tuning's state between epochs) that failed its check
    when read: it was set aside (:func:`set_aside`) and the work starts over; the message names the
    file, what is wrong and where it now lies."""


def set_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.refused-<pid>-<token>`` beside it, so that a file that is not what
    its name says is never read again under that name (and is kept for a look); returns the new path.
    The new name ends in neither ``.pt`` nor ``.json``, so no reader's pattern finds it."""
    aside = path.with_name(f"{path.name}.refused-{os.getpid()}-{secrets.token_hex(4)}")
    os.replace(path, aside)
    return aside


# What a process has hashed already, keyed by the file's identity and change stamps (:func:`file_stamp`),
# so that a large checked file (a trained model, a generated set) is hashed once per process however
# often it is read.
_SHA256_SEEN: dict[tuple, str] = {}


def file_stamp(path: Path) -> tuple:
    """A file's identity and change stamps: path, device, inode, size, modification and change times.
    A copy, an edit or a rename over it changes one of them, and the change time cannot be set back
    by hand."""
    st = Path(path).stat()
    return str(Path(path).absolute()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def sha256_bytes_of(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_once(path: Path) -> str:
    """:func:`sha256_bytes_of`, computed once per process for a file unchanged since
    (:func:`file_stamp`): reading a checked file again costs one ``stat``."""
    stamp = file_stamp(path)
    if stamp not in _SHA256_SEEN:
        _SHA256_SEEN[stamp] = sha256_bytes_of(Path(path))
    return _SHA256_SEEN[stamp]


def open_lock(path: Path, *, folder: Path) -> int:
    """A file descriptor on the lock file ``path``, opened for writing without following a link,
    creating it where absent and never truncating it: a lock planted as a link (to another file, or
    dangling) raises :class:`DamagedFileError` naming it instead of writing through it. ``path`` must
    lie directly in ``folder``, the folder it guards."""
    path = Path(path)
    if path.parent.resolve() != Path(folder).resolve():
        raise ValueError(f"the lock {path} is not inside the folder it guards, {folder}")
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            raise DamagedFileError(path, f"the lock file is a symbolic link (to {os.readlink(path)}), never followed",
                                   f"remove the link (`rm {path}`) and run the same command again") from None
        raise


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of file ``path`` (its ``.<name>.lock`` beside it, :func:`open_lock`) for
    the ``with`` block; the kernel releases it however the process ends."""
    import fcntl

    fd = open_lock(path.with_name(f".{path.name}.lock"), folder=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def committed_remedy(path: Path | str) -> str:
    """The remedy for a damaged file that is part of the repository."""
    return f"restore it with `git checkout -- {path}`"


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path``, unique to this process and call, with ``path``'s suffix
    (``np.save`` and ``np.savez`` append theirs to names without it), created here as an empty
    regular file (exclusively, never through a link) so that the writer that opens it next writes
    into a file of its own and nowhere else. ``path``'s folder must exist."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    return tmp


# The errors of a write the user can act on: no space (or quota) left, no permission, a read-only file system.
# EFBIG: the file size limit of the process (``ulimit -f``) or of the file system was reached.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS})


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class NotWritableError(OSError):
    """A folder or file the command must write cannot be written: no space left on its device, no
    permission, or a read-only file system. ``str()`` is one line naming the path and what to free
    or change; ``errno`` and ``filename`` are those of the failed write."""

    def __init__(self, code: int, path: Path | str, change: str = "") -> None:
        super().__init__(code, os.strerror(code), str(path))
        self.path, self.change = Path(path), change
        try:  # read now, while what filled the device (a temporary file) is still there
            self.free = shutil.disk_usage(_existing(self.path.parent)).free
        except OSError:
            self.free = None
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]  # read now: the shell's limit may be lifted later
        self.size_limit = None if limit == resource.RLIM_INFINITY else limit

    def __str__(self) -> str:
        path = self.path
        folder = _existing(path if path.is_dir() else path.parent)
        alternative = f", or {self.change}" if self.change else ""
        if self.errno in (errno.ENOSPC, errno.EDQUOT):
            free = "no space" if self.free is None else f"{_size(self.free)} free"
            what = "no space left" if self.errno == errno.ENOSPC else "the disk quota is used up"
            return (f"cannot write {path}: {what} on the device holding {folder} ({free}); free space there "
                    f"(`df -h {folder}` shows the device, `du -sh {folder}/*` what fills it){alternative}, "
                    "then run the same command again")
        if self.errno == errno.EFBIG:
            cap = "" if self.size_limit is None else f" ({_size(self.size_limit)}, `ulimit -f` counts blocks of 512 bytes in sh, 1024 in bash)"
            return (f"cannot write {path}: the file grew past the largest file this process may write{cap}; raise "
                    f"the limit (`ulimit -f unlimited` in the shell that runs the command){alternative}, or, where "
                    f"no limit is set, use a file system that holds larger files, then run the same command again")
        if self.errno == errno.EROFS:
            return (f"cannot write {path}: {folder} is on a read-only file system; remount it read-write"
                    f"{alternative}, then run the same command again")
        return (f"cannot write {path}: permission denied on {folder}; make it writable for this user "
                f"(`chmod -R u+w {folder}`, or `sudo chown -R $(id -u) {folder}`){alternative}, then run the "
                "same command again")


def as_write_error(err: OSError, path: Path | str | None = None, change: str = "") -> NotWritableError | None:
    """``err`` as a :class:`NotWritableError` naming ``path`` (default: the file the error names),
    or None when it is not a failure of writing the user can act on."""
    if isinstance(err, NotWritableError):
        return err
    if err.errno not in WRITE_ERRNOS:
        return None
    where = path if path is not None else (err.filename or "")
    return NotWritableError(err.errno, where, change)


PROBE_BYTES = 64 * 1024  # written, then removed, by check_writable: a full device refuses it


def check_writable(folder: Path, *, change: str = "") -> Path:
    """Raise :class:`NotWritableError` unless a file can be created and written in ``folder`` (or,
    where it does not exist yet, in its nearest existing ancestor, where it will be created): a
    command calls this for every folder it writes before it computes anything. ``change`` is the
    alternative the message offers (another folder, an environment variable). Returns ``folder``."""
    place = _existing(folder)
    if not place.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{place} is a file where the folder {folder} should be; "
                                 "move it away", str(place))
    probe = place / f".write-probe.{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, bytes(PROBE_BYTES))
            os.fsync(fd)  # some file systems report a full device only here
        finally:
            os.close(fd)
    except OSError as err:
        problem = as_write_error(err, folder, change)
        if problem is None:  # not space or permission: a folder where no file can be made (/proc, /sys)
            raise OSError(f"cannot write {folder}: no file can be created in {place} ({err.strerror}); "
                          f"{change or 'give a folder on a writable device'}") from None
        raise problem from None
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
    return folder


def _device_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(_existing(folder)).free < PROBE_BYTES
    except OSError:
        return False


def _at_size_limit(path: Path) -> bool:
    """Whether ``path`` has grown to the process's file size limit (``ulimit -f``), so that a
    writer's own error there was that limit."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        return limit != resource.RLIM_INFINITY and path.stat().st_size >= limit
    except OSError:
        return False


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on failure it is removed.
    A write that fails for want of space or permission raises :class:`NotWritableError` naming
    ``path`` (not the temporary name)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temporary_name(path)
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        problem = as_write_error(err, path)
        if problem is None and _at_size_limit(tmp):  # numpy's "N requested and M written": no errno
            problem = NotWritableError(errno.EFBIG, path)
        if problem is None:
            raise
        raise problem from None
    except Exception:
        # Some writers report a full device as their own error (torch.save's zip writer: a
        # RuntimeError "unexpected pos"): read the device before the temporary file is removed.
        if _device_full(path.parent):
            raise NotWritableError(errno.ENOSPC, path) from None
        if _at_size_limit(tmp):
            raise NotWritableError(errno.EFBIG, path) from None
        raise
    finally:
        try:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass


def write_text_atomic(path: Path, text: str) -> Path:
    """``path.write_text(text)``, whole or not at all (:func:`atomic_path`)."""
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text)
    return Path(path)


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
