"""The device-resident ways of working (what source training, g_phi's intermediate training and the
test-time cells do on a GPU: data resident on the device, augmentation there, grouped BN-adapt
forwards, counts read back once) against the host-side path every CPU run takes. Where torch sees a
GPU they run there, in fp32 without TF32 (so they compare with the CPU's numbers within the stated
tolerances); elsewhere the resident path is forced on the CPU by making
:func:`dartlib.devices.resident` answer yes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from dartlib.dart.refiner import DartConfig
from dartlib.data.dataset import CIFAR10_CLASSES, Dataset


def _toy_train(n_per_class: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset("toy", "train", rng.integers(0, 255, size=(10 * n_per_class, 32, 32, 3), dtype=np.uint8),
                   np.repeat(np.arange(10), n_per_class).astype(np.int64), CIFAR10_CLASSES)


ON_GPU = torch.cuda.is_available()


def _resident_device(monkeypatch) -> str:
    """Where the resident path runs: the GPU (fp32, no TF32) where there is one; else the CPU, with
    every module that asks where data live told "on the device"."""
    import dartlib.dart.intermediate_batches
    import dartlib.dart.refiner_training
    import dartlib.experiments.engine
    import dartlib.models.training

    if ON_GPU:
        monkeypatch.setenv("DART_PRECISION", "fp32")
        monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
        return "cuda"
    for module in (dartlib.dart.intermediate_batches, dartlib.dart.refiner_training, dartlib.experiments.engine,
                   dartlib.models.training):
        monkeypatch.setattr(module, "resident", lambda device: True)
    return "cpu"


def test_grouped_bn_adapt_equals_the_frozen_model_batch_by_batch():
    from dartlib.models.backbones import GroupedBNAdapted, build, frozen_bn_adapted

    torch.manual_seed(0)
    model = build("resnet26-w16", num_classes=10)
    x = torch.rand(3 * 16, 3, 32, 32)
    grouped = GroupedBNAdapted(model)
    frozen = frozen_bn_adapted(model)
    with torch.no_grad():
        reference = torch.cat([frozen(x[i : i + 16]) for i in range(0, 48, 16)])
        features = torch.cat([frozen.features(x[i : i + 16]) for i in range(0, 48, 16)])
    torch.testing.assert_close(grouped(x, group=16), reference, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grouped.features(x, group=16), features, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grouped(x[:16]), reference[:16], rtol=0, atol=0)  # one batch: F.batch_norm itself
    with pytest.raises(ValueError, match="do not split into batches of 16"):
        grouped(x[:20], group=16)


def test_resident_intermediate_training_matches_the_host_path(monkeypatch):
    """Algorithm 1 (DART at two alphas, the additive variant) and Algorithm 3 (DART-split) in one pass,
    16 steps per grouped forward and the losses kept on the device, against one forward per batch."""
    from dartlib.dart import intermediate_batches, refiner_training
    from dartlib.models.backbones import build

    torch.manual_seed(0)
    model = build("small-cnn", num_classes=10)
    train = _toy_train(40, seed=0)
    base = DartConfig(n_dir=5, batch_size=16, hidden=50, epochs=2, seed=0)
    configs = [base, dataclasses.replace(base, alpha=10.0), dataclasses.replace(base, variant="dart-split"),
               dataclasses.replace(base, outputs="additive")]
    reference = refiner_training.train_refiners(model, train, configs, progress=False)
    resident = refiner_training.train_refiners(model, train, configs, device=_resident_device(monkeypatch), progress=False)
    assert intermediate_batches.RESIDENT_CHUNK > 1  # the steps' batches really were grouped
    for (ref, ref_log), (got, got_log) in zip(reference, resident):
        assert got.config == ref.config
        assert [r["step"] for r in got_log] == [r["step"] for r in ref_log] == list(range(1, 2 * 25 + 1))
        assert all(isinstance(r["loss_imb"], float) for r in got_log)  # read back from the device at the end
        np.testing.assert_allclose([r["loss_imb"] for r in got_log], [r["loss_imb"] for r in ref_log], rtol=1e-4, atol=1e-5)
        for name, tensor in ref.module.state_dict().items():
            torch.testing.assert_close(got.module.state_dict()[name], tensor, rtol=1e-3, atol=1e-5)
        if ref.detector is not None:
            for name, tensor in ref.detector.state_dict().items():
                torch.testing.assert_close(got.detector.state_dict()[name], tensor, rtol=1e-3, atol=1e-5)


def _coloured(train: Dataset, noise: float = 60.0) -> Dataset:
    """``train`` with images a class's colour plus noise: a set a small CNN learns in a few steps."""
    rng = np.random.default_rng(0)
    base = (train.labels[:, None, None, None] * [25, 7, 250 - 25]) % 256
    images = np.clip(base + rng.normal(0, noise, size=train.images.shape), 0, 255).astype(np.uint8)
    return Dataset(train.name, train.split, images, train.labels, train.classes)


def _fitted_small_cnn(train: Dataset) -> torch.nn.Module:
    from dartlib.models.backbones import build
    from dartlib.models.training import EpochBatches, sgd_epoch

    torch.manual_seed(0)
    model = build("small-cnn", num_classes=10).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(3):
        gen = torch.Generator().manual_seed(epoch)
        batches = EpochBatches(train.images, torch.from_numpy(train.labels), torch.randperm(len(train), generator=gen),
                               len(train) // 20, 20, "flip", gen)
        sgd_epoch(model, opt, batches, lr_of_step=lambda i: 0.05, device="cpu")
    return model.eval()


def test_resident_cells_equal_the_host_cells(tiny_corrupted, monkeypatch):
    """Every Table 1 adapter with and without DART, one LT stream: the same accuracy with the set on
    the device, and the shared f_theta0_bar memo keyed by the stream serves the DART cells."""
    from dartlib.dart.refiner_training import train_refiner
    from dartlib.experiments import engine
    from dartlib.experiments.grid import Cell

    labels = np.load(tiny_corrupted / "labels.npy")
    test = _coloured(Dataset("toy", "test", np.zeros((len(labels), 32, 32, 3), np.uint8), labels, CIFAR10_CLASSES), 90.0)
    np.save(tiny_corrupted / "gaussian_noise.npy", test.images)
    train = _coloured(_toy_train(20, seed=1))
    model = _fitted_small_cnn(train)
    refiner, _ = train_refiner(model, train, DartConfig(n_dir=5, batch_size=16, hidden=20, epochs=1), progress=False)
    cells = [Cell(dataset="fmnistc", shift="lt", shift_param=10.0, corruption="gaussian_noise", severity=5, method=m,
                  refiner=r) for m in ("bnadapt", "tent", "sar") for r in ("none", "dart")]
    host = engine.TestTimeContext(source=model, refiner=refiner, batch_size=32, device="cpu")
    expected = [engine.evaluate_cell(cell, host) for cell in cells]
    device = engine.TestTimeContext(source=model, refiner=refiner, batch_size=32, device=_resident_device(monkeypatch))
    got = [engine.evaluate_cell(cell, device) for cell in cells]
    assert 20.0 < min(e["accuracy"] for e in expected) and max(e["accuracy"] for e in expected) < 100.0  # informative
    for e, g in zip(expected, got):
        # on a GPU, rounding may flip at most one prediction of the stream
        assert g["n"] == e["n"] and g["accuracy"] == pytest.approx(e["accuracy"], abs=100.0 / e["n"] if ON_GPU else 1e-9)
    assert len(device._resident) == 1  # one test set, copied once
    assert device._shared.hits > 0 and device._shared.key is None
    assert all(k.split("|")[3].startswith("stream ") for k in device._shared._memo)  # keyed by stream, not by bytes
    assert device.inputs(cells[1]) == host.inputs(cells[1])  # fp32 on the device: the rows stay current


def test_bf16_precision_is_an_input_of_the_cells(tiny_corrupted):
    from dartlib.experiments.engine import TestTimeContext
    from dartlib.experiments.grid import Cell
    from dartlib.models.backbones import build

    model = build("small-cnn", num_classes=10).eval()
    cell = Cell(dataset="fmnistc", shift="lt", shift_param=10.0, corruption="gaussian_noise", severity=5,
                method="bnadapt", refiner="none")
    fp32 = TestTimeContext(source=model, refiner=None, device="cpu")
    assert fp32.forward_precision() == "fp32"  # the CPU's
    assert TestTimeContext(source=model, refiner=None, device="cpu", precision="bf16").inputs(cell) != fp32.inputs(cell)
    assert TestTimeContext(source=model, refiner=None, device="cpu", precision="fp32").inputs(cell) == fp32.inputs(cell)


def test_resident_source_training_runs_on_device_data(tmp_path, monkeypatch):
    """An epoch with the training set resident (uint8, augmented per batch there) learns as the host
    path does (different random views, the same distribution), and the checkpoint says how it ran."""
    from dartlib.models import checkpoints, training

    train, test = _toy_train(20, seed=2), _toy_train(5, seed=3)
    for images, labels in ((train.images, train.labels), (test.images, test.labels)):
        images[:] = (labels[:, None, None, None] * 25).astype(np.uint8)  # a learnable colour per class
    monkeypatch.setattr(training, "load", lambda dataset, split, **_: train if split == "train" else test)
    monkeypatch.setitem(training.RECIPES._items, "tiny", training.Recipe(3, 20, 0.05, 0.9, 0.0, True, 0, "crop-flip"))
    path = training.train_source(dataset="toy", arch="small-cnn", recipe="tiny", device=_resident_device(monkeypatch),
                                 progress=False, directory=tmp_path)
    _, meta = checkpoints.load_checkpoint(path)
    assert meta["epochs"] == 3 and len(meta["history"]) == 3
    assert meta["precision"] == "fp32" and meta["images_per_second"] > 0  # the CPU's, or DART_PRECISION's on a GPU
    assert meta["clean_test_accuracy"] > 30.0  # well above chance (10%)


@pytest.mark.parametrize("kind", ["flip", "crop-flip", "rrc-flip"])
def test_resident_augmentation_draws_the_host_views(kind):
    """:func:`augment_resident` on uint8 NHWC images gives views of the kind :func:`augment` gives:
    the same shape and range, each view a flip / crop of its image (checked on a flip-only case exactly)."""
    from dartlib.data.augmentation import augment, augment_resident, images_to_float, to_tensor

    images = torch.from_numpy(np.random.default_rng(0).integers(0, 255, size=(64, 32, 32, 3), dtype=np.uint8))
    got = augment_resident(images, kind=kind, generator=torch.Generator().manual_seed(0))
    host = augment(to_tensor(images.numpy()), kind=kind, generator=torch.Generator().manual_seed(0))
    assert got.shape == host.shape == (64, 3, 32, 32) and got.dtype == torch.float32
    assert 0.0 <= float(got.min()) and float(got.max()) <= 1.0
    plain = images_to_float(images)
    if kind == "flip":  # every view is its image or its mirror image, about half of each
        same = (got == plain).flatten(1).all(1)
        mirrored = (got == plain.flip(3)).flatten(1).all(1)
        assert bool((same | mirrored).all()) and 16 < int(mirrored.sum()) < 48
    if kind == "crop-flip":  # a shifted (zero-padded) copy: the views' mean intensity stays near the image's
        assert float((got.mean((1, 2, 3)) - plain.mean((1, 2, 3))).abs().max()) < 0.15


def test_a_model_without_head_or_features_trains_g_phi_on_either_path(monkeypatch):
    """A user's model (a plain Sequential: no ``head``, no ``features``) trains g_phi on the host path
    and on the resident one, to the same refiner."""
    from dartlib.dart import refiner_training

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
    train, config = _toy_train(20, seed=4), DartConfig(n_dir=5, batch_size=16, hidden=20, epochs=1)
    host, _ = refiner_training.train_refiner(model, train, config, progress=False)
    device, _ = refiner_training.train_refiner(model, train, config, device=_resident_device(monkeypatch), progress=False)
    for name, tensor in host.module.state_dict().items():
        torch.testing.assert_close(device.module.state_dict()[name], tensor, rtol=1e-3, atol=1e-5)


def test_stream_evaluation_runs_on_the_machines_device_and_leaves_the_callers_model(monkeypatch):
    """Notebooks 02, 04 and 05 name no device: their stream evaluations run on the machine's device
    (a GPU where there is one, through a copy of the model) and equal the CPU's logits; the caller's
    model stays where it was, in its BN mode."""
    from dartlib.models.backbones import build, frozen_bn_adapted
    from dartlib.models.evaluation import batch_accuracy, evaluated_on, stream_features, stream_logits

    torch.manual_seed(0)
    frozen = frozen_bn_adapted(build("resnet26-w16", num_classes=10))
    data = _toy_train(12, seed=4)
    order = np.random.default_rng(0).permutation(len(data.labels))
    device = _resident_device(monkeypatch)
    mode = [m.training for m in frozen.modules()]
    on_cpu = stream_logits(frozen, data.images, order, batch_size=40, device="cpu")
    here = stream_logits(frozen, data.images, order, batch_size=40)
    assert [t.device.type for t in here] == ["cpu"] * 3  # the logits come back to the host
    torch.testing.assert_close(torch.cat(here), torch.cat(on_cpu), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(torch.cat(stream_features(frozen, data.images, order, batch_size=40)),
                               torch.cat(stream_features(frozen, data.images, order, batch_size=40, device="cpu")),
                               rtol=1e-4, atol=1e-4)
    assert batch_accuracy(frozen, data.images, data.labels, batch_size=40) == pytest.approx(
        batch_accuracy(frozen, data.images, data.labels, batch_size=40, device="cpu"), abs=100 / 120 + 1e-9)
    assert next(frozen.parameters()).device.type == "cpu" and [m.training for m in frozen.modules()] == mode
    copy, where = evaluated_on(frozen, device)
    assert where == device and (copy is frozen) == (device == "cpu")
