"""Downloads for the datasets that have a stable public source (needs internet).

CIFAR-10/100 and Fashion-MNIST come through torchvision; CIFAR-10-C and CIFAR-100-C through the
Zenodo API, whose record lists each file's md5 checksum, verified before unpacking. The other
datasets (PACS, OfficeHome, DomainNet-126, ImageNet-C, CIFAR-10.1) are fetched by hand; see
``python -m dartlib data status``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from dartlib.data.files import atomic_path, sha256_bytes_of, write_text_atomic
from dartlib.data.corrupted_sets import corrupted_dir
from dartlib.data.image_folders import _record_path
from dartlib.paths import data_root

ZENODO_API = "https://zenodo.org/api/records/"
ZENODO_RECORDS = {"cifar10c": ("2535967", "CIFAR-10-C.tar"), "cifar100c": ("3555552", "CIFAR-100-C.tar")}
TORCHVISION = {"cifar10": "CIFAR10", "cifar100": "CIFAR100", "fmnist": "FashionMNIST"}
DOWNLOADABLE = tuple(TORCHVISION) + tuple(ZENODO_RECORDS)
TIMEOUT_S = 60  # per blocking socket operation: a stalled server fails the download instead of hanging it


class ChecksumError(RuntimeError):
    """A downloaded file does not match the checksum its source publishes."""


def md5sum(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _fetch(url: str, dest: Path) -> None:
    with atomic_path(dest) as tmp, urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, \
            open(tmp, "wb") as out:  # noqa: S310 (fixed hosts)
        shutil.copyfileobj(response, out, length=1 << 20)


def zenodo_file(record: str, name: str, *, api: str = ZENODO_API) -> tuple[str, str]:
    """(download URL, md5) of file ``name`` of a Zenodo record, from the record's metadata."""
    with urllib.request.urlopen(f"{api}{record}", timeout=TIMEOUT_S) as response:  # noqa: S310
        meta = json.load(response)
    for entry in meta["files"]:
        if entry["key"] == name:
            algo, _, digest = entry["checksum"].partition(":")
            if algo != "md5":
                raise ChecksumError(f"unexpected checksum type {algo!r} for {name}")
            return entry["links"]["self"], digest
    raise FileNotFoundError(f"Zenodo record {record} has no file {name!r}")


def download_corrupted(name: str, *, api: str = ZENODO_API) -> Path:
    """Fetch CIFAR-10-C / CIFAR-100-C, verify its md5, unpack it where the loader looks, each
    file's sha256 recorded beside it (``<file>.sha256``) so that every later read checks it. The
    archive is unpacked into a fresh folder beside the target and renamed to it; a target that
    exists with files in it is never replaced (it may be a folder the user named)."""
    target = corrupted_dir(name)
    if target.is_dir() and any(target.iterdir()):
        raise FileExistsError(f"{target} exists and is not empty; the download never replaces a folder. Move it away "
                              "(or point the dataset's variable at a new folder, see `python -m dartlib data status`) "
                              "and run again")
    record, filename = ZENODO_RECORDS[name]
    url, md5 = zenodo_file(record, filename, api=api)
    downloads = data_root() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / filename
    if not archive.is_file() or md5sum(archive) != md5:
        _fetch(url, archive)
    got = md5sum(archive)
    if got != md5:
        raise ChecksumError(f"{archive}: md5 {got} differs from {md5} published by Zenodo record {record}; "
                            "delete it and download again")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".unpack", dir=target.parent))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        unpacked = next(p for p in staging.rglob("labels.npy")).parent
        for array in sorted(unpacked.glob("*.npy")):  # from the md5-checked archive: checked at each read after
            write_text_atomic(_record_path(array), sha256_bytes_of(array) + "\n")
        os.replace(unpacked, target)  # an empty target folder is replaced, a non-empty one refused
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def download(name: str) -> Path:
    """Download dataset ``name`` (one of ``DOWNLOADABLE``) into the data root."""
    if name in ZENODO_RECORDS:
        return download_corrupted(name)
    if name in TORCHVISION:
        import torchvision

        cls = getattr(torchvision.datasets, TORCHVISION[name])
        for train in (True, False):
            cls(str(data_root()), train=train, download=True)
        return data_root()
    raise ValueError(f"no automatic download for {name!r}; downloadable: {', '.join(DOWNLOADABLE)}")
