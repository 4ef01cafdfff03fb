"""A cell's test stream as the engine reads it: the test set it draws from (a corrupted set, a
clean or natural-shift set, a domain benchmark's target domain, the mixed-domain pool), the order
the cell's label-shift protocol gives it (Section 5.1), and the digests that key stored results by
the data they were computed on. Test sets are cached across cells, per data location."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

import numpy as np

from dartlib.data import load, protocols
from dartlib.data.corruptions import CORRUPTIONS, jpeg_round_trip
from dartlib.data.sources import DOMAIN_FOLDERS
from dartlib.experiments.grid import Cell


def _data_location() -> tuple:
    """Where data are read from (the data root and every ``DART_*`` folder override): part of the
    test-set caches' keys, so a cache never serves a set read from another location."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("DART_") and k.endswith("_DIR")))


def _corrupted(dataset: str, corruption: str, severity: int, image_size: int = 0):
    return _corrupted_at(dataset, corruption, severity, image_size, _data_location())


@lru_cache(maxsize=4)
def _corrupted_at(dataset: str, corruption: str, severity: int, image_size: int, location: tuple):
    if corruption == "clean":  # a natural-shift test set (CIFAR-10.1) or a clean one
        return load(dataset, split="test")
    if "->" in corruption:  # a domain scenario "source->target": the target domain is the test set
        target = DOMAIN_FOLDERS[dataset][corruption.split("->")[1]]
        return load(dataset, split=target, **({"image_size": image_size} if image_size else {}))
    if image_size:
        return load(dataset, corruption=corruption, severity=severity, image_size=image_size)
    return load(dataset, corruption=corruption, severity=severity)


def _mixed(dataset: str, severity: int) -> tuple[np.ndarray, np.ndarray]:
    return _mixed_at(dataset, severity, _data_location())


@lru_cache(maxsize=1)
def _mixed_at(dataset: str, severity: int, location: tuple) -> tuple[np.ndarray, np.ndarray]:
    parts = [load(dataset, corruption=c, severity=severity) for c in CORRUPTIONS]
    return np.concatenate([p.images for p in parts]), np.concatenate([p.labels for p in parts])


def stream_order(labels: np.ndarray, cell: Cell) -> np.ndarray:
    """The test order of a cell (:func:`dartlib.data.protocols.test_order` of its shift); in the
    params, ``subset=`` sets the online-imbalance subset size and ``limit=`` keeps the first images."""
    options = cell.options
    order = protocols.test_order(labels, shift=cell.shift, shift_param=cell.shift_param, seed=cell.seed,
                                 subset_size=options.get("subset", 0))
    limit = options.get("limit", 0)
    return order[:limit] if limit else order


def cell_stream(cell: Cell) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels, order) of a cell's test stream (corrupted sets cached across cells).

    Corruption ``clean`` is the dataset's own test split (CIFAR-10.1 for CIFAR-10.1-LT);
    a corruption ``<source>-><target>`` is the target domain of a domain benchmark (PACS,
    OfficeHome, DomainNet-126); ``size=`` in the params sets the image size of the sets that are
    resized on loading (domains, ImageNet-C);
    corruption ``mixed`` is the mixed-domain set: all 15 corruptions of the severity in one pool
    (Appendix, "DART in mixed domain TTA settings"); ``pool=`` in the params draws that many
    images of the pool at random first (reduced profiles), before the shift protocol orders them;
    ``jpeg_source=q`` corrupts the clean test images after one more JPEG round trip at quality q
    (:func:`_jpeg_source_set`: what the JPEG copy of CIFAR-10 may cost, docs/deviations.md).
    """
    if cell.corruption == "mixed":
        images, labels = _mixed(cell.dataset, int(cell.severity))
    else:
        data = _corrupted(cell.dataset, cell.corruption, int(cell.severity or 0), cell.options.get("size", 0))
        images, labels = data.images, data.labels
    pool = cell.options.get("pool", 0)
    if pool:
        keep = np.sort(np.random.default_rng(cell.seed).permutation(len(labels))[:pool])
        images, labels = images[keep], labels[keep]
    quality = cell.options.get("jpeg_source", 0)
    if quality:
        if cell.corruption == "mixed" or pool:
            raise ValueError(f"{cell.label()}: jpeg_source= applies to one generated corruption's test set, not a pool")
        images = _jpeg_source_set(cell.dataset, cell.corruption, int(cell.severity or 0), quality)
    return images, labels, stream_order(labels, cell)


@lru_cache(maxsize=16)
def _jpeg_source_set(dataset: str, corruption: str, severity: int, quality: int) -> np.ndarray:
    """The generated corrupted set ``dataset`` (its clean source's test split), with the clean images
    passed through one more JPEG round trip at ``quality`` before they are corrupted, with the set's
    own seed schedule (:func:`dartlib.data.prepare.corrupt_like`): the same corruption draws on a base
    image that went through JPEG once more."""
    from dartlib.data.prepare import corrupt_like
    from dartlib.data.sources import clean_source

    clean = clean_source(dataset)(split="test")
    return corrupt_like(dataset, jpeg_round_trip(clean.images, quality=quality), corruption=corruption,
                        severity=severity)


def stream_digest(cell: Cell) -> str:
    """sha256 of a cell's test stream as the engine reads it (:func:`cell_stream`): the digest of
    the test set it draws from (:func:`set_digest`) and the labels and indices of the stream in
    order. A regenerated corrupted set, another protocol, subset or pool changes the cells that
    read it."""
    images, labels, order = cell_stream(cell)
    h = hashlib.sha256(set_digest(cell).encode())
    h.update(f"{images.shape}".encode())
    h.update(np.ascontiguousarray(labels[order]).astype("<i8").tobytes())
    h.update(np.ascontiguousarray(order).astype("<i8").tobytes())
    return h.hexdigest()[:16]


def test_set_digest(dataset: str, *, corruption: str, severity: int) -> str:
    """sha256 of the images and labels of a test set as the engine reads it (``"clean"``: the
    data set's test split): a study's table over such a set is keyed by it."""
    return _set_digest_at(dataset, corruption, int(severity or 0), 0, _data_location())


def set_digest(cell: Cell) -> str:
    """sha256 of the images and labels of the test set a cell draws from (before any pool)."""
    size = cell.options.get("size", 0)
    return _set_digest_at(cell.dataset, cell.corruption, int(cell.severity or 0), size, _data_location())


@lru_cache(maxsize=None)
def _set_digest_at(dataset: str, corruption: str, severity: int, image_size: int, location: tuple) -> str:
    if corruption == "mixed":
        images, labels = _mixed_at(dataset, severity, location)
    else:
        data = _corrupted_at(dataset, corruption, severity, image_size, location)
        images, labels = data.images, data.labels
    h = hashlib.sha256(np.ascontiguousarray(images).data)
    h.update(np.ascontiguousarray(labels).astype("<i8").tobytes())
    return h.hexdigest()
