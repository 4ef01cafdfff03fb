"""Image folders (``root/<class>/<image>``): read in a fixed order, checked cheaply, and decoded
once into a compressed cache under the data root that is checked at each read (its contents'
sha256 kept beside it, a few images decoded again and compared)."""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np

from dartlib.data.files import CacheDiscardedWarning, DamagedFileError, atomic_path, load_npz, write_text_atomic
from dartlib.paths import cache_root

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


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
