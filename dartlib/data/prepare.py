"""Generate corrupted test sets in the official CIFAR-C layout (``<corruption>.npy``, ``labels.npy``).

Resumable per file: a corruption whose file exists (for the same settings) is skipped; every
file is written to a temporary name and renamed, so an interrupted run leaves no partial file.
Each file's sha256 is recorded beside it (``<file>.sha256``) and checked when the set is read.
``manifest.json`` records the severities, the rows per severity, the class names, the seed and a
digest of the clean images, so the loader can read subsets of severities.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dartlib import __version__
from dartlib.data.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from dartlib.data.files import atomic_path, read_json, sha256_bytes_of, write_text_atomic
from dartlib.data.sources import clean_source
from dartlib.data.corrupted_sets import MANIFEST, corrupted_dir, severities_remedy
from dartlib.data.image_folders import _record_path

CHUNK = 1000  # images per corrupt() call; part of the seed schedule, recorded in the manifest


def generator_digest() -> str:
    """sha256 of the corruption code: generated files are stale when it changes."""
    from dartlib.data import corruptions

    return hashlib.sha256(Path(corruptions.__file__).read_bytes()).hexdigest()[:16]


def _atomic_save(path: Path, array: np.ndarray) -> None:
    """``array`` saved to ``path`` whole or not at all, with the sha256 of the file's bytes recorded
    beside it (``<file>.sha256``, :func:`dartlib.data.corrupted_sets.generated_file_problem` checks it when
    the set is read) before the file takes its name."""
    with atomic_path(path) as tmp:
        np.save(tmp, array)
        write_text_atomic(_record_path(path), sha256_bytes_of(tmp) + "\n")


def _chunks(n: int, seed: int) -> list[tuple[slice, int]]:
    """The seed schedule of a set of ``n`` images: chunks of ``CHUNK`` images, chunk c seeded with
    (seed, c); ``seed`` is a severity's (:func:`_severity_seed`)."""
    return [(slice(start, start + CHUNK), seed * 100003 + c) for c, start in enumerate(range(0, n, CHUNK))]


def _severity_seed(seed: int, severity: int) -> int:
    return seed + 7919 * severity


def corrupt_set(images: np.ndarray, *, corruption: str, severity: int, seed: int) -> np.ndarray:
    """Corrupt a whole test set in chunks of ``CHUNK`` images, chunk c seeded with (seed, c)."""
    out = np.empty_like(images)
    for sl, chunk_seed in _chunks(len(images), seed):
        out[sl] = corrupt(images[sl], corruption=corruption, severity=severity, seed=chunk_seed)
    return out


def corrupt_like(name: str, images: np.ndarray, *, corruption: str, severity: int) -> np.ndarray:
    """``images`` (the clean test split of generated set ``name``, possibly altered) corrupted as
    that set corrupts its clean test split: same chunks and seeds, the seed its manifest records."""
    manifest = corrupted_dir(name) / MANIFEST
    seed = int(read_json(manifest, remedy=f"run `python -m dartlib data prepare {name}`").get("seed", 0))
    return corrupt_set(images, corruption=corruption, severity=severity, seed=_severity_seed(seed, severity))


def prepare_corrupted(
    name: str,
    *,
    severities: Sequence[int] = (5,),
    corruptions: Sequence[str] = CORRUPTIONS,
    seed: int = 0,
    folder: Path | None = None,
    workers: int | None = None,
) -> Path:
    """Write ``<folder>/<corruption>.npy`` for each corruption (severities stacked in order);
    ``workers`` processes (default :func:`corruption_workers`) share the chunks."""
    unknown = [c for c in corruptions if c not in CORRUPTIONS]
    if unknown:
        raise ValueError(f"unknown corruptions {unknown}; valid names: {', '.join(CORRUPTIONS)}")
    invalid = [s for s in severities if int(s) not in SEVERITIES]
    if invalid or not severities:
        raise ValueError(f"severities must be among {', '.join(map(str, SEVERITIES))}, got {list(severities)}")
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
        "generator_digest": generator_digest(),
    }
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        old = read_json(manifest_path, remedy=f"delete {folder} and run the same command again")
        keep = {k: v for k, v in old.items() if k != "generator"}
        wanted = {k: v for k, v in manifest.items() if k != "generator"}
        if keep != wanted:
            differ = ", ".join(f"{k} {keep.get(k)!r} where this run asks for {v!r}" for k, v in wanted.items()
                               if keep.get(k) != v)
            # only the severities differ: one set holding them all serves both
            only_severities = all(keep.get(k) == v for k, v in wanted.items() if k != "severities")
            needed = sorted({*old.get("severities", []), *severities}) if only_severities else list(severities)
            raise FileExistsError(f"{folder} holds {name} generated with other settings ({manifest_path.name}: "
                                  f"{differ}): {severities_remedy(name, folder, needed)}")
    with atomic_path(manifest_path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    if not (folder / "labels.npy").is_file():
        _atomic_save(folder / "labels.npy", np.tile(clean.labels.astype(np.uint8 if clean.num_classes <= 256 else np.int64), len(severities)))
    todo = [c for c in corruptions if not (folder / f"{c}.npy").is_file()]
    workers = corruption_workers() if workers is None else workers
    if workers > 1 and todo:
        _prepare_in_processes(folder, clean.images, todo, severities=severities, seed=seed, workers=workers, name=name)
        return folder
    for corruption in tqdm(todo, desc=f"prepare {name}", unit="corruption"):
        stacked = np.concatenate(
            [corrupt_set(clean.images, corruption=corruption, severity=s, seed=_severity_seed(seed, s)) for s in severities]
        )
        _atomic_save(folder / f"{corruption}.npy", stacked)
    return folder


def corruption_workers() -> int:
    """Processes that generate corrupted sets: ``$DART_WORKERS`` (e.g. the cores of a GPU machine
    left to the CPU while the GPU trains), else 1."""
    from dartlib.environment import setting

    return int(setting("DART_WORKERS") or "1")


def _prepare_in_processes(folder: Path, images: np.ndarray, corruptions: list[str], *, severities: list[int], seed: int,
                          workers: int, name: str) -> None:
    """The files :func:`prepare_corrupted` writes, each chunk of :func:`corrupt_set` in a pool of
    ``workers`` processes (the same chunks and seeds, so the same bytes); each corruption's file
    is written as soon as its chunks are done."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        jobs = {c: [pool.submit(corrupt, images[sl], corruption=c, severity=s, seed=chunk_seed)
                    for s in severities for sl, chunk_seed in _chunks(len(images), _severity_seed(seed, s))]
                for c in corruptions}
        for corruption in tqdm(corruptions, desc=f"prepare {name} ({workers} processes)", unit="corruption"):
            _atomic_save(folder / f"{corruption}.npy", np.concatenate([job.result() for job in jobs[corruption]]))


def ensure_corrupted(name: str, *, severities: Sequence[int] = (5,), seed: int = 0) -> Path:
    """The folder of a corrupted set with all 15 corruptions at ``severities``: generated
    locally when it is a generated set (fmnistc) and absent; the official CIFAR-C files are
    used as they are when present."""
    folder = corrupted_dir(name)
    manifest = folder / MANIFEST
    if manifest.is_file():
        meta = read_json(manifest, remedy=f"delete {folder} and run the same command again")
        if meta.get("generator_digest") != generator_digest() or meta.get("seed") != seed:
            # generated by other code or settings: regenerate rather than mix
            for path in [manifest, folder / "labels.npy", *(folder / f"{c}.npy" for c in CORRUPTIONS)]:
                path.unlink(missing_ok=True)
    complete = (folder / "labels.npy").is_file() and all((folder / f"{c}.npy").is_file() for c in CORRUPTIONS)
    if complete:
        return folder
    return prepare_corrupted(name, severities=severities, seed=seed)
