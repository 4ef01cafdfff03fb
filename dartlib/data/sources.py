"""Dataset sources: every dataset the paper uses, read from its standard on-disk layout.

``load(name, split=...)`` returns a :class:`Dataset` with uint8 NHWC images, int64 labels and
the class names. Where a dataset is absent, :class:`DataMissingError` names the dataset, the
exact path expected and how to obtain it; nothing is ever substituted silently.

Locations (each can be overridden by an environment variable):

==============  ==========================================  ====================
dataset         default location (under the data root)      variable
==============  ==========================================  ====================
fmnist          /usr/share/datasets/fashion-mnist (Debian)  DART_FMNIST_DIR
cifar10         cifar10/ image folder or torchvision files  DART_CIFAR10_DIR
cifar100        cifar100/ image folder or torchvision files DART_CIFAR100_DIR
cifar10c        CIFAR-10-C/                                 DART_CIFAR10C_DIR
cifar100c       CIFAR-100-C/                                DART_CIFAR100C_DIR
fmnistc         FMNIST-C/ (generated)                       DART_FMNISTC_DIR
cifar10.1       CIFAR-10.1/                                 DART_CIFAR101_DIR
pacs            PACS/<domain>/<class>/                      DART_PACS_DIR
officehome      OfficeHome/<domain>/<class>/                DART_OFFICEHOME_DIR
domainnet126    DomainNet126/<domain>/<class>/              DART_DOMAINNET126_DIR
imagenet-c      ImageNet-C/<corruption>/<severity>/<wnid>/  DART_IMAGENETC_DIR
imagenet        ImageNet/<split>/<wnid>/ (train: D_int)     DART_IMAGENET_DIR
==============  ==========================================  ====================
"""

from __future__ import annotations

import gzip
import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dartlib.data.files import (CacheDiscardedWarning, DamagedFileError, atomic_path, load_npy, load_npz, read_json,
                                 set_aside, sha256_once, write_text_atomic)
from dartlib.paths import cache_root, data_root
from dartlib.registry import Registry

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
FMNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FMNIST_CLASSES = (
    "t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot",
)


class DataMissingError(FileNotFoundError):
    """A dataset is not where the suite looks for it; the message says where and how to get it."""

    def __init__(self, dataset: str, path: Path | str, remedy: str) -> None:
        self.dataset, self.path, self.remedy = dataset, Path(path), remedy
        super().__init__(f"dataset {dataset!r} not found: expected {path}. To obtain it: {remedy}")


@dataclass(frozen=True)
class Dataset:
    """Images (uint8, N x H x W x 3), labels (int64) and class names of one split."""

    name: str
    split: str
    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.images.dtype != np.uint8 or self.images.ndim != 4 or self.images.shape[-1] != 3:
            raise ValueError(f"{self.name}: images must be uint8 NHWC RGB, got {self.images.dtype} {self.images.shape}")
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(f"{self.name}: {self.labels.shape[0]} labels for {self.images.shape[0]} images")

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def digest(self) -> str:
        """sha256 over images and labels: identifies the exact data a model saw."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.images).data)
        h.update(self.labels.astype("<i8").tobytes())
        return h.hexdigest()


def location(variable: str, default: Path) -> Path:
    """``$variable`` when set (stripped and checked, :func:`dartlib.environment.setting`), else ``default``."""
    from dartlib.environment import setting

    value = setting(variable)
    return Path(value).expanduser() if value else default


# --------------------------------------------------------------------------- Fashion-MNIST


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def to_rgb32(gray: np.ndarray) -> np.ndarray:
    """28x28 grey images -> 32x32x3: zero-pad 2 pixels per side and replicate the channel."""
    padded = np.pad(gray, ((0, 0), (2, 2), (2, 2)))
    return np.repeat(padded[..., None], 3, axis=-1)


def load_fmnist(*, split: str = "test") -> Dataset:
    """Fashion-MNIST from Debian's ``dataset-fashion-mnist`` files, else torchvision's files."""
    prefix = {"train": "train", "test": "t10k"}[_check_split(split, ("train", "test"))]
    folder = location("DART_FMNIST_DIR", FMNIST_DEBIAN_DIR)
    images_gz = folder / f"{prefix}-images-idx3-ubyte.gz"
    labels_gz = folder / f"{prefix}-labels-idx1-ubyte.gz"
    if not images_gz.is_file():
        tv_dir = data_root() / "FashionMNIST" / "raw"  # torchvision.datasets.FashionMNIST(root=data_root())
        images_gz, labels_gz = tv_dir / images_gz.name, tv_dir / labels_gz.name
    if not images_gz.is_file():
        raise DataMissingError(
            "fmnist",
            folder / f"{prefix}-images-idx3-ubyte.gz",
            "`apt-get install dataset-fashion-mnist` (Debian), or with internet `python -m dartlib data download fmnist`",
        )
    gray, labels = _read_idx(images_gz), _read_idx(labels_gz)
    return Dataset("fmnist", split, to_rgb32(gray), labels.astype(np.int64), FMNIST_CLASSES, {"source": str(images_gz.parent)})


# --------------------------------------------------------------------------- image folders


def _check_split(split: str, valid: tuple[str, ...]) -> str:
    if split not in valid:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(valid)}")
    return split


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def read_image_folder(root: Path, *, size: int | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Read ``root/<class>/<image>`` (classes in sorted order, files sorted by name).

    ``size``: resize the shorter side to round(size * 256 / 224) and centre-crop ``size``
    (the usual ImageNet-style evaluation transform); None keeps images as they are (they must
    then share one shape, e.g. CIFAR's 32 x 32).
    """
    classes, files = image_folder_files(root)
    images, labels = [], []
    for label, path in files:
        rgb = _read_image(path, size=size)
        if size is None and images and rgb.shape != images[0].shape:
            raise DamagedFileError(path, f"{rgb.shape[1]} x {rgb.shape[0]} pixels where the folder's first image "
                                         f"has {images[0].shape[1]} x {images[0].shape[0]}", IMAGE_REMEDY)
        images.append(rgb)
        labels.append(label)
    if not images:
        raise ValueError(f"no images under {root}")
    return np.stack(images), np.asarray(labels, dtype=np.int64), classes


def image_folder_files(root: Path) -> tuple[tuple[str, ...], list[tuple[int, Path]]]:
    """The classes of ``root/<class>/<image>`` (sorted) and its (label, file) pairs in the order
    :func:`read_image_folder` reads them."""
    classes = tuple(sorted(d.name for d in root.iterdir() if d.is_dir()))
    return classes, [(label, path) for label, cls in enumerate(classes) for path in _image_files(root / cls)]


def _read_image(path: Path, *, size: int | None) -> np.ndarray:
    """One image file as uint8 H x W x 3 (resized and centre-cropped to ``size`` when given)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            rgb = img.convert("RGB")
    except (OSError, ValueError, SyntaxError) as err:  # PIL's UnidentifiedImageError is an OSError
        raise DamagedFileError(path, f"not a readable image ({err})", IMAGE_REMEDY) from None
    if size is not None:
        rgb = _resize_centre_crop(rgb, size)
    return np.asarray(rgb, dtype=np.uint8)


IMAGE_REMEDY = "replace the folder with an intact copy of the dataset (`python -m dartlib data status` checks it)"
IMAGE_SHAPES = {"cifar10": ((32, 32), 10), "cifar100": ((32, 32), 100)}  # (width, height), classes
SAMPLED_CLASSES = 3  # data status opens the first image of this many classes (first, middle, last): a few files


def image_folder_problem(root: Path, *, shape: tuple[int, int], classes: int) -> str:
    """What is wrong with the image folder ``root`` (``<class>/<image>``), read cheaply: the number
    of class folders, and the first image of a few classes opened and measured; "" when it looks
    right. The answer names the file or folder at fault."""
    from PIL import Image

    found = sorted(d for d in root.iterdir() if d.is_dir())
    if len(found) != classes:
        return f"{root} holds {len(found)} class folders, expected {classes} (<class>/<image>.png)"
    for folder in dict.fromkeys(found[i] for i in (0, len(found) // 2, len(found) - 1)[:SAMPLED_CLASSES]):
        files = _image_files(folder)
        if not files:
            others = sorted(p.name for p in folder.iterdir())[:3]
            return (f"{folder} holds no image files ({', '.join(IMAGE_SUFFIXES)})"
                    + (f"; it holds {', '.join(others)}, ..." if others else ", it is empty"))
        try:
            with Image.open(files[0]) as img:
                img.load()
                size = img.size
        except (OSError, ValueError, SyntaxError) as err:
            return f"{files[0]} is not a readable image ({err})"
        if size != shape:
            return f"{files[0]} is {size[0]} x {size[1]} pixels, expected {shape[0]} x {shape[1]}"
    return ""


def dataset_problem(name: str, path: Path) -> str:
    """What is wrong with dataset ``name`` found at ``path`` (:func:`expected_path`), checked cheaply
    (a few files): image folders hold images of the expected shape, a corrupted set's labels read
    as an array; "" when nothing is."""
    if name in IMAGE_SHAPES and path.is_dir() and path.name == "test":  # an image folder, not torchvision's files
        shape, classes = IMAGE_SHAPES[name]
        for split in ("test", "train"):
            if (path.parent / split).is_dir():
                problem = image_folder_problem(path.parent / split, shape=shape, classes=classes)
                if problem:
                    return problem
        return ""
    if path.suffix == ".npy" and path.is_file():
        try:
            load_npy(path, mmap_mode="r")
        except DamagedFileError as err:
            return str(err)
    return ""


def _resize_centre_crop(img, size: int):
    from PIL import Image

    w, h = img.size
    if (w, h) == (size, size):  # already an evaluation crop (ImageNet-C's released images are 224 x 224)
        return img
    short = round(size * 256 / 224)
    scale = short / min(w, h)
    img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    return img.crop((left, top, left + size, top + size))


def _cache_path(tag: str, source: Path) -> Path:
    """The cache of ``source`` under the data root, keyed on its content: every file's relative
    path, size and modification time, so an added, removed or replaced image gives a new key."""
    h = hashlib.sha256(str(source.resolve()).encode())
    for folder, dirs, files in sorted(os.walk(source)):
        dirs.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            h.update(f"{os.path.relpath(os.path.join(folder, name), source)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return cache_root() / f"{tag}-{h.hexdigest()[:12]}.npz"


def _read_cache(cache: Path) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    images, labels, classes = load_npz(cache, ("images", "labels", "classes"),
                                       remedy="delete it; the next load decodes the images again")
    return images, labels, tuple(str(c) for c in classes)


def _write_cache(cache: Path, images: np.ndarray, labels: np.ndarray, classes: tuple[str, ...]) -> None:
    with atomic_path(cache) as tmp:
        np.savez(tmp, images=images, labels=labels, classes=np.array(classes))
    write_text_atomic(_record_path(cache), _contents_digest(images, labels, classes) + "\n")


CACHE_SPOT_CHECKS = 3  # images of a decoded folder's cache decoded again and compared, at each read


def _record_path(cache: Path) -> Path:
    """The digest of a cache's contents, kept beside it (``<cache>.sha256``)."""
    return cache.with_name(cache.name + ".sha256")


def _contents_digest(images: np.ndarray, labels: np.ndarray, classes: tuple[str, ...]) -> str:
    h = hashlib.sha256(np.ascontiguousarray(images).data)
    h.update(np.asarray(labels).astype("<i8").tobytes())
    h.update("\0".join(classes).encode())
    return h.hexdigest()


def _cache_problem(cache: Path, root: Path, size: int | None, arrays: tuple) -> str:
    """What is wrong with the decoded folder's cache ``arrays`` (read from ``cache`` of ``root``),
    or "": its contents against the digest stored beside it (recorded now where an older cache
    has none, once the spot check passed), its classes and length against the folder's, and
    :data:`CACHE_SPOT_CHECKS` images, chosen anew each time, decoded again from their files."""
    images, labels, classes = arrays
    digest = _contents_digest(images, labels, classes)
    record = _record_path(cache)
    if record.is_file() and record.read_text().strip() != digest:
        return f"has contents that do not match the sha256 in {record.name} (altered or damaged after it was written)"
    folder_classes, files = image_folder_files(root)
    if not files and record.is_file():
        # a folder installed from a packed archive (dartlib.data.packed.install_as_image_folder): the cache is
        # the data, its sha256 recorded when the archive, itself checked by sha256, was unpacked
        return ""
    if folder_classes != classes or len(files) != len(labels):
        return f"holds {len(labels)} images of {len(classes)} classes, the folder {root} {len(files)} of {len(folder_classes)}"
    for i in np.random.default_rng().choice(len(files), size=min(CACHE_SPOT_CHECKS, len(files)), replace=False):
        label, path = files[int(i)]
        if labels[i] != label or not np.array_equal(images[i], _read_image(path, size=size)):
            return f"holds an image {int(i)} that differs from its file {path} (spot check)"
    if not record.is_file():
        write_text_atomic(record, digest + "\n")
    return ""


def _cached_folder(tag: str, root: Path, size: int | None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Decode an image folder once; later loads read a compressed cache under the data root,
    checked at each read (:func:`_cache_problem`): a cache that fails is discarded, with one
    :class:`CacheDiscardedWarning` naming it, and the folder decoded again."""

    cache = _cache_path(f"{tag}-{size}", root)
    if cache.is_file():
        try:
            arrays = _read_cache(cache)
        except DamagedFileError as err:
            arrays, problem = None, f"is unreadable ({err.problem})"
        if arrays is not None:
            problem = _cache_problem(cache, root, size, arrays)
        if not problem:
            return arrays
        cache.unlink(missing_ok=True)
        _record_path(cache).unlink(missing_ok=True)
        warnings.warn(f"{cache}: the decoded cache of {root} {problem}; discarded: the images are decoded again "
                      f"(nothing to do)", CacheDiscardedWarning, stacklevel=2)
    images, labels, classes = read_image_folder(root, size=size)
    _write_cache(cache, images, labels, classes)
    return images, labels, classes


# --------------------------------------------------------------------------- CIFAR


def _load_cifar(name: str, *, split: str, variable: str, folder_name: str, tv_class: str) -> Dataset:
    _check_split(split, ("train", "test"))
    root = location(variable, data_root() / folder_name)
    if (root / split).is_dir():
        images, labels, classes = _cached_folder(f"{name}-{split}", root / split, None)
        return Dataset(name, split, images, labels, classes, {"source": str(root / split)})
    tv_root = data_root()
    try:
        import torchvision

        ds = getattr(torchvision.datasets, tv_class)(str(tv_root), train=split == "train", download=False)
    except RuntimeError:
        raise DataMissingError(
            name,
            root / split,
            f"point {variable} at an image-folder copy with train/<class>/* and test/<class>/*, or with "
            f"internet run `python -m dartlib data download {name}`",
        ) from None
    return Dataset(name, split, np.asarray(ds.data, dtype=np.uint8), np.asarray(ds.targets, dtype=np.int64),
                   tuple(ds.classes), {"source": str(tv_root)})


def load_cifar10(*, split: str = "test") -> Dataset:
    return _load_cifar("cifar10", split=split, variable="DART_CIFAR10_DIR", folder_name="cifar10", tv_class="CIFAR10")


def load_cifar100(*, split: str = "test") -> Dataset:
    return _load_cifar("cifar100", split=split, variable="DART_CIFAR100_DIR", folder_name="cifar100", tv_class="CIFAR100")


# --------------------------------------------------------------------------- CIFAR-C layout

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
_CLEAN_OF = {"cifar10c": load_cifar10, "cifar100c": load_cifar100, "fmnistc": load_fmnist}


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


# --------------------------------------------------------------------------- natural shifts


def load_cifar10_1(*, split: str = "test", version: str = "v6") -> Dataset:
    """CIFAR-10.1 from ``cifar10.1_<version>_data.npy`` and ``..._labels.npy``."""
    _check_split(split, ("test",))
    folder = location("DART_CIFAR101_DIR", data_root() / "CIFAR-10.1")
    data_file = folder / f"cifar10.1_{version}_data.npy"
    if not data_file.is_file():
        raise DataMissingError("cifar10.1", data_file, "download cifar10.1_v6_data.npy and cifar10.1_v6_labels.npy "
                               "from the CIFAR-10.1 release (github.com/modestyachts/CIFAR-10.1, datasets/) into that folder")
    images = np.load(data_file).astype(np.uint8)
    labels = np.load(folder / f"cifar10.1_{version}_labels.npy").astype(np.int64)
    return Dataset("cifar10.1", split, images, labels, CIFAR10_CLASSES, {"source": str(folder)})


DOMAINS = {
    "pacs": ("art_painting", "cartoon", "photo", "sketch"),
    "officehome": ("Art", "Clipart", "Product", "Real_World"),
    "domainnet126": ("clipart", "painting", "real", "sketch"),
}
_DOMAIN_SOURCES = {
    "pacs": ("DART_PACS_DIR", "PACS", "the PACS release (kfold/ folder of Li et al., 2017; ~180 MB)"),
    "officehome": ("DART_OFFICEHOME_DIR", "OfficeHome", "OfficeHomeDataset_10072016 (Venkateswara et al., 2017; "
                   "~1.8 GB; rename 'Real World' to Real_World)"),
    "domainnet126": ("DART_DOMAINNET126_DIR", "DomainNet126", "DomainNet (ai.bu.edu/M3SDA) restricted to the 126 "
                     "classes of the AdaContrast lists (~18 GB for the four domains)"),
}


def load_domain(name: str, *, split: str, image_size: int = 224) -> Dataset:
    """One domain (``split``) of PACS, OfficeHome or DomainNet-126 from ``<domain>/<class>/*``."""
    _check_split(split, DOMAINS[name])
    variable, folder_name, what = _DOMAIN_SOURCES[name]
    root = location(variable, data_root() / folder_name)
    if not (root / split).is_dir():
        raise DataMissingError(name, root / split, f"download {what} and lay it out as {root}/<domain>/<class>/<image>")
    images, labels, classes = _cached_folder(f"{name}-{split}", root / split, image_size)
    return Dataset(name, split, images, labels, classes, {"domain": split, "source": str(root)})


# The paper's short domain names (its X->Y scenario labels) -> the folder names of each release.
DOMAIN_FOLDERS = {
    "pacs": {"art": "art_painting", "cartoon": "cartoon", "photo": "photo", "sketch": "sketch"},
    "officehome": {"art": "Art", "clipart": "Clipart", "product": "Product", "real": "Real_World"},
    "domainnet126": {"clipart": "clipart", "painting": "painting", "real": "real", "sketch": "sketch"},
}


def load_imagenet(*, split: str = "train", per_class: int | None = 50, seed: int = 0, image_size: int = 224) -> Dataset:
    """ImageNet from ``<split>/<wnid>/*.JPEG`` (classes: sorted wnids); ``per_class`` random
    files of every class are decoded, not the whole split (the intermediate set D_int of
    Appendix A is 50 training images per class; None reads every file)."""
    from PIL import Image

    _check_split(split, ("train", "val"))
    root = location("DART_IMAGENET_DIR", data_root() / "ImageNet")
    folder = root / split
    if not folder.is_dir():
        raise DataMissingError("imagenet", folder, "the ILSVRC-2012 images (image-net.org, ~140 GB for train) laid out "
                               f"as {root}/train/<wnid>/<image>.JPEG (the usual ImageFolder layout)")
    cache = _cache_path(f"imagenet-{split}-{per_class}-{seed}-{image_size}", folder)
    arrays = _read_cache(cache) if cache.is_file() else None
    record = _record_path(cache)
    if arrays is not None and record.is_file() and record.read_text().strip() != _contents_digest(*arrays):
        cache.unlink()
        record.unlink()

        warnings.warn(f"{cache}: the decoded cache of {folder} has contents that do not match the sha256 in "
                      f"{record.name}; discarded: the images are decoded again (nothing to do)", CacheDiscardedWarning,
                      stacklevel=2)
        arrays = None
    if arrays is not None:
        images, labels, classes = arrays
    else:
        classes = tuple(sorted(d.name for d in folder.iterdir() if d.is_dir()))
        rng = np.random.default_rng(seed)
        images_list, labels_list = [], []
        for label, wnid in enumerate(classes):
            files = _image_files(folder / wnid)
            if per_class is not None:
                if len(files) < per_class:
                    raise ValueError(f"{folder / wnid} has {len(files)} images, fewer than per_class={per_class}")
                files = [files[i] for i in np.sort(rng.permutation(len(files))[:per_class])]
            for path in files:
                with Image.open(path) as img:
                    images_list.append(np.asarray(_resize_centre_crop(img.convert("RGB"), image_size), dtype=np.uint8))
                labels_list.append(label)
        images, labels = np.stack(images_list), np.asarray(labels_list, dtype=np.int64)
        _write_cache(cache, images, labels, classes)
    return Dataset("imagenet", split, images, labels, classes, {"per_class": per_class, "seed": seed, "source": str(root)})


def load_imagenet_c(*, corruption: str, severity: int = 5, split: str = "test", image_size: int = 224) -> Dataset:
    """ImageNet-C from ``<corruption>/<severity>/<wnid>/*.JPEG`` (classes: sorted wnids)."""
    _check_split(split, ("test",))
    root = location("DART_IMAGENETC_DIR", data_root() / "ImageNet-C")
    folder = root / corruption / str(severity)
    if not folder.is_dir():
        raise DataMissingError("imagenet-c", folder, "download ImageNet-C from Zenodo record 2235448 (~66 GB for the "
                               f"15 corruptions) and unpack it as {root}/<corruption>/<severity>/<wnid>/")
    images, labels, classes = _cached_folder(f"imagenet-c-{corruption}-{severity}", folder, image_size)
    return Dataset("imagenet-c", split, images, labels, classes, {"corruption": corruption, "severity": severity})


def load_condensed(*, split: str = "train", source: str = "cifar10", ipc: int = 50) -> Dataset:
    """A condensed (distilled) training set of ``source``, ``ipc`` images per class, from
    ``<condensed dir>/<source>_ipc<ipc>.npz`` holding ``images`` (uint8, N x 32 x 32 x 3, RGB) and
    ``labels`` (int64); g_phi can be trained on it instead of the full training set (appendix
    table "condensed training data")."""
    _check_split(split, ("train",))
    folder = location("DART_CONDENSED_DIR", data_root() / "condensed")
    path = folder / f"{source}_ipc{ipc}.npz"
    if not path.is_file():
        raise DataMissingError(f"{source}-condensed", path, HOW_TO_GET_CONDENSED)
    blob = np.load(path)
    classes = CIFAR10_CLASSES if source == "cifar10" else tuple(str(i) for i in range(int(blob["labels"].max()) + 1))
    return Dataset(f"{source}-condensed", split, blob["images"].astype(np.uint8), blob["labels"].astype(np.int64), classes,
                   {"source": str(path)})


HOW_TO_GET_CONDENSED = (
    "a public distilled CIFAR-10 with 50 images per class (e.g. a dataset-distillation release), converted to an .npz "
    "with `images` (uint8, N x 32 x 32 x 3, RGB, un-normalised) and `labels` (int64)")

SOURCES: Registry[Callable[..., Dataset]] = Registry(
    "dataset",
    {
        "fmnist": load_fmnist,
        "cifar10": load_cifar10,
        "cifar100": load_cifar100,
        "fmnistc": lambda **kw: load_corrupted("fmnistc", **kw),
        "cifar10c": lambda **kw: load_corrupted("cifar10c", **kw),
        "cifar100c": lambda **kw: load_corrupted("cifar100c", **kw),
        "cifar10.1": load_cifar10_1,
        "pacs": lambda **kw: load_domain("pacs", **kw),
        "officehome": lambda **kw: load_domain("officehome", **kw),
        "domainnet126": lambda **kw: load_domain("domainnet126", **kw),
        "imagenet-c": load_imagenet_c,
        "imagenet": load_imagenet,
        "cifar10-condensed": lambda **kw: load_condensed(source="cifar10", **kw),
    },
)


def load(name: str, *, split: str = "test", **options) -> Dataset:
    """Load split ``split`` of dataset ``name`` (see the module table for locations).

    Options: ``corruption`` and ``severity`` for the corrupted sets; ``image_size`` for the
    domain datasets and ImageNet-C; ``version`` for CIFAR-10.1. For PACS, OfficeHome and
    DomainNet-126 the split is the domain name.
    """
    return SOURCES[name](split=split, **options)


def clean_source(name: str) -> Callable[..., Dataset]:
    """The loader of the clean set a corrupted set is generated from."""
    return _CLEAN_OF[name]


def expected_path(name: str) -> Path:
    """The file or folder whose presence means dataset ``name`` can be loaded."""
    SOURCES[name]  # unknown names list the valid ones
    if name == "fmnist":
        folder = location("DART_FMNIST_DIR", FMNIST_DEBIAN_DIR)
        tv = data_root() / "FashionMNIST" / "raw" / "t10k-images-idx3-ubyte.gz"
        return tv if tv.is_file() and not (folder / tv.name).is_file() else folder / tv.name
    if name in ("cifar10", "cifar100"):
        variable = "DART_CIFAR10_DIR" if name == "cifar10" else "DART_CIFAR100_DIR"
        folder = location(variable, data_root() / name) / "test"
        tv = data_root() / ("cifar-10-batches-py" if name == "cifar10" else "cifar-100-python")
        return tv if tv.is_dir() and not folder.is_dir() else folder
    if name in ("cifar10c", "cifar100c", "fmnistc"):
        return corrupted_dir(name) / "labels.npy"
    if name == "cifar10.1":
        return location("DART_CIFAR101_DIR", data_root() / "CIFAR-10.1") / "cifar10.1_v6_data.npy"
    if name in DOMAINS:
        variable, folder_name, _ = _DOMAIN_SOURCES[name]
        return location(variable, data_root() / folder_name)
    if name == "cifar10-condensed":
        return location("DART_CONDENSED_DIR", data_root() / "condensed") / "cifar10_ipc50.npz"
    if name == "imagenet":
        return location("DART_IMAGENET_DIR", data_root() / "ImageNet") / "train"
    return location("DART_IMAGENETC_DIR", data_root() / "ImageNet-C")


HOW_TO_GET = {
    "fmnist": "apt-get install dataset-fashion-mnist (Debian), or torchvision.datasets.FashionMNIST(download=True)",
    "cifar10": "torchvision.datasets.CIFAR10(download=True), or an image-folder copy via DART_CIFAR10_DIR",
    "cifar100": "torchvision.datasets.CIFAR100(download=True), or an image-folder copy via DART_CIFAR100_DIR",
    "fmnistc": _CORRUPTED_REMEDY["fmnistc"],
    "cifar10c": _CORRUPTED_REMEDY["cifar10c"],
    "cifar100c": _CORRUPTED_REMEDY["cifar100c"],
    "cifar10.1": "cifar10.1_v6_data.npy + cifar10.1_v6_labels.npy from github.com/modestyachts/CIFAR-10.1 (datasets/)",
    "pacs": "the PACS images (Li et al., 2017), as <domain>/<class>/<image>",
    "officehome": "OfficeHomeDataset_10072016, as <domain>/<class>/<image> (Real World -> Real_World)",
    "domainnet126": "DomainNet's clipart/painting/real/sketch restricted to the 126 AdaContrast classes",
    "imagenet-c": "ImageNet-C from Zenodo record 2235448, as <corruption>/<severity>/<wnid>/",
    "imagenet": "the ILSVRC-2012 training images (image-net.org) as train/<wnid>/<image>.JPEG; 50 per class are read",
    "cifar10-condensed": HOW_TO_GET_CONDENSED,
}


def status() -> list[dict[str, object]]:
    """For every dataset: present or not, where the suite looks, how to obtain it, and what is wrong
    with what is there (:func:`dataset_problem`, "" when nothing)."""
    rows = []
    for name in SOURCES:
        path = expected_path(name)
        present = path.exists()
        rows.append({"dataset": name, "present": present, "path": str(path), "how to get it": HOW_TO_GET[name],
                     "problem": dataset_problem(name, path) if present else ""})
    return rows
