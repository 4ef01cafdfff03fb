"""The standard paths' rates on this machine's device: source training (images/s), g_phi's
intermediate training (steps/s, three refiners sharing one pass) and test time (images/s, BNAdapt
and BNAdapt+DART), each through the functions the notebooks call (``sgd_epoch``,
``train_refiners``, ``evaluate_cell``), on synthetic CIFAR-shaped data.

On a GPU the paths run device-resident (``dartlib.devices``), in bf16 unless DART_PRECISION=fp32,
and the table sets the rates beside those the former GPU-only fast paths gave on one H100
(results/gpu/README.md) and the targets of docs/gpu.md. On the CPU each rate is measured twice in
one run, host-side (what every CPU run does) and forced device-resident, and their ratio is given:
the resident path is for the GPU, and this says what it costs or saves where it is not used.

Usage: ``python benchmarks/device_paths.py [--arch resnet26] [--source-steps 40] [--gphi-steps 200]
[--test-images 10000] [--json FILE]``; small sizes for the CPU: ``--arch resnet26-w16
--source-steps 6 --gphi-steps 30 --test-images 1000``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

# The former fast paths on one H100, ResNet-26 width 64, bf16 (results/gpu/README.md), and the
# targets of docs/gpu.md.
REFERENCE = {"source images/s": (32226, 65000), "g_phi steps/s": (151, 1000),
             "test images/s, BNAdapt": (47747, None), "test images/s, BNAdapt+DART": (32339, 100000)}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def source_rate(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, *, device: str, steps: int,
                resident: bool) -> float:
    """Images per second of :func:`dartlib.models.training.sgd_epoch` (batch 200, rrc-flip: the paper's recipe)."""
    from dartlib.models.training import RECIPES, EpochBatches, sgd_epoch

    rec = RECIPES["paper"]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.from_numpy(images).to(device) if resident else images
    y = torch.from_numpy(labels).to(device if resident else "cpu")
    gen_device = device if resident else "cpu"

    def epoch(n_steps: int) -> None:
        gen = torch.Generator(device=gen_device).manual_seed(0)
        order = torch.randperm(len(labels), generator=gen, device=gen_device)
        batches = EpochBatches(x, y, order, n_steps, rec.batch_size, rec.augmentation, gen)
        sgd_epoch(model.train(), opt, batches, lr_of_step=lambda i: 0.01, device=device, recipe=rec)

    epoch(2)  # warm-up: kernels, allocator
    _sync(device)
    start = time.perf_counter()
    epoch(steps)
    _sync(device)
    return steps * rec.batch_size / (time.perf_counter() - start)


def gphi_rate(model: torch.nn.Module, train, *, device: str, steps: int) -> float:
    """Steps per second of :func:`dartlib.dart.refiner_training.train_refiners`: DART at alpha 0.1 and 30 and
    DART-split in one pass (the paper's intermediate settings, batch 64)."""
    from dartlib.dart.refiner_training import train_refiners
    from dartlib.dart.refiner import DartConfig

    base = DartConfig(n_dir=min(250, len(train) // 200))  # D_int: the whole (class-balanced) set
    configs = [base, dataclasses.replace(base, alpha=30.0), dataclasses.replace(base, variant="dart-split")]
    train_refiners(model, train, configs, device=device, progress=False, max_steps=20)  # warm-up
    _sync(device)
    start = time.perf_counter()
    train_refiners(model, train, configs, device=device, progress=False, max_steps=steps)
    _sync(device)
    return steps / (time.perf_counter() - start)


def test_rates(model: torch.nn.Module, refiner, *, device: str) -> dict[str, float]:
    """Images per second of :func:`dartlib.experiments.engine.evaluate_cell`, BNAdapt and BNAdapt+DART, on
    the synthetic set under ``$DART_DATA_DIR`` (a balanced stream, batch 200)."""
    from dartlib.experiments.engine import TestTimeContext, evaluate_cell
    from dartlib.experiments.grid import Cell

    rates = {}
    for label, ref in (("BNAdapt", "none"), ("BNAdapt+DART", "dart")):
        cell = Cell(dataset="fmnistc", shift="none", shift_param=None, corruption="gaussian_noise", severity=5,
                    method="bnadapt", refiner=ref)
        context = TestTimeContext(source=model, refiner=refiner, device=device, share_source=False)
        evaluate_cell(cell, context)  # warm-up; the test set is then resident on a GPU
        _sync(device)
        start = time.perf_counter()
        n = evaluate_cell(cell, context)["n"]
        _sync(device)
        rates[f"test images/s, {label}"] = n / (time.perf_counter() - start)
    return rates


def _synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, size=(n, 32, 32, 3), dtype=np.uint8), np.repeat(np.arange(10), n // 10).astype(np.int64)


def measure(args: argparse.Namespace, *, device: str, resident: bool) -> dict[str, float]:
    """The three rates with the resident path on or off (by telling the modules where data live)."""
    import dartlib.dart.intermediate as intermediate
    import dartlib.experiments.engine as engine
    from dartlib.dart.refiner_training import train_refiner
    from dartlib.dart.refiner import DartConfig
    from dartlib.data.dataset import CIFAR10_CLASSES, Dataset
    from dartlib.models.backbones import build

    for module in (intermediate, engine):
        module.resident = (lambda d: True) if resident else (lambda d: False)
    torch.manual_seed(0)
    model = build(args.arch, num_classes=10).to(device)
    images, labels = _synthetic(args.train_images, seed=0)
    rates = {"source images/s": source_rate(model, images, labels, device=device, steps=args.source_steps,
                                            resident=resident)}
    model = model.cpu().eval()
    train = Dataset("synthetic", "train", images, labels, CIFAR10_CLASSES)
    rates["g_phi steps/s"] = gphi_rate(model, train, device=device, steps=args.gphi_steps)
    refiner, _ = train_refiner(model, train, DartConfig(n_dir=10), device=device, progress=False,
                               max_steps=5)
    rates.update(test_rates(model, refiner, device=device))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="resnet26")
    parser.add_argument("--train-images", type=int, default=20000)
    parser.add_argument("--source-steps", type=int, default=40)
    parser.add_argument("--gphi-steps", type=int, default=200)
    parser.add_argument("--test-images", type=int, default=10000)
    parser.add_argument("--json", type=Path, help="also write the rates here")
    args = parser.parse_args()
    if args.source_steps * 200 > args.train_images:  # each timed epoch draws its batches without replacement
        parser.error(f"--source-steps {args.source_steps} batches of 200 need at least {args.source_steps * 200} "
                     f"--train-images (given {args.train_images})")

    from dartlib.devices import default_device, precision

    device = default_device()
    with tempfile.TemporaryDirectory() as root:
        os.environ["DART_DATA_DIR"] = root
        folder = Path(root) / "FMNIST-C"
        folder.mkdir()
        images, labels = _synthetic(args.test_images, seed=1)
        np.save(folder / "gaussian_noise.npy", np.concatenate([images] * 5))
        np.save(folder / "labels.npy", np.tile(labels, 5))
        on_gpu = device.startswith("cuda")
        runs = {"resident": measure(args, device=device, resident=True)}
        if not on_gpu:
            runs["host"] = measure(args, device=device, resident=False)
    name = torch.cuda.get_device_name() if on_gpu else "CPU"
    print(f"device {device} ({name}), {args.arch}, precision {precision(device)}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    if on_gpu:
        print("| rate | standard path on this GPU | former fast path, H100 | target |\n| --- | --- | --- | --- |")
        for key, value in runs["resident"].items():
            before, target = REFERENCE[key]
            print(f"| {key} | {value:,.0f} | {before:,} | {f'{target:,}' if target else '-'} |")
    else:
        print("| rate | host path (every CPU run) | resident path forced | resident / host |\n| --- | --- | --- | --- |")
        for key, value in runs["host"].items():
            print(f"| {key} | {value:,.1f} | {runs['resident'][key]:,.1f} | {runs['resident'][key] / value:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "name": name, "arch": args.arch, "rates": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
