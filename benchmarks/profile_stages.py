"""What the host does per step in each stage, on the device-resident paths a GPU takes (forced here
on the CPU, as tests/test_device_paths.py does): source training (``sgd_epoch``, batch 200, the
paper's recipe), g_phi's intermediate training (``train_refiners``, DART at two alphas and
DART-split in one pass, batch 64) and a BNAdapt+DART test-time cell (``evaluate_cell``, batch 200).

For each stage, from ``torch.profiler`` on the CPU: the operators per step (every profiled
operator, and the leaves that are not views or allocations: each of those is one kernel launch or
more on a GPU), the host synchronisations per step (``aten::_local_scalar_dense``: a tensor read as
a Python number by ``.item()``, ``float()``, ``int()`` or ``bool()``; ``aten::nonzero``), and the
wall time per step without the profiler, at a width where the arithmetic costs little, i.e. what
the host alone needs per step (Python, the dispatcher, the optimiser's loops).

Usage: ``python benchmarks/profile_stages.py [--width 8] [--steps 2] [--floor-width 2]
[--floor-batch 8] [--floor-steps 16]``. The operator counts depend neither on the width nor on the
batch size; the host time is measured at a small width and batch, where the arithmetic is cheap.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

# Operators that launch no kernel on a GPU: views, metadata and allocations.
NO_KERNEL = {"aten::view", "aten::as_strided", "aten::reshape", "aten::_reshape_alias", "aten::empty",
             "aten::empty_strided", "aten::empty_like", "aten::t", "aten::transpose", "aten::expand", "aten::slice",
             "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::permute", "aten::detach", "aten::alias",
             "aten::resolve_conj", "aten::resolve_neg", "aten::_unsafe_view", "aten::lift_fresh", "aten::numpy_T",
             "aten::result_type", "aten::is_nonzero", "aten::set_", "aten::resize_", "aten::_has_compatible_shallow_copy_type",
             "detach", "aten::split", "aten::narrow", "aten::unbind", "aten::unflatten", "aten::flatten"}
SYNCS = ("aten::_local_scalar_dense", "aten::nonzero")


def _force_resident() -> None:
    import dartlib.dart.intermediate as intermediate
    import dartlib.experiments.engine as engine
    import dartlib.models.training as training

    for module in (intermediate, engine, training):
        module.resident = lambda device: True


def _profiled(run) -> dict:
    """Operator counts of one ``run()`` under the profiler: every operator, the computing ones by
    name, the host syncs by name."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    events = [e for e in prof.events() if e.name.startswith("aten::") or e.name == "detach"]
    computes: dict[int, bool] = {}

    def computing(e) -> bool:  # does e, or an operator it calls, compute (not a view, not an allocation)?
        if id(e) not in computes:
            computes[id(e)] = e.name not in NO_KERNEL or any(computing(c) for c in e.cpu_children
                                                              if c.name.startswith("aten::"))
        return computes[id(e)]

    # the innermost computing operators: each is one kernel launch (or more) on a GPU
    kernels = collections.Counter(e.name for e in events if e.name not in NO_KERNEL and not any(
        computing(c) for c in e.cpu_children if c.name.startswith("aten::")))
    syncs = collections.Counter(e.name for e in events if e.name in SYNCS)
    return {"ops": len(events), "kernels": kernels, "syncs": syncs}


def _counts(a: dict, b: dict, steps: tuple[int, int]) -> dict:
    """Per-step counts (the difference of a run of ``steps[1]`` steps and one of ``steps[0]``, so
    that what a run does once, e.g. copying the model, is not counted) and the counts of what a run
    does once besides its steps; ``a``, ``b``: :func:`_profiled` of the two runs)."""
    n = steps[1] - steps[0]
    kernels = {k: (b["kernels"][k] - a["kernels"][k]) / n for k in b["kernels"]}
    syncs = {k: (b["syncs"][k] - a["syncs"][k]) / n for k in b["syncs"]}
    return {"ops": (b["ops"] - a["ops"]) / n, "kernels": sum(kernels.values()),
            "syncs": {k: v for k, v in syncs.items() if v}, "once": {
                "ops": a["ops"] - steps[0] * (b["ops"] - a["ops"]) / n,
                "syncs": {k: v - steps[0] * syncs[k] for k, v in a["syncs"].items()}},
            "top": sorted(((k, v) for k, v in kernels.items() if v), key=lambda kv: -kv[1])}


def _timed(run, steps: int) -> float:
    """Milliseconds a step of ``run()`` (``steps`` steps), the best of three after a warm-up."""
    run()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best / steps * 1e3


def _model(width: int) -> torch.nn.Module:
    from dartlib.models.backbones import resnet26

    torch.manual_seed(0)
    return resnet26(10, width=width)


def source_stage(width: int, batch: int, steps: int) -> tuple:
    from dartlib.models.training import RECIPES, EpochBatches, _optimizer, sgd_epoch

    rec = dataclasses.replace(RECIPES["paper"], batch_size=batch)
    model = _model(width).train().to(memory_format=torch.channels_last)
    opt = _optimizer(model, rec)
    rng = np.random.default_rng(0)
    n = -(-steps * rec.batch_size // 10) * 10  # whole classes, every step a full batch
    images = torch.from_numpy(rng.integers(0, 255, size=(n, 32, 32, 3), dtype=np.uint8))
    labels = torch.from_numpy(np.repeat(np.arange(10), n // 10))

    def run() -> None:
        gen = torch.Generator().manual_seed(0)
        batches = EpochBatches(images, labels, torch.randperm(len(labels), generator=gen), steps, rec.batch_size,
                               rec.augmentation, gen)
        sgd_epoch(model, opt, batches, lr_of_step=lambda i: 0.01, device="cpu", recipe=rec)

    params = sum(1 for _ in model.parameters())
    return run, f"{params} parameter tensors, SGD (per tensor on the CPU, foreach on a GPU)", steps


def gphi_stage(width: int, batch: int, steps: int) -> tuple:
    from dartlib.dart.intermediate_batches import RESIDENT_CHUNK
    from dartlib.dart.refiner_training import train_refiners
    from dartlib.dart.refiner import DartConfig
    from dartlib.data.dataset import CIFAR10_CLASSES, Dataset

    model = _model(width).eval()
    rng = np.random.default_rng(0)
    train = Dataset("synthetic", "train", rng.integers(0, 255, size=(2000, 32, 32, 3), dtype=np.uint8),
                    np.repeat(np.arange(10), 200).astype(np.int64), CIFAR10_CLASSES)
    base = DartConfig(n_dir=10, batch_size=batch)
    configs = [base, dataclasses.replace(base, alpha=30.0), dataclasses.replace(base, variant="dart-split")]
    steps = -(-steps // RESIDENT_CHUNK) * RESIDENT_CHUNK  # whole grouped forwards

    def run() -> None:
        train_refiners(model, train, configs, device="cpu", progress=False, max_steps=steps)

    return run, f"3 refiners in one pass, {RESIDENT_CHUNK} steps per grouped forward", steps


def test_stage(width: int, batch: int, steps: int) -> tuple:
    from dartlib.dart.refiner_training import train_refiner
    from dartlib.dart.refiner import DartConfig
    from dartlib.data.dataset import CIFAR10_CLASSES, Dataset
    from dartlib.experiments.engine import TestTimeContext, evaluate_cell
    from dartlib.experiments.grid import Cell

    model = _model(width).eval()
    rng = np.random.default_rng(1)
    n = -(-steps * batch // 10) * 10  # whole classes
    images = rng.integers(0, 255, size=(n, 32, 32, 3), dtype=np.uint8)
    labels = np.repeat(np.arange(10), n // 10).astype(np.int64)
    train = Dataset("s", "train", rng.integers(0, 255, size=(1000, 32, 32, 3), dtype=np.uint8),
                    np.repeat(np.arange(10), 100).astype(np.int64), CIFAR10_CLASSES)
    folder = Path(os.environ["DART_DATA_DIR"]) / "FMNIST-C"
    folder.mkdir(exist_ok=True)
    np.save(folder / "gaussian_noise.npy", np.concatenate([images] * 5))
    np.save(folder / "labels.npy", np.tile(labels, 5))
    from dartlib.experiments import cell_streams

    cell_streams._corrupted_at.cache_clear()  # the test set just written, not one read before
    cell_streams._set_digest_at.cache_clear()
    refiner, _ = train_refiner(model, train, DartConfig(n_dir=10), progress=False, max_steps=2)
    cell = Cell(dataset="fmnistc", shift="none", shift_param=None, corruption="gaussian_noise", severity=5,
                method="bnadapt", refiner="dart")
    context = TestTimeContext(source=model, refiner=refiner, device="cpu", batch_size=batch)  # memo shared, as in a grid

    def run() -> None:
        context._shared = None  # a fresh memo: each batch's forward is paid, as in a grid's first DART cell
        evaluate_cell(cell, context)

    return run, "BNAdapt+DART, f_theta0_bar shared (memo emptied before each run)", -(-n // batch)


# (what, how it is built, its batch, its steps per --steps)
STAGES = {"source": ("source training step", source_stage, 200, 1), "g_phi": ("g_phi step", gphi_stage, 64, 8),
          "test": ("BNAdapt+DART test batch", test_stage, 200, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=8, help="ResNet-26's width for the operator counts")
    parser.add_argument("--steps", type=int, default=2, help="steps of the short profiled run (g_phi: 8 times as many)")
    parser.add_argument("--floor-width", type=int, default=2, help="width of the host-time run (little arithmetic)")
    parser.add_argument("--floor-batch", type=int, default=8, help="batch of the host-time run")
    parser.add_argument("--floor-steps", type=int, default=16)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--stages", default="source,g_phi,test", help="which stages, comma-separated")
    args = parser.parse_args()
    _force_resident()
    print(f"ResNet-26 width {args.width} (counts), width {args.floor_width} batch {args.floor_batch} (host time); "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, resident paths forced on the CPU")
    with tempfile.TemporaryDirectory() as root:
        os.environ["DART_DATA_DIR"] = root
        for name, stage, batch, per in (STAGES[k] for k in args.stages.split(",")):
            short, note, s1 = stage(args.width, batch, per * args.steps)
            a = _profiled(short)  # before the next build replaces the test set
            long, _, s2 = stage(args.width, batch, 2 * per * args.steps)
            c = _counts(a, _profiled(long), (s1, s2))
            floor_run, _, floor_steps = stage(args.floor_width, args.floor_batch, args.floor_steps)
            ms = _timed(floor_run, floor_steps)
            syncs = ", ".join(f"{k} {v:g}" for k, v in c["syncs"].items()) or "none"
            once = ", ".join(f"{k} {v:g}" for k, v in c["once"]["syncs"].items() if v) or "none"
            print(f"\n## {name} (batch {batch}): {note}\n{c['ops']:.0f} operators a step, {c['kernels']:.0f} of "
                  f"them computing (a kernel or more each on a GPU); host syncs a step: {syncs}; host time "
                  f"{ms:.2f} ms a step ({ms * 1e3 / c['ops']:.1f} us an operator); once a run besides the steps: "
                  f"{c['once']['ops']:.0f} operators, syncs: {once}")
            print("  " + ", ".join(f"{k.removeprefix('aten::')} {v:g}" for k, v in c["top"][: args.top]))


if __name__ == "__main__":
    main()
