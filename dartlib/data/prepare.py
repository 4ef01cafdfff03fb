"""Generate corrupted test sets in the official CIFAR-C layout (``<corruption>.npy``, ``labels.npy``).

Resumable per file: a corruption whose file exists (for the same settings) is skipped; every
file is written to a temporary name and renamed, so an interrupted run leaves no partial file.
``manifest.json`` records the severities, the rows per severity, the class names, the seed and a
digest of the clean images, so the loader can read subsets of severities.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dartlib import __version__
from dartlib.data.corruptions import CORRUPTIONS, corrupt
from dartlib.data.sources import MANIFEST, clean_source, corrupted_dir

CHUNK = 1000  # images per corrupt() call; part of the seed schedule, recorded in the manifest


def _atomic_save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def corrupt_set(images: np.ndarray, *, corruption: str, severity: int, seed: int) -> np.ndarray:
    """Corrupt a whole test set in chunks of ``CHUNK`` images, chunk c seeded with (seed, c)."""
    out = np.empty_like(images)
    for c, start in enumerate(range(0, len(images), CHUNK)):
        sl = slice(start, start + CHUNK)
        out[sl] = corrupt(images[sl], corruption=corruption, severity=severity, seed=seed * 100003 + c)
    return out


def prepare_corrupted(
    name: str,
    *,
    severities: Sequence[int] = (5,),
    corruptions: Sequence[str] = CORRUPTIONS,
    seed: int = 0,
    folder: Path | None = None,
) -> Path:
    """Write ``<folder>/<corruption>.npy`` for each corruption (severities stacked in order)."""
    unknown = [c for c in corruptions if c not in CORRUPTIONS]
    if unknown:
        raise ValueError(f"unknown corruptions {unknown}; valid names: {', '.join(CORRUPTIONS)}")
    severities = sorted({int(s) for s in severities})
    clean = clean_source(name)(split="test")
    folder = folder or corrupted_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "dataset": name,
        "source": clean.name,
        "source_digest": clean.digest(),
        "severities": severities,
        "rows_per_severity": len(clean),
        "classes": list(clean.classes),
        "seed": seed,
        "chunk": CHUNK,
        "generator": f"dartlib {__version__} (dartlib.data.corruptions)",
    }
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        keep = {k: v for k, v in old.items() if k != "generator"}
        if keep != {k: v for k, v in manifest.items() if k != "generator"}:
            raise RuntimeError(f"{folder} holds files generated with other settings ({manifest_path}); "
                               "move them away or choose another folder")
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    if not (folder / "labels.npy").is_file():
        _atomic_save(folder / "labels.npy", np.tile(clean.labels.astype(np.uint8 if clean.num_classes <= 256 else np.int64), len(severities)))
    todo = [c for c in corruptions if not (folder / f"{c}.npy").is_file()]
    for corruption in tqdm(todo, desc=f"prepare {name}", unit="corruption"):
        stacked = np.concatenate(
            [corrupt_set(clean.images, corruption=corruption, severity=s, seed=seed + 7919 * s) for s in severities]
        )
        _atomic_save(folder / f"{corruption}.npy", stacked)
    return folder


def ensure_corrupted(name: str, *, severities: Sequence[int] = (5,), seed: int = 0) -> Path:
    """The folder of a corrupted set with all 15 corruptions at ``severities``: generated
    locally when it is a generated set (fmnistc) and absent; the official CIFAR-C files are
    used as they are when present."""
    folder = corrupted_dir(name)
    complete = (folder / "labels.npy").is_file() and all((folder / f"{c}.npy").is_file() for c in CORRUPTIONS)
    if complete:
        return folder
    return prepare_corrupted(name, severities=severities, seed=seed)
