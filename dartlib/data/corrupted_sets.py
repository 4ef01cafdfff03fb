"""Corrupted test sets in the official CIFAR-C layout (``<corruption>.npy`` + ``labels.npy``, the
five severities stacked): where each set lives, reading one corruption at one severity, and
checking each file against the sha256 recorded beside it (or, for official files placed by hand,
against the release's layout)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from dartlib.data.dataset import CIFAR10_CLASSES, FMNIST_CLASSES, DataMissingError, Dataset, _check_split, location
from dartlib.data.files import DamagedFileError, load_npy, read_json, set_aside, sha256_once
from dartlib.data.image_folders import _record_path
from dartlib.paths import data_root

MANIFEST = "manifest.json"


def corrupted_dir(name: str) -> Path:
    """Folder of a corrupted test set in the official CIFAR-C layout."""
    variable, folder = {
        "cifar10c": ("DART_CIFAR10C_DIR", "CIFAR-10-C"),
        "cifar100c": ("DART_CIFAR100C_DIR", "CIFAR-100-C"),
        "fmnistc": ("DART_FMNISTC_DIR", "FMNIST-C"),
    }[name]
    return location(variable, data_root() / folder)


def _severity_rows(folder: Path, total_rows: int) -> dict[int, slice]:
    """Rows of each severity: from our manifest when present, else the official 5-way split."""
    manifest = folder / MANIFEST
    if manifest.is_file():
        meta = read_json(manifest, required=("rows_per_severity", "severities"), remedy=_manifest_remedy(folder))
        try:
            per = int(meta["rows_per_severity"])
            return {int(s): slice(i * per, (i + 1) * per) for i, s in enumerate(meta["severities"])}
        except (TypeError, ValueError) as err:
            raise DamagedFileError(manifest, f"unreadable severities or rows ({err})", _manifest_remedy(folder)) from None
    per = total_rows // 5
    return {s: slice((s - 1) * per, s * per) for s in range(1, 6)}

_CORRUPTED_REMEDY = {
    "cifar10c": "`python -m dartlib data download cifar10c` (CIFAR-10-C.tar, ~2.9 GB, Zenodo record 2535967, md5 "
    "checked), or generate it locally with `python -m dartlib data prepare cifar10c`",
    "cifar100c": "`python -m dartlib data download cifar100c` (CIFAR-100-C.tar, ~2.9 GB, Zenodo record 3555552, md5 "
    "checked), or generate it locally with `python -m dartlib data prepare cifar100c`",
    "fmnistc": "generate it with `python -m dartlib data prepare fmnistc`",
}


def load_corrupted(name: str, *, corruption: str, severity: int = 5, split: str = "test") -> Dataset:
    """One corruption at one severity from ``<corruption>.npy`` + ``labels.npy``."""
    _check_split(split, ("test",))
    folder = corrupted_dir(name)
    data_file, labels_file = folder / f"{corruption}.npy", folder / "labels.npy"
    if not data_file.is_file() or not labels_file.is_file():
        raise DataMissingError(name, data_file, _CORRUPTED_REMEDY[name])
    remedy = f"delete it and obtain it again: {_CORRUPTED_REMEDY[name]}"
    for path in (data_file, labels_file):
        problem = generated_file_problem(path)
        if problem:
            aside = set_aside(path)
            _record_path(path).unlink(missing_ok=True)
            raise DamagedFileError(path, f"{problem}; set aside as {aside.name}",
                                   f"obtain it again (a generated set's missing file is generated again by the same "
                                   f"command): {_CORRUPTED_REMEDY[name]}")
    data = load_npy(data_file, mmap_mode="r", remedy=remedy)
    labels = load_npy(labels_file, mmap_mode="r", remedy=remedy)
    rows = _severity_rows(folder, data.shape[0])
    if labels.shape[0] != data.shape[0]:
        raise DamagedFileError(labels_file, f"{labels.shape[0]} labels for the {data.shape[0]} images of {data_file.name}",
                               remedy)
    if not (folder / MANIFEST).is_file():
        _check_official_layout(data_file, data, labels, remedy=remedy)
    if severity not in rows:
        raise DataMissingError(name, data_file, f"severity {severity} is not in this file (it has {sorted(rows)}); "
                               + severities_remedy(name, folder, sorted({*rows, severity})))
    sl = rows[severity]
    classes = _class_names_for(name, folder)
    return Dataset(name, split, np.array(data[sl], dtype=np.uint8), np.array(labels[sl], dtype=np.int64), classes,
                   {"corruption": corruption, "severity": severity, "source": str(folder)})


def generated_file_problem(path: Path) -> str:
    """What is wrong with a file of a corrupted set, or "": its bytes against the sha256 recorded
    beside it (``<file>.sha256``) when it was generated (:mod:`dartlib.data.prepare`) or unpacked
    from the md5-checked archive (:func:`dartlib.data.download.download_corrupted`), hashed once per
    process (:func:`dartlib.data.files.sha256_once`). A generated set's file without a record
    (generated before records were kept) cannot be checked and is refused; official files placed
    by hand have none and are checked for the official layout only (:func:`_check_official_layout`)."""
    record = _record_path(path)
    if not record.is_file():
        if (path.parent / MANIFEST).is_file():
            return (f"it has no {record.name} beside it (generated before each file's sha256 was recorded), so its "
                    "bytes cannot be checked")
        return ""
    recorded = record.read_text().strip()
    if sha256_once(path) != recorded:
        return (f"its sha256 differs from the one {record.name} recorded when it was generated (altered or damaged "
                "since)")
    return ""

_UNCHECKED_FOLDERS: set[Path] = set()


class UncheckedDataWarning(UserWarning):
    """Official CIFAR-C files without sha256 records: their layout is checked, their bytes cannot be."""


def _check_official_layout(data_file: Path, data: np.ndarray, labels: np.ndarray, *, remedy: str) -> None:
    """Files of the official CIFAR-C release (``<corruption>.npy`` of uint8 images, N x 32 x 32 x 3 with
    the five severities stacked, and ``labels.npy``): a file of another layout is refused naming it. Where
    no sha256 was recorded at unpacking (files placed by hand), a warning says once per folder that their
    bytes are not checked; rows computed from them are still keyed by the images' digest."""
    problems = []
    if data.dtype != np.uint8 or data.ndim != 4 or data.shape[3] != 3 or data.shape[1:3] != (32, 32):
        problems.append(f"{data.dtype} images of shape {data.shape} (the release has uint8 N x 32 x 32 x 3)")
    elif data.shape[0] % 5:
        problems.append(f"{data.shape[0]} rows, not the five severities stacked (a multiple of 5)")
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        problems.append(f"labels.npy holds {labels.dtype} of shape {labels.shape}, not one integer label per image")
    if problems:
        raise DamagedFileError(data_file, "; ".join(problems), remedy)
    folder = data_file.parent
    if folder not in _UNCHECKED_FOLDERS and not _record_path(data_file).is_file():
        _UNCHECKED_FOLDERS.add(folder)
        warnings.warn(f"{folder}: CIFAR-C files without sha256 records (placed by hand): their layout is checked, "
                      "their bytes cannot be; `python -m dartlib data download <dataset>` into an empty folder unpacks "
                      "the md5-checked archive and records them", UncheckedDataWarning, stacklevel=3)


def severities_remedy(name: str, folder: Path, severities: list[int]) -> str:
    """How to get a corrupted set at ``severities`` where ``folder`` holds it at others: a generated
    set is generated again with all of them (after the folder is moved away), the official files
    downloaded."""
    if not (folder / "manifest.json").is_file():
        return _CORRUPTED_REMEDY[name]
    return (f"move the generated set away (`mv {folder} {folder}.old`) and generate it at every severity needed: "
            f"`python -m dartlib data prepare {name} --severities {' '.join(str(s) for s in severities)}`")


def _manifest_remedy(folder: Path) -> str:
    return f"delete {folder} (a generated set) and generate it again with `python -m dartlib data prepare <dataset>`"


def _class_names_for(name: str, folder: Path) -> tuple[str, ...]:
    manifest = folder / MANIFEST
    if manifest.is_file():
        classes = read_json(manifest, remedy=_manifest_remedy(folder)).get("classes")
        if classes:
            return tuple(classes)
    if name == "fmnistc":
        return FMNIST_CLASSES
    if name == "cifar10c":
        return CIFAR10_CLASSES
    return tuple(str(i) for i in range(100))
