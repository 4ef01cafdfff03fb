"""A book build's lock and the clean-up of what killed builds left behind: each build holds a lock
on ``.<name>.build-<pid>-<token>.lock`` while it runs, and the next build removes the folders of one
whose lock nobody holds."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path


_LEFT_BEHIND = r"\.(?P<what>building|old|build)-(?P<pid>\d+)-(?P<token>[0-9a-f]+)(?P<lock>\.lock)?"


@contextlib.contextmanager
def _build_lock(path: Path):
    """An exclusive lock on ``path`` (created) for the ``with`` block; the file is removed after it.
    The kernel releases the lock when the process ends, however it ends."""
    import fcntl
    import os

    from dartlib.data.files import open_lock

    fd = open_lock(path, folder=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _owner_gone(lock: Path, pid: int) -> bool:
    """Whether the build that made ``lock`` (process ``pid``) has ended: its lock file is not held
    (or, without one, the process no longer exists)."""
    import fcntl
    import os

    if lock.is_file() and not lock.is_symlink():
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # cannot open it (another user's): leave it
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: the build runs
            return False
        finally:
            os.close(fd)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def remove_abandoned_builds(root: Path) -> list[Path]:
    """Remove what builds of the book ``root`` left beside it when killed before they could clean
    up: ``.<name>.building-<pid>-<token>/`` (a half-built book), ``.<name>.old-<pid>-<token>/`` (the
    previous book, swapped out) and their ``.<name>.build-<pid>-<token>.lock``, when the build that
    made them no longer runs (a running build's are left alone). Returns the paths removed."""
    pattern = re.compile(re.escape(f".{root.name}") + _LEFT_BEHIND + "$")
    removed = []
    if not root.parent.is_dir():
        return removed
    for path in sorted(root.parent.iterdir()):
        found = pattern.match(path.name)
        if not found or found["lock"]:
            continue
        lock = root.with_name(f".{root.name}.build-{found['pid']}-{found['token']}.lock")
        if found["what"] != "build" and _owner_gone(lock, int(found["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    for path in sorted(root.parent.glob(f".{root.name}.build-*.lock")):
        found = pattern.match(path.name)
        if found and _owner_gone(path, int(found["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
