"""The gpu profile's one-command run (dartlib.experiments.gpu_run) at its tiny size on the CPU, and the fast paths
it uses (dartlib.experiments.gpu_fast, dartlib.data.packed) against the CPU path they stand in for."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart.refiner import DartConfig
from dartlib.data.sources import CIFAR10_CLASSES, Dataset, read_image_folder
from dartlib.paths import REPO_ROOT

RESULT_COLUMNS = ["experiment", "dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner", "seed",
                  "n", "accuracy"]


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


def test_grouped_bn_adapt_equals_the_frozen_model_batch_by_batch():
    from dartlib.experiments.gpu_fast import GroupedBNAdapt
    from dartlib.models.backbones import build, frozen_bn_adapted

    torch.manual_seed(0)
    model = build("resnet26-w16", num_classes=10)
    x = torch.rand(3 * 16, 3, 32, 32)
    grouped = GroupedBNAdapt(model)(x, group=16)
    frozen = frozen_bn_adapted(model)
    with torch.no_grad():
        reference = torch.cat([frozen(x[i : i + 16]) for i in range(0, 48, 16)])
    torch.testing.assert_close(grouped, reference, rtol=1e-4, atol=1e-4)


def test_fast_intermediate_training_matches_the_cpu_path():
    from dartlib.experiments.gpu_fast import train_refiners_fast
    from dartlib.dart.intermediate import train_refiners
    from dartlib.models.backbones import build

    torch.manual_seed(0)
    model = build("small-cnn", num_classes=10)
    rng = np.random.default_rng(0)
    train = Dataset("toy", "train", rng.integers(0, 255, size=(400, 32, 32, 3), dtype=np.uint8),
                    np.repeat(np.arange(10), 40).astype(np.int64), CIFAR10_CLASSES)
    base = DartConfig(n_dir=5, batch_size=16, hidden=50, epochs=2, seed=0)
    configs = [base, dataclasses.replace(base, alpha=10.0), dataclasses.replace(base, variant="dart-split")]
    reference = train_refiners(model, train, configs, progress=False)
    fast, timing = train_refiners_fast(model, train, configs, device="cpu", precision="fp32", chunk_steps=7)
    assert timing["steps"] == 2 * (400 // 16)
    for (ref, ref_log), (got, got_log) in zip(reference, fast):
        assert got.config == ref.config
        assert [r["step"] for r in got_log] == [r["step"] for r in ref_log]
        np.testing.assert_allclose([r["loss_imb"] for r in got_log], [r["loss_imb"] for r in ref_log], rtol=1e-4, atol=1e-5)
        for name, tensor in ref.module.state_dict().items():
            torch.testing.assert_close(got.module.state_dict()[name], tensor, rtol=1e-3, atol=1e-5)
        if ref.detector is not None:
            for name, tensor in ref.detector.state_dict().items():
                torch.testing.assert_close(got.detector.state_dict()[name], tensor, rtol=1e-3, atol=1e-5)


def test_fast_cells_equal_the_cpu_cells(tiny_corrupted):
    from dartlib.experiments.grid import Cell
    from dartlib.experiments.gpu_fast import DeviceTestSets, evaluate_cell_fast, fast_context
    from dartlib.dart.intermediate import train_refiner
    from dartlib.models.backbones import build
    from dartlib.experiments.engine import TestTimeContext, evaluate_cell

    torch.manual_seed(0)
    model = build("small-cnn", num_classes=10).eval()
    rng = np.random.default_rng(1)
    train = Dataset("toy", "train", rng.integers(0, 255, size=(200, 32, 32, 3), dtype=np.uint8),
                    np.repeat(np.arange(10), 20).astype(np.int64), CIFAR10_CLASSES)
    refiner, _ = train_refiner(model, train, DartConfig(n_dir=5, batch_size=16, hidden=20, epochs=1), progress=False)
    slow = TestTimeContext(source=model, refiner=refiner, batch_size=32)
    fast = fast_context(model, refiner, device="cpu", precision="fp32", batch_size=32)
    sets = DeviceTestSets("cpu")
    for method in ("bnadapt", "tent", "sar"):
        for ref in ("none", "dart"):
            cell = Cell(dataset="fmnistc", shift="lt", shift_param=10.0, corruption="gaussian_noise", severity=5,
                        method=method, refiner=ref)
            assert evaluate_cell_fast(cell, fast, sets) == pytest.approx(evaluate_cell(cell, slow), abs=1e-9)
    assert fast._shared.hits > 0  # TENT+DART and SAR+DART read the same batches' memo


def test_gpu_run_tiny_end_to_end(packed_folder, tmp_path):
    _, path = packed_folder
    out, work = tmp_path / "out", tmp_path / "work"
    cmd = [sys.executable, "-m", "dartlib", "gpu-run", "--tiny", "--packed", str(path), "--out", str(out),
           "--work", str(work), "--workers", "2"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT), "DART_DEVICE": "cpu"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = sorted(f.name for f in out.iterdir())
    assert files == ["accuracy_vs_rho.csv", "alpha_validation.csv", "log.txt", "online_imbalance.csv", "refiners.pt",
                     "run.json", "table1.csv"]
    assert all(f.is_file() for f in out.iterdir())
    info = json.loads((out / "run.json").read_text())
    assert info["tiny"] and info["torch_version"] == torch.__version__
    assert {"data", "source", "gphi", "table1", "online_imbalance", "figure3"} <= set(info["stage_seconds"])
    for key in ("source_images_per_second", "gphi_steps_per_second", "test_time_images_per_second"):
        assert info["throughput"][key] > 0
    chosen = info["gphi"]["chosen_alpha"]
    n_alpha = 1 if chosen == 0.1 else 2
    table1 = pd.read_csv(out / "table1.csv")
    assert set(RESULT_COLUMNS) <= set(table1.columns)
    # 2 corruptions x 3 rho: NoAdapt, and BNAdapt / TENT / PL / SAR without and with DART (at each alpha)
    assert len(table1) == 2 * 3 * (1 + 4 + 4 * n_alpha)
    dart = table1[table1.refiner == "dart"]
    assert dart.params.str.contains("alpha=").all()
    assert table1.accuracy.between(0, 100).all()
    online = pd.read_csv(out / "online_imbalance.csv")
    assert len(online) == 2 * 4 * 4 and set(online.refiner) == {"none", "dart", "dart-split"}
    assert online.accuracy.between(0, 100).all()
    curve = pd.read_csv(out / "accuracy_vs_rho.csv")
    assert set(RESULT_COLUMNS) <= set(curve.columns)
    assert len(curve) == 2 * 7 * (2 + n_alpha) and curve.accuracy.between(0, 100).all()
    alpha = pd.read_csv(out / "alpha_validation.csv")
    assert set(alpha.corruption) == {"clean", "speckle_noise", "gaussian_blur", "saturate"}
    assert len(alpha) == 5 * 4 * 3
    generated = work / "CIFAR-10-C"
    assert sorted(p.name for p in generated.glob("*.npy")) == ["defocus_blur.npy", "gaussian_noise.npy", "labels.npy"]


def test_gpu_run_imports_without_papermill():
    code = ("import sys; sys.modules['papermill'] = None; sys.modules['nbformat'] = None; "
            "sys.modules['torchvision'] = None; sys.modules['sklearn'] = None; sys.modules['seaborn'] = None; "
            "import dartlib.cli, dartlib.experiments.gpu_run, dartlib.experiments.gpu_fast, dartlib.data.packed, dartlib.experiments.engine, dartlib.experiments.online, "
            "dartlib.experiments.validation, dartlib.models.training, dartlib.experiments.grid, dartlib.profiles, dartlib.devices; "
            "dartlib.cli.build_parser().parse_args(['gpu-run', '--out', 'x', '--tiny'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr


def test_packed_frost_photographs_serve_the_frost_corruption_without_the_package(packed_folder, tmp_path):
    """Where imagecorruptions-imaug is not installed (the GPU machine), the frost photographs
    unpacked from the packed file give the frost corruption the installed package gives."""
    _, path = packed_folder
    code = f"""
import sys
import numpy as np
from PIL import Image
import scipy.ndimage, scipy.special
from dartlib.data import corruptions, packed
images = np.random.default_rng(0).integers(0, 255, size=(4, 32, 32, 3), dtype=np.uint8)
reference = corruptions.corrupt(images, corruption="frost", severity=5, seed=0)
corruptions._frost_layers.cache_clear()
sys.path[:] = [p for p in sys.path if "site-packages" not in p]
assert packed._installed_frost_folder() is None
index, payload = packed.read_packed({str(path)!r})
assert packed.install_frost(index, payload, {str(tmp_path / "site")!r}) is not None
assert str(corruptions._frost_folder()).startswith({str(tmp_path)!r})
np.testing.assert_array_equal(corruptions.corrupt(images, corruption="frost", severity=5, seed=0), reference)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr


def test_gpu_run_backbone_study_tiny_end_to_end(packed_folder, tmp_path):
    """``--study backbone`` at its tiny size: the width-8 model and its g_phi trained, the committed
    width-16 model used as committed, every study cell stored, the two paths timed and agreeing."""
    _, path = packed_folder
    out, work = tmp_path / "out", tmp_path / "work"
    cmd = [sys.executable, "-m", "dartlib", "gpu-run", "--study", "backbone", "--tiny", "--packed", str(path),
           "--out", str(out), "--work", str(work), "--workers", "2"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT), "DART_DEVICE": "cpu"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = sorted(f.name for f in out.iterdir())
    assert files[:2] == ["alpha_validation_w8.csv", "backbone_study.csv"]
    assert "cifar10-resnet26-w8-cpu-seed0.pt" in files and any(f.startswith("cifar10-resnet26-w8-cpu-seed0.dart-")
                                                                for f in files)
    study = pd.read_csv(out / "backbone_study.csv")
    # points (w8, s5), (w16, s5), (w16, s4) x 2 corruptions x (3 rho = 1 cells + 4 IR cells)
    assert len(study) == 3 * 2 * 7 and study.accuracy.between(0, 100).all()
    assert set(study.params.str.extract(r"arch=([\w-]+)")[0]) == {"resnet26-w8", "resnet26-w16"}
    comparison = json.loads((out / "path_comparison.json").read_text())
    assert all(r["accuracy_standard"] == r["accuracy_fast"] for r in comparison["test_time"])
    assert comparison["source_epoch"]["standard_seconds"] > 0
    manifest = json.loads((work / "CIFAR-10-C" / "manifest.json").read_text())
    assert manifest["severities"] == [4, 5]


def test_gpu_run_grids_tiny_checks_the_plumbing_and_writes_no_rows(packed_folder, tmp_path):
    """``--study grids`` at its tiny size: CIFAR-10-C generated, the committed models copied, the
    named grids' status printed, the results files returned; the profile's rows are not touched."""
    _, path = packed_folder
    out, work = tmp_path / "out", tmp_path / "work"
    committed = (REPO_ROOT / "results" / "cpu" / "table1.csv").read_bytes()
    cmd = [sys.executable, "-m", "dartlib", "gpu-run", "--study", "grids", "--tiny", "--grids", "table1:note",
           "--packed", str(path), "--out", str(out), "--work", str(work), "--workers", "2"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT), "DART_DEVICE": "cpu"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "note   none" in done.stdout and "of 90 cells" in done.stdout
    assert sorted(f.name for f in out.iterdir()) == ["log.txt", "run.json", "table1.csv"]
    assert (out / "table1.csv").read_bytes() == committed == (REPO_ROOT / "results" / "cpu" / "table1.csv").read_bytes()
    assert len(list((work / "CIFAR-10-C").glob("*.npy"))) == 16  # 15 corruptions + labels
