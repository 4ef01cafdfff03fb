"""An image-folder copy of CIFAR-10 packed into one lzma file, for machines that only receive the
repository's working tree (a GPU machine without the shared data folder).

The file holds the JPEG/PNG bytes of every image exactly as stored, in the order
:func:`dartlib.data.image_folders.read_image_folder` reads them (classes sorted, files sorted by name),
plus an index; unpacking decodes each with Pillow's ``convert("RGB")`` as that reader does, so
the pixels (and the datasets' digests) are identical to reading the folder. The frost
photographs of ``imagecorruptions-imaug`` (CIFAR-10-C's frost corruption) travel inside as well,
for machines where that package is not installed.

Layout (inside one lzma stream): ``b"DARTPACK1\\n"``, an 8-byte little-endian index length, the
JSON index, then the concatenated file bytes.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import lzma
import sys
from concurrent.futures import Executor
from pathlib import Path

import numpy as np

from dartlib.data.files import atomic_path, write_text_atomic
from dartlib.data.image_folders import _cache_path, _contents_digest, _image_files, _record_path

MAGIC = b"DARTPACK1\n"
SPLITS = ("train", "test")


def collect_image_folder(root: Path | str, *, frost: bool = True) -> tuple[dict, list[bytes]]:
    """The index and the file bytes of ``root/{train,test}/<class>/<image>`` (and of the installed
    frost photographs), in the order :func:`dartlib.data.image_folders.read_image_folder` reads them."""
    root = Path(root)
    blobs: list[bytes] = []
    index: dict = {"format": 1, "splits": {}, "frost": []}
    offset = 0
    for split in SPLITS:
        folder = root / split
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder; expected {root}/train/<class>/* and {root}/test/<class>/*")
        classes = sorted(d.name for d in folder.iterdir() if d.is_dir())
        labels, lengths = [], []
        for label, cls in enumerate(classes):
            for path in _image_files(folder / cls):
                data = path.read_bytes()
                blobs.append(data)
                labels.append(label)
                lengths.append(len(data))
        index["splits"][split] = {"classes": classes, "labels": labels, "lengths": lengths, "offset": offset}
        offset += sum(lengths)
    folder = _installed_frost_folder() if frost else None
    if folder is not None:
        from dartlib.data.weather_corruptions import FROST_FILES

        for name in FROST_FILES:
            data = (folder / name).read_bytes()
            blobs.append(data)
            index["frost"].append({"name": name, "length": len(data), "offset": offset})
            offset += len(data)
    return index, blobs


def pack_image_folder(root: Path | str, out: Path | str, *, preset: int = 6, frost: bool = True) -> dict:
    """Pack ``root/{train,test}/<class>/<image>`` into ``out``; returns the index."""
    out = Path(out)
    index, blobs = collect_image_folder(root, frost=frost)
    head = json.dumps(index).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp, lzma.open(tmp, "wb", preset=preset) as fh:
        fh.write(MAGIC)
        fh.write(len(head).to_bytes(8, "little"))
        fh.write(head)
        for data in blobs:
            fh.write(data)
    return index


def _installed_frost_folder() -> Path | None:
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "frost"
    return folder if folder.is_dir() else None


PACK_REMEDY = "pack it again where the image folder is (python -m dartlib data pack-cifar10 --out FILE) and send it again"


def read_packed(path: Path | str) -> tuple[dict, memoryview]:
    """(index, payload): the decompressed file, its index and the concatenated file bytes. A file
    that is not a whole packed folder (cut short, altered, another file) raises
    :class:`~dartlib.data.files.DamagedFileError` naming it."""
    from dartlib.data.files import DamagedFileError

    path = Path(path)
    try:
        raw = lzma.decompress(path.read_bytes())
    except lzma.LZMAError as err:
        raise DamagedFileError(path, f"not a complete lzma stream ({err})", PACK_REMEDY) from None
    if not raw.startswith(MAGIC):
        raise DamagedFileError(path, f"not a packed image folder (no {MAGIC!r} header)", PACK_REMEDY)
    n = int.from_bytes(raw[len(MAGIC) : len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8
    try:
        index = json.loads(raw[start : start + n])
        sizes = sum(sum(entry["lengths"]) for entry in index["splits"].values())
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as err:
        raise DamagedFileError(path, f"its index is damaged ({type(err).__name__}: {err})", PACK_REMEDY) from None
    payload = memoryview(raw)[start + n :]
    if sizes > len(payload):
        raise DamagedFileError(path, f"its index lists {sizes} bytes of images, the file holds {len(payload)}",
                               PACK_REMEDY)
    return index, payload


def _decode(blobs: list[bytes]) -> np.ndarray:
    from PIL import Image

    out = []
    for data in blobs:
        with Image.open(io.BytesIO(data)) as img:
            out.append(np.asarray(img.convert("RGB"), dtype=np.uint8))
    return np.stack(out)


def decode_split(index: dict, payload: memoryview, split: str, *, pool: Executor | None = None,
                 chunk: int = 2000) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """(images uint8 NHWC, labels int64, classes) of one split; decoded in ``pool`` when given."""
    entry = index["splits"][split]
    lengths = np.asarray(entry["lengths"], dtype=np.int64)
    ends = entry["offset"] + np.cumsum(lengths)
    starts = ends - lengths
    blobs = [bytes(payload[s:e]) for s, e in zip(starts, ends)]
    parts = [blobs[i : i + chunk] for i in range(0, len(blobs), chunk)]
    decoded = list(pool.map(_decode, parts)) if pool is not None else [_decode(p) for p in parts]
    return np.concatenate(decoded), np.asarray(entry["labels"], dtype=np.int64), tuple(entry["classes"])


def install_frost(index: dict, payload: memoryview, folder: Path | str) -> Path | None:
    """Write the packed frost photographs to ``folder/imagecorruptions/frost/`` and make that folder
    importable as ``imagecorruptions`` (where the package is not installed); returns the folder."""
    if _installed_frost_folder() is not None or not index.get("frost"):
        return None
    target = Path(folder) / "imagecorruptions" / "frost"
    target.mkdir(parents=True, exist_ok=True)
    for item in index["frost"]:
        (target / item["name"]).write_bytes(bytes(payload[item["offset"] : item["offset"] + item["length"]]))
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return target


def install_as_image_folder(split_arrays: dict[str, tuple[np.ndarray, np.ndarray, tuple[str, ...]]],
                            root: Path | str) -> Path:
    """Make ``root`` read by :func:`dartlib.data.sources.load` as the image folder the arrays came
    from: empty ``root/<split>`` folders plus the decoded-folder cache the loader reads first
    (under the current data root). Point ``DART_CIFAR10_DIR`` at ``root`` to use it."""
    root = Path(root)
    for split, (images, labels, classes) in split_arrays.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        cache = _cache_path(f"cifar10-{split}-None", root / split)
        cache.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(cache) as tmp:
            np.savez(tmp, images=images, labels=labels, classes=np.array(classes))
        # the folder holds no image files: the cache is the data, recorded by its sha256 (image_folders._cache_problem)
        write_text_atomic(_record_path(cache), _contents_digest(images, labels, tuple(classes)) + "\n")
    return root
