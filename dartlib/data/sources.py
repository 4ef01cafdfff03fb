"""Dataset sources: every dataset the paper uses, read from its standard on-disk layout.

``load(name, split=...)`` returns a :class:`dartlib.data.dataset.Dataset` with uint8 NHWC images,
int64 labels and the class names. Where a dataset is absent,
:class:`dartlib.data.dataset.DataMissingError` names the dataset, the exact path expected and how
to obtain it; nothing is ever substituted silently. Image folders and their decoded cache are read
by :mod:`dartlib.data.image_folders`, the corrupted sets by :mod:`dartlib.data.corrupted_sets`.

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
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dartlib.data.corrupted_sets import _CORRUPTED_REMEDY, corrupted_dir, load_corrupted
from dartlib.data.dataset import CIFAR10_CLASSES, FMNIST_CLASSES, DataMissingError, Dataset, _check_split, location
from dartlib.data.files import CacheDiscardedWarning, DamagedFileError, load_npy
from dartlib.data.image_folders import (_cache_path, _cached_folder, _contents_digest, _image_files, _read_cache,
                                         _record_path, _resize_centre_crop, _write_cache, image_folder_problem)
from dartlib.paths import data_root
from dartlib.registry import Registry

FMNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")


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


_CLEAN_OF = {"cifar10c": load_cifar10, "cifar100c": load_cifar100, "fmnistc": load_fmnist}


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


IMAGE_SHAPES = {"cifar10": ((32, 32), 10), "cifar100": ((32, 32), 100)}  # (width, height), classes


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
