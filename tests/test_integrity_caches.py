"""A cache or a generated set is checked against the key or digest stored with it when read (issue 62,
item 1): a generated corrupted set's file against the sha256 recorded when it was written (refused and
set aside), a stored test-stream protocol against its key and digest (discarded and drawn again).
Real formats: a generated FMNIST-C set from a tiny Fashion-MNIST in its gzip IDX layout."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from dartlib.data import protocols
from dartlib.data.files import CacheDiscardedWarning, DamagedFileError
from dartlib.data.prepare import prepare_corrupted
from dartlib.data.sources import load
from dartlib.data.corrupted_sets import UncheckedDataWarning


def _write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture()
def generated(tmp_path, monkeypatch):
    """FMNIST-C (contrast, severity 5) generated from 6 images under a temporary data root."""
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DART_FMNISTC_DIR", raising=False)
    folder = tmp_path / "fm"
    folder.mkdir()
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", np.random.default_rng(1).integers(0, 256, (6, 28, 28)))
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.arange(6) % 3)
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    return prepare_corrupted("fmnistc", severities=[5], corruptions=["contrast"], seed=0, workers=1)


def test_a_generated_file_altered_since_is_refused_and_generated_again(generated):
    first = load("fmnistc", corruption="contrast", severity=5)
    assert (generated / "contrast.npy.sha256").is_file() and (generated / "labels.npy.sha256").is_file()
    images = np.load(generated / "contrast.npy")
    images[0, 0, 0, 0] ^= 0xFF  # one byte of one image, the file still a valid .npy of the right shape
    np.save(generated / "contrast.npy", images)
    with pytest.raises(DamagedFileError, match=r"contrast\.npy is damaged: its sha256 differs from the one "
                                               r"contrast\.npy\.sha256 recorded .*; set aside as contrast\.npy\.refused-"):
        load("fmnistc", corruption="contrast", severity=5)
    assert not (generated / "contrast.npy").exists() and len(list(generated.glob("contrast.npy.refused-*"))) == 1
    prepare_corrupted("fmnistc", severities=[5], corruptions=["contrast"], seed=0, workers=1)  # the remedy
    np.testing.assert_array_equal(load("fmnistc", corruption="contrast", severity=5).images, first.images)


def test_generated_labels_altered_since_are_refused(generated):
    labels = np.load(generated / "labels.npy")
    np.save(generated / "labels.npy", (labels + 1) % 3)
    with pytest.raises(DamagedFileError, match=r"labels\.npy is damaged: its sha256 differs"):
        load("fmnistc", corruption="contrast", severity=5)


LABELS = np.repeat(np.arange(10), 30)


def test_a_stored_protocol_that_fails_its_check_is_drawn_again(tmp_path):
    drawn = protocols.cached("lt", LABELS, cache_dir=tmp_path, rho=10, seed=0)
    (path,) = tmp_path.glob("lt-*.npz")
    with np.load(path) as z:
        key, digest = str(z["key"]), str(z["sha256"])
    other = np.arange(len(drawn))
    damages = {"indices not their digest's": dict(indices=other, key=np.array(key), sha256=np.array(digest)),
               "another key": dict(indices=drawn, key=np.array("0" * 16), sha256=np.array(digest))}
    for what, arrays in damages.items():
        np.savez(path, **arrays)
        with pytest.warns(CacheDiscardedWarning, match=rf"{path.name}: .*; discarded, the indices are drawn again"):
            again = protocols.cached("lt", LABELS, cache_dir=tmp_path, rho=10, seed=0)
        assert np.array_equal(again, drawn), what
    path.write_bytes(path.read_bytes()[:40])  # cut short
    with pytest.warns(CacheDiscardedWarning, match="is unreadable"):
        assert np.array_equal(protocols.cached("lt", LABELS, cache_dir=tmp_path, rho=10, seed=0), drawn)


def test_a_generated_file_without_its_record_is_refused_and_generated_again(generated):
    """A set generated before each file's sha256 was recorded cannot be checked: refused, set aside,
    and the documented command generates the file again."""
    (generated / "contrast.npy.sha256").unlink()
    with pytest.raises(DamagedFileError, match=r"contrast\.npy is damaged: it has no contrast\.npy\.sha256 beside it"):
        load("fmnistc", corruption="contrast", severity=5)
    assert not (generated / "contrast.npy").exists()
    prepare_corrupted("fmnistc", severities=[5], corruptions=["contrast"], seed=0, workers=1)
    assert load("fmnistc", corruption="contrast", severity=5).images.shape == (6, 32, 32, 3)


@pytest.fixture()
def official(tmp_path, monkeypatch):
    """Files in the official CIFAR-10-C layout placed by hand: no manifest, no sha256 records."""
    from dartlib.data import corrupted_sets

    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DART_CIFAR10C_DIR", raising=False)
    monkeypatch.setattr(corrupted_sets, "_UNCHECKED_FOLDERS", set())
    folder = tmp_path / "CIFAR-10-C"
    folder.mkdir()
    np.save(folder / "fog.npy", np.random.default_rng(0).integers(0, 256, (10, 32, 32, 3), dtype=np.uint8))
    np.save(folder / "labels.npy", np.arange(10, dtype=np.uint8))
    return folder


def test_official_files_without_records_are_checked_for_their_layout_and_said_unchecked(official):
    with pytest.warns(UncheckedDataWarning, match=r"CIFAR-10-C: CIFAR-C files without sha256 records .*data download"):
        assert load("cifar10c", corruption="fog", severity=5).images.shape == (2, 32, 32, 3)
    np.save(official / "fog.npy", np.zeros((10, 32, 32), np.uint8))  # grey images: not the release's layout
    with pytest.raises(DamagedFileError, match=r"fog\.npy is damaged: uint8 images of shape \(10, 32, 32\)"):
        load("cifar10c", corruption="fog", severity=5)
    np.save(official / "fog.npy", np.zeros((12, 32, 32, 3), np.uint8))
    np.save(official / "labels.npy", np.zeros(12, np.uint8))
    with pytest.raises(DamagedFileError, match="12 rows, not the five severities stacked"):
        load("cifar10c", corruption="fog", severity=5)
