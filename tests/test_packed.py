"""The packed CIFAR-10 a GPU machine receives (dartlib.data.packed): it decodes to the image folder's pixels, and
its frost photographs serve the frost corruption where imagecorruptions is not installed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dartlib.data.dataset import CIFAR10_CLASSES
from dartlib.data.image_folders import read_image_folder
from dartlib.paths import REPO_ROOT


def _write_folder(root, *, train_per_class=50, test_per_class=30, seed=0):
    """A CIFAR-10-shaped image folder (JPEG files under <split>/<class>/), smooth random images."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split, per in (("train", train_per_class), ("test", test_per_class)):
        for c, name in enumerate(CIFAR10_CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(per):
                base = np.zeros((32, 32, 3)) + rng.uniform(0, 255, size=3)  # a class-dependent colour + noise
                base[..., c % 3] = 25 * c
                img = np.clip(base + rng.normal(0, 30, size=(32, 32, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(img).save(folder / f"{i:05d}.jpg", quality=90)
    return root


@pytest.fixture(scope="module")
def packed_folder(tmp_path_factory):
    from dartlib.data.packed import pack_image_folder

    root = _write_folder(tmp_path_factory.mktemp("cifar10"))
    path = root.parent / "cifar10.xz"
    pack_image_folder(root, path)
    return root, path


def test_packed_file_decodes_to_the_image_folder_pixels(packed_folder):
    from dartlib.data.packed import decode_split, read_packed

    root, path = packed_folder
    index, payload = read_packed(path)
    for split in ("train", "test"):
        images, labels, classes = decode_split(index, payload, split, chunk=37)
        ref_images, ref_labels, ref_classes = read_image_folder(root / split)
        assert classes == ref_classes
        np.testing.assert_array_equal(labels, ref_labels)
        np.testing.assert_array_equal(images, ref_images)


def test_packed_frost_photographs_serve_the_frost_corruption_without_the_package(packed_folder, tmp_path):
    """Where imagecorruptions-imaug is not installed (the GPU machine), the frost photographs
    unpacked from the packed file give the frost corruption the installed package gives."""
    _, path = packed_folder
    code = f"""
import sys
import numpy as np
from PIL import Image
import scipy.ndimage, scipy.special
from dartlib.data import corruptions, packed, weather_corruptions
images = np.random.default_rng(0).integers(0, 255, size=(4, 32, 32, 3), dtype=np.uint8)
reference = corruptions.corrupt(images, corruption="frost", severity=5, seed=0)
weather_corruptions._frost_layers.cache_clear()
sys.path[:] = [p for p in sys.path if "site-packages" not in p]
assert packed._installed_frost_folder() is None
index, payload = packed.read_packed({str(path)!r})
assert packed.install_frost(index, payload, {str(tmp_path / "site")!r}) is not None
assert str(weather_corruptions._frost_folder()).startswith({str(tmp_path)!r})
np.testing.assert_array_equal(corruptions.corrupt(images, corruption="frost", severity=5, seed=0), reference)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
