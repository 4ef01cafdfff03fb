"""What travels to a GPU machine and what comes back (docs/gpu.md).

A GPU slot takes at most 64 MiB of files (the working tree plus carried paths) and gives back
files of at most 16 MiB each. Three helpers keep to that:

- :func:`sparse_copy`: the tracked files a GPU run of the notebooks reads, without what it does not
  (executed notebooks kept with results, figures, documentation, committed checkpoints of other
  profiles, golden test copies), into a folder that is sent instead of the whole repository; a
  fresh clone keeps everything, nothing is deleted from the repository.
- :func:`split_file` / :func:`join_parts`: a file that must come back (a trained source model) in
  parts of at most 16 MiB with a manifest holding each part's and the whole file's sha256; joining
  checks both and refuses a missing, short or altered part.
- :func:`tiny_cifar10`: a CIFAR-10 image folder holding the first images of each class of a real
  copy, for the CPU dry run of a GPU profile (it never stands in for a missing copy).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dartlib.data.files import atomic_path, write_text_atomic
from dartlib.paths import REPO_ROOT

MIB = 1024 * 1024
PART_BYTES = 16 * MIB  # the most a GPU slot gives back in one file
TRAVEL_LIMIT = 64 * MIB  # the most that travels to a GPU slot (working tree plus carried paths)

# Tracked paths a GPU run of the notebooks never reads (shell patterns on the path from the
# repository root). Each stays in the repository; only the copy that travels leaves them out.
NOT_TRAVELLING: tuple[str, ...] = (
    "results/*/notebooks/*",  # executed notebooks kept with a profile's results (the book's sources)
    "figures/*",  # figures of every profile (a run writes its own)
    "docs/*", "*.md",  # documentation (dartlib/ and data/paper/ read none of it)
    "tests/*",  # the unit tests (the dry run is their business, on the CPU)
    "benchmarks/results/*",  # measurements kept for the record
    "data/checkpoints/*.pt",  # trained models of the smoke and cpu profiles (a GPU profile trains its own)
    "data/checkpoints/own-model/*",  # notebook 16's smoke model and g_phi (22 MB; a GPU profile trains its own)
    # the cpu rows' per-image outcomes (their SEs; 20 MiB and growing): a GPU page that shows cpu rows
    # prints their SEs' upper bound (marked ≤) instead
    "results/cpu/*.outcomes.csv",
)
# Kept even where a pattern above matches: files the code reads at run time.
ALWAYS_TRAVELLING: tuple[str, ...] = (
    "data/paper/*.csv", "data/paper/*.yaml",  # the paper's numbers and claims, read beside every table
    "data/checkpoints/MANIFEST.json",
    "notebooks/*",
)


# The same choice as git sparse-checkout patterns (non-cone mode; later patterns win), for a
# checkout whose working tree is what travels: `python -m dartlib travel patterns | git sparse-checkout
# set --no-cone --stdin`, and `git sparse-checkout disable` afterwards (tests/test_travel.py checks that
# both select the same files).
SPARSE_PATTERNS: tuple[str, ...] = (
    "/*", "!/results/*/notebooks/", "!/figures/", "!/docs/", "!/tests/", "!/benchmarks/results/",
    "!/data/checkpoints/*.pt", "!/data/checkpoints/own-model/", "!*.md", "!/results/cpu/**/*.outcomes.csv", "/data/paper/*.csv", "/data/paper/*.yaml", "/data/checkpoints/MANIFEST.json",
    "/notebooks/",
)


def tracked_files(repo: Path = REPO_ROOT) -> list[str]:
    """The repository's tracked files (``git ls-files``), as paths relative to ``repo``."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def travels(path: str, *, exclude: Iterable[str] = NOT_TRAVELLING, keep: Iterable[str] = ALWAYS_TRAVELLING) -> bool:
    """Whether the tracked file ``path`` belongs to the copy sent to a GPU machine."""
    if any(fnmatch.fnmatch(path, pattern) for pattern in keep):
        return True
    return not any(fnmatch.fnmatch(path, pattern) for pattern in exclude)


@dataclass(frozen=True)
class TravelCopy:
    """A sparse copy: its folder, the files and bytes copied, and the files and bytes left out."""

    folder: Path
    files: int
    bytes: int
    left_out: int
    left_out_bytes: int

    def describe(self) -> str:
        return (f"{self.folder}: {self.files} files, {self.bytes / MIB:.1f} MiB (left out {self.left_out} files, "
                f"{self.left_out_bytes / MIB:.1f} MiB)")


def sparse_copy(dest: Path | str, *, repo: Path = REPO_ROOT, exclude: Iterable[str] = NOT_TRAVELLING,
                keep: Iterable[str] = ALWAYS_TRAVELLING, extra: Iterable[Path | str] = ()) -> TravelCopy:
    """Copy the tracked files that travel (:func:`travels`) from ``repo`` to ``dest`` (which must
    not exist yet, or be empty), plus ``extra`` files (e.g. the packed CIFAR-10) under
    ``dest/.gpu_carry/``; the working tree's current content of each file is copied."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty: give a new folder for the travelling copy")
    exclude, keep = tuple(exclude), tuple(keep)
    files = size = left = left_size = 0
    for rel in tracked_files(repo):
        src = repo / rel
        if not src.is_file():  # deleted in the working tree, not yet committed
            continue
        n = src.stat().st_size
        if not travels(rel, exclude=exclude, keep=keep):
            left, left_size = left + 1, left_size + n
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        files, size = files + 1, size + n
    for path in extra:
        path = Path(path)
        target = dest / ".gpu_carry" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        files, size = files + 1, size + path.stat().st_size
    return TravelCopy(dest, files, size, left, left_size)


def folder_bytes(folder: Path | str) -> int:
    """The bytes of every file under ``folder`` (what a transfer of it sends)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


# --------------------------------------------------------------------------- parts of a file


def sha256_file(path: Path | str, *, chunk: int = MIB) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def split_file(path: Path | str, out: Path | str, *, part_bytes: int = PART_BYTES) -> Path:
    """Write ``path`` as parts ``<name>.partNNN`` of at most ``part_bytes`` into ``out``, with a
    manifest ``<name>.parts.json`` (the file's size and sha256, each part's name, size and
    sha256); returns the manifest's path. A file of 0 bytes has one empty part."""
    path, out = Path(path), Path(out)
    if part_bytes <= 0:
        raise ValueError(f"part_bytes must be positive, got {part_bytes}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file to split")
    out.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    parts = []
    with open(path, "rb") as fh:
        index = 0
        while True:
            block = fh.read(part_bytes)
            if not block and index > 0:
                break
            whole.update(block)
            name = f"{path.name}.part{index:03d}"
            with atomic_path(out / name) as tmp:
                Path(tmp).write_bytes(block)
            parts.append({"name": name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
            index += 1
            if len(block) < part_bytes:
                break
    manifest = {"file": path.name, "bytes": path.stat().st_size, "sha256": whole.hexdigest(), "part_bytes": part_bytes,
                "parts": parts}
    target = out / f"{path.name}.parts.json"
    write_text_atomic(target, json.dumps(manifest, indent=1) + "\n")
    return target


class PartsError(ValueError):
    """Parts that do not join into the file their manifest names (missing, short or altered)."""


def join_parts(manifest: Path | str, out: Path | str | None = None) -> Path:
    """Join the parts listed in ``manifest`` (beside it) into ``out`` (default: the file's name
    beside the manifest), checking each part's size and sha256 and then the whole file's; the
    file appears only when every check passed. Raises :class:`PartsError` naming what differs."""
    manifest = Path(manifest)
    remedy = f"fetch {manifest.name} again, or write it again with `python -m dartlib travel split FILE --out DIR`"
    if not manifest.is_file():
        raise PartsError(f"{manifest}: no such manifest; give the <file>.parts.json that `travel split` wrote")
    try:
        meta = json.loads(manifest.read_text())
        [(str(p["name"]), int(p["bytes"]), str(p["sha256"])) for p in meta["parts"]]
        str(meta["file"]), str(meta["sha256"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise PartsError(f"{manifest}: not a parts manifest ({type(err).__name__}: {err}); {remedy}") from None
    out = Path(out) if out is not None else manifest.with_name(meta["file"])
    whole = hashlib.sha256()
    with atomic_path(out) as tmp, open(tmp, "wb") as sink:
        for part in meta["parts"]:
            src = manifest.with_name(part["name"])
            if not src.is_file():
                raise PartsError(f"{src}: missing (part of {meta['file']}, listed in {manifest}); fetch it again")
            block = src.read_bytes()
            if len(block) != part["bytes"] or hashlib.sha256(block).hexdigest() != part["sha256"]:
                raise PartsError(f"{src}: {len(block)} bytes, sha256 {hashlib.sha256(block).hexdigest()[:12]}..., "
                                 f"but {manifest} lists {part['bytes']} bytes, {part['sha256'][:12]}...; fetch it again")
            whole.update(block)
            sink.write(block)
        sink.flush()
        if whole.hexdigest() != meta["sha256"]:
            raise PartsError(f"the joined {meta['file']} has sha256 {whole.hexdigest()}, but {manifest} says "
                             f"{meta['sha256']}: the parts are of another file")
    return out


# --------------------------------------------------------------------------- the dry run's data


def first_per_class(labels: np.ndarray, per_class: int) -> np.ndarray:
    """Indices of the first ``per_class`` images of each class, in the order of ``labels``."""
    keep = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in np.unique(labels)])
    return np.sort(keep)


def tiny_cifar10(out: Path | str, *, data_root: Path | str, train_per_class: int, test_per_class: int) -> Path:
    """An image folder ``out`` that :func:`dartlib.data.sources.load` reads as CIFAR-10 under the
    data root ``data_root`` (``DART_DATA_DIR``; its decoded cache is written there), holding the
    first ``train_per_class`` / ``test_per_class`` images of each class of the CIFAR-10 copy this
    process reads now (``$DART_CIFAR10_DIR`` or the data root's; see :func:`cifar10_missing`)."""
    from dartlib.data.packed import install_as_image_folder
    from dartlib.data.sources import load

    arrays = {}
    for split, per in (("train", train_per_class), ("test", test_per_class)):
        data = load("cifar10", split=split)
        keep = first_per_class(data.labels, per)
        arrays[split] = (data.images[keep], data.labels[keep], tuple(data.classes))
    before = os.environ.get("DART_DATA_DIR")
    os.environ["DART_DATA_DIR"] = str(data_root)  # the cache goes under the dry run's data root
    try:
        return install_as_image_folder(arrays, Path(out))
    finally:
        if before is None:
            os.environ.pop("DART_DATA_DIR", None)
        else:
            os.environ["DART_DATA_DIR"] = before


def cifar10_missing() -> str | None:
    """None when a CIFAR-10 copy can be read here, else one line saying what is missing and how to get it."""
    from dartlib.data.sources import load

    try:
        load("cifar10", split="test")
    except (FileNotFoundError, OSError) as err:
        return (f"CIFAR-10 is not on this machine ({err}); get it with `python -m dartlib data download cifar10` "
                "or point DART_CIFAR10_DIR at an image folder (train/<class>/*, test/<class>/*)")
    return None


def environment_for(data_root: Path, cifar10: Path) -> dict[str, str]:
    """The environment of a dry run: its own data root (checkpoints, generated CIFAR-10-C) and the tiny CIFAR-10."""
    return {**os.environ, "DART_DATA_DIR": str(data_root), "DART_CIFAR10_DIR": str(cifar10),
            "DART_CIFAR10C_DIR": str(data_root / "CIFAR-10-C")}
