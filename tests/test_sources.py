"""Dataset sources: real on-disk layouts written as tiny fixtures, and missing-data errors."""

from __future__ import annotations

import gzip
import json
import re
import shutil

import numpy as np
import pytest
from PIL import Image

from dartlib.data import dataset, sources
from dartlib.data.prepare import prepare_corrupted
from dartlib.data.files import DamagedFileError
from dartlib.data.sources import load
from dartlib.data.dataset import DataMissingError
from dartlib.paths import SHARED_DIR
from dartlib.registry import UnknownNameError


@pytest.fixture()
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    for var in ("DART_FMNIST_DIR", "DART_CIFAR10_DIR", "DART_CIFAR10C_DIR", "DART_CIFAR101_DIR", "DART_PACS_DIR",
                "DART_IMAGENETC_DIR", "DART_FMNISTC_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sources, "FMNIST_DEBIAN_DIR", tmp_path / "no-debian-package")
    return tmp_path


def _write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_fmnist_idx_files_are_padded_and_replicated(data_root, monkeypatch):
    folder = data_root / "fm"
    folder.mkdir()
    gray = np.random.default_rng(0).integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", gray)
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.array([9, 0, 3, 3, 1]))
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    ds = load("fmnist", split="test")
    assert ds.images.shape == (5, 32, 32, 3) and ds.images.dtype == np.uint8
    assert ds.labels.tolist() == [9, 0, 3, 3, 1] and ds.labels.dtype == np.int64
    np.testing.assert_array_equal(ds.images[:, 2:30, 2:30, 1], gray)
    assert ds.images[:, :2].max() == 0 and ds.images[:, :, 30:].max() == 0
    assert ds.classes[9] == "ankle boot"


def test_cifar_c_official_layout(data_root):
    folder = data_root / "CIFAR-10-C"
    folder.mkdir()
    n = 4  # rows per severity in this fixture (10,000 in the release)
    fog = np.arange(5 * n * 32 * 32 * 3, dtype=np.int64).reshape(5 * n, 32, 32, 3) % 251
    np.save(folder / "fog.npy", fog.astype(np.uint8))
    np.save(folder / "labels.npy", np.tile(np.array([3, 1, 4, 1], dtype=np.uint8), 5))
    ds = load("cifar10c", corruption="fog", severity=5)
    np.testing.assert_array_equal(ds.images, fog[4 * n : 5 * n].astype(np.uint8))
    assert ds.labels.tolist() == [3, 1, 4, 1]
    assert ds.info == {"corruption": "fog", "severity": 5, "source": str(folder)}
    assert ds.classes[0] == "airplane"
    np.testing.assert_array_equal(load("cifar10c", corruption="fog", severity=2).images, fog[n : 2 * n].astype(np.uint8))


def test_generated_layout_round_trip(data_root, monkeypatch):
    folder = data_root / "fm"
    folder.mkdir()
    gray = np.random.default_rng(1).integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", gray)
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.arange(6) % 3)
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    out = prepare_corrupted("fmnistc", severities=[5, 3], corruptions=["contrast", "gaussian_noise"], seed=0)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["severities"] == [3, 5] and manifest["rows_per_severity"] == 6
    assert np.load(out / "contrast.npy").shape == (12, 32, 32, 3)
    five = load("fmnistc", corruption="gaussian_noise", severity=5)
    again = prepare_corrupted("fmnistc", severities=[5, 3], corruptions=["contrast", "gaussian_noise"], seed=0)
    assert again == out  # resumed: nothing rewritten, same data
    np.testing.assert_array_equal(load("fmnistc", corruption="gaussian_noise", severity=5).images, five.images)
    assert five.labels.tolist() == [0, 1, 2, 0, 1, 2]
    # a severity the generated set lacks, or other settings: one line naming the command that makes both
    with pytest.raises(DataMissingError, match=r"severity 1 is not in this file .*prepare fmnistc --severities 1 3 5`$"):
        load("fmnistc", corruption="contrast", severity=1)
    with pytest.raises(FileExistsError, match=r"severities \[3, 5\] where this run asks for \[4\]\): move .*"
                                              r"prepare fmnistc --severities 3 4 5`$") as err:
        prepare_corrupted("fmnistc", severities=[4], corruptions=["contrast"], seed=0)
    assert "\n" not in str(err.value)
    with pytest.raises(FileExistsError, match=r"seed 0 where this run asks for 1\): .*--severities 5`$"):
        prepare_corrupted("fmnistc", severities=[5], corruptions=["contrast"], seed=1)


def test_corrupted_sets_generated_in_processes_equal_the_serial_ones(data_root, monkeypatch, tmp_path):
    """DART_WORKERS processes share the chunks (4 images each here), with the serial run's seeds: the same bytes."""
    from dartlib.data import prepare

    folder = data_root / "fm"
    folder.mkdir()
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", np.random.default_rng(3).integers(0, 256, size=(10, 28, 28), dtype=np.uint8))
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.arange(10) % 5)
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    monkeypatch.setattr(prepare, "CHUNK", 4)
    kinds = ["contrast", "gaussian_noise"]
    serial = prepare_corrupted("fmnistc", severities=[5, 2], corruptions=kinds, folder=tmp_path / "one", workers=1)
    monkeypatch.setenv("DART_WORKERS", "2")
    pooled = prepare_corrupted("fmnistc", severities=[5, 2], corruptions=kinds, folder=tmp_path / "two")
    for name in (*kinds, "labels"):
        assert (serial / f"{name}.npy").read_bytes() == (pooled / f"{name}.npy").read_bytes(), name
    monkeypatch.setenv("DART_WORKERS", "two")
    with pytest.raises(ValueError, match="DART_WORKERS='two'"):
        prepare.corruption_workers()


def test_image_folder_layouts(data_root, monkeypatch):
    rng = np.random.default_rng(2)
    for split in ("train", "test"):
        for cls in ("cat", "airplane"):
            d = data_root / "c10" / split / cls
            d.mkdir(parents=True)
            for i in range(2):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(d / f"{i:04d}.png")
    monkeypatch.setenv("DART_CIFAR10_DIR", str(data_root / "c10"))
    ds = load("cifar10", split="train")
    assert ds.classes == ("airplane", "cat") and ds.labels.tolist() == [0, 0, 1, 1]
    assert load("cifar10", split="train").digest() == ds.digest()  # second load reads the cache

    for domain, size in (("photo", (40, 30)), ("sketch", (25, 50))):
        for cls in ("dog", "horse"):
            d = data_root / "PACS" / domain / cls
            d.mkdir(parents=True)
            Image.fromarray(rng.integers(0, 256, size[::-1] + (3,), dtype=np.uint8)).save(d / "a.jpg")
    pacs = load("pacs", split="sketch", image_size=16)
    assert pacs.images.shape == (2, 16, 16, 3) and pacs.classes == ("dog", "horse")

    inet = data_root / "ImageNet-C" / "fog" / "5"
    for wnid in ("n01440764", "n01443537"):
        (inet / wnid).mkdir(parents=True)
        Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(inet / wnid / "x.JPEG")
    ic = load("imagenet-c", corruption="fog", severity=5, image_size=24)
    assert ic.images.shape == (2, 24, 24, 3) and ic.labels.tolist() == [0, 1]

    c101 = data_root / "CIFAR-10.1"
    c101.mkdir()
    np.save(c101 / "cifar10.1_v6_data.npy", rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8))
    np.save(c101 / "cifar10.1_v6_labels.npy", np.array([1, 2, 3]))
    assert load("cifar10.1").labels.tolist() == [1, 2, 3]
    condensed = data_root / "condensed"
    condensed.mkdir()
    np.savez(condensed / "cifar10_ipc50.npz", images=rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8),
             labels=np.repeat(np.arange(10), 2))
    distilled = load("cifar10-condensed", split="train")
    assert distilled.images.shape == (20, 32, 32, 3) and distilled.num_classes == 10


@pytest.mark.parametrize(
    "name,options,path_part,remedy_part",
    [
        ("fmnist", {}, "t10k-images-idx3-ubyte.gz", "apt-get install dataset-fashion-mnist"),
        ("cifar10", {}, "cifar10/test", "DART_CIFAR10_DIR"),
        ("cifar10c", {"corruption": "fog"}, "CIFAR-10-C/fog.npy", "python -m dartlib data prepare cifar10c"),
        ("cifar100c", {"corruption": "fog"}, "CIFAR-100-C/fog.npy", "Zenodo record 3555552"),
        ("cifar10.1", {}, "CIFAR-10.1/cifar10.1_v6_data.npy", "modestyachts/CIFAR-10.1"),
        ("pacs", {"split": "photo"}, "PACS/photo", "<domain>/<class>/<image>"),
        ("officehome", {"split": "Art"}, "OfficeHome/Art", "OfficeHomeDataset_10072016"),
        ("domainnet126", {"split": "real"}, "DomainNet126/real", "126 classes"),
        ("imagenet-c", {"corruption": "fog"}, "ImageNet-C/fog/5", "Zenodo record 2235448"),
        ("cifar10-condensed", {"split": "train"}, "condensed/cifar10_ipc50.npz", "50 images per class"),
    ],
)
def test_missing_data_errors_name_path_and_remedy(data_root, name, options, path_part, remedy_part):
    with pytest.raises(DataMissingError) as info:
        load(name, **options)
    msg = str(info.value)
    assert f"dataset {name!r} not found" in msg
    assert str(data_root / "no-debian-package" if name == "fmnist" else data_root) in msg
    assert path_part in msg and remedy_part in msg


def test_unknown_names_list_valid_ones(data_root):
    with pytest.raises(UnknownNameError, match="valid names: fmnist, cifar10"):
        load("svhn")
    with pytest.raises(ValueError, match="valid splits: train, test"):
        load("fmnist", split="val")


def test_status_reports_every_dataset(data_root):
    rows = sources.status()
    assert [r["dataset"] for r in rows] == list(sources.SOURCES)
    assert not any(r["present"] for r in rows if r["dataset"] != "fmnist")


CIFAR10_COPY = SHARED_DIR / "data" / "cifar10"


@pytest.mark.skipif(not CIFAR10_COPY.is_dir(), reason=f"the CIFAR-10 image-folder copy is not at {CIFAR10_COPY}")
def test_shared_cifar10_copy_loads_in_standard_order(monkeypatch, tmp_path):
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DART_CIFAR10_DIR", str(CIFAR10_COPY))
    ds = load("cifar10", split="test")
    assert ds.images.shape == (10000, 32, 32, 3)
    assert np.bincount(ds.labels).tolist() == [1000] * 10
    assert ds.classes == dataset.CIFAR10_CLASSES


def test_zenodo_download_verifies_md5_and_unpacks(data_root, tmp_path):
    import hashlib
    import io
    import tarfile

    from dartlib.data import download as dl

    payload = tmp_path / "payload"
    (payload / "CIFAR-10-C").mkdir(parents=True)
    np.save(payload / "CIFAR-10-C" / "fog.npy", np.zeros((10, 32, 32, 3), np.uint8))
    np.save(payload / "CIFAR-10-C" / "labels.npy", np.zeros(10, np.uint8))
    archive = tmp_path / "CIFAR-10-C.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(payload / "CIFAR-10-C", arcname="CIFAR-10-C")
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    api = tmp_path / "api"
    api.mkdir()

    def publish(checksum: str) -> None:
        record = {"files": [{"key": "CIFAR-10-C.tar", "checksum": f"md5:{checksum}",
                             "links": {"self": archive.as_uri()}}]}
        (api / "2535967").write_text(json.dumps(record))

    publish(md5)
    folder = dl.download_corrupted("cifar10c", api=api.as_uri() + "/")
    assert folder == data_root / "CIFAR-10-C"
    assert load("cifar10c", corruption="fog", severity=5).images.shape == (2, 32, 32, 3)
    assert sorted(p.name for p in folder.glob("*.sha256")) == ["fog.npy.sha256", "labels.npy.sha256"]
    fog = np.load(folder / "fog.npy")
    fog[0, 0, 0, 0] = 7  # an unpacked file altered since: its recorded sha256 catches it
    np.save(folder / "fog.npy", fog)
    with pytest.raises(DamagedFileError, match=r"fog\.npy is damaged: its sha256 differs"):
        load("cifar10c", corruption="fog", severity=5)
    shutil.rmtree(folder)

    dl.download_corrupted("cifar10c", api=api.as_uri() + "/")
    with pytest.raises(FileExistsError, match="not empty"):  # never unpacked over a folder
        dl.download_corrupted("cifar10c", api=api.as_uri() + "/")
    shutil.rmtree(folder)
    publish("0" * 32)
    with pytest.raises(dl.ChecksumError, match="differs from"):
        dl.download_corrupted("cifar10c", api=api.as_uri() + "/")
    with pytest.raises(ValueError, match="downloadable: cifar10, cifar100, fmnist, cifar10c, cifar100c"):
        dl.download("pacs")


def test_ensure_corrupted_regenerates_files_of_other_code(data_root, monkeypatch):
    from dartlib.data.prepare import ensure_corrupted, generator_digest

    folder = data_root / "fm"
    folder.mkdir()
    gray = np.random.default_rng(3).integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", gray)
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.arange(4))
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    out = ensure_corrupted("fmnistc")
    fresh = np.load(out / "fog.npy")
    meta = json.loads((out / "manifest.json").read_text())
    assert meta["generator_digest"] == generator_digest()
    np.save(out / "fog.npy", np.zeros_like(fresh))  # a file made by other code ...
    meta["generator_digest"] = "0" * 16
    (out / "manifest.json").write_text(json.dumps(meta))
    ensure_corrupted("fmnistc")  # ... is regenerated, not reused
    np.testing.assert_array_equal(np.load(out / "fog.npy"), fresh)


@pytest.mark.parametrize("fault", ["contents", "consistent-lie", "old-cache-lie", "unreadable"])
def test_a_decoded_folder_cache_that_lies_is_discarded_and_decoded_again(data_root, monkeypatch, fault):
    """The decoded cache of an image folder is checked at each read: the digest stored beside it,
    then a few images decoded again from their files (chosen anew each read: all of them here)."""
    import warnings

    from dartlib.data import image_folders, sources

    rng = np.random.default_rng(3)
    for cls in ("cat", "airplane"):
        d = data_root / "c10" / "train" / cls
        d.mkdir(parents=True)
        for i in range(2):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(d / f"{i:04d}.png")
    monkeypatch.setenv("DART_CIFAR10_DIR", str(data_root / "c10"))
    monkeypatch.setattr(image_folders, "CACHE_SPOT_CHECKS", 4)
    truth = load("cifar10", split="train")
    [cache] = (data_root / "cache").glob("cifar10-train-*.npz")
    record = cache.with_name(cache.name + ".sha256")
    assert record.read_text().strip() == image_folders._contents_digest(truth.images, truth.labels, truth.classes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an intact cache is read without a word
        assert load("cifar10", split="train").digest() == truth.digest()
    if fault == "unreadable":
        cache.write_bytes(cache.read_bytes()[:50])
        match = "is unreadable"
    else:
        images = 255 - truth.images  # every pixel inverted: a readable cache with wrong contents
        np.savez(cache, images=images, labels=truth.labels, classes=np.array(truth.classes))
        if fault == "consistent-lie":
            record.write_text(image_folders._contents_digest(images, truth.labels, truth.classes))
        if fault == "old-cache-lie":
            record.unlink()  # a cache written before digests were kept: the spot check alone
        match = ("has contents that do not match the sha256" if fault == "contents"
                 else r"holds an image \d that differs from its file .*\(spot check\)")
    with pytest.warns(sources.CacheDiscardedWarning, match=rf"{re.escape(str(cache))}: the decoded cache of .*{match}.*"
                                                           "discarded: the images are decoded again"):
        again = load("cifar10", split="train")
    assert again.digest() == truth.digest()
    assert record.read_text().strip() == image_folders._contents_digest(truth.images, truth.labels, truth.classes)
