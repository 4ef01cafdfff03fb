"""``bench``: the corruption generator, the backbones, DART's cost and the refiners' shared pass,
timed on this machine (docs/cli.md, more commands)."""

from __future__ import annotations

import argparse

from dartlib.cli.common import PROFILE_HELP, names_of, positive_int
from dartlib.profiles import DEFAULT_PROFILE


def _cmd_bench_corruptions(args: argparse.Namespace) -> int:
    from dartlib.data import load
    from dartlib.perf.corruption_speed import run_benchmark

    images = load(args.dataset, split="test").images[: args.n]
    table = run_benchmark(images, severity=args.severity)
    print(f"{len(images)} {args.dataset} test images, severity {args.severity}, one run on this machine")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0


def _cmd_bench_models(args: argparse.Namespace) -> int:
    import torch

    from dartlib.data.protocols import TEST_BATCH_SIZE
    from dartlib.perf.throughput import model_throughput
    from dartlib.devices import default_device

    device = default_device()
    table = model_throughput(args.archs, **({"batch": args.batch} if args.batch else {}), repeats=args.repeats,
                             device=device)
    print(f"batch {args.batch or TEST_BATCH_SIZE}, {args.repeats} timed repeats after one warm-up, torch threads {torch.get_num_threads()}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.0f}"))
    return 0


def _profile_source(profile: str):
    """A profile's parameters, its trained source model (on the default device), the device and
    the profile's intermediate-training settings as a DartConfig."""
    from dartlib.devices import default_device
    from dartlib.experiments.settings import Settings
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.models.checkpoints import checkpoint_path, load_checkpoint

    p = Settings.from_params(load_profile(profile))
    device = default_device()
    ckpt = checkpoint_path(dataset=p.source.dataset, arch=p.source.arch, recipe=p.source.recipe, seed=p.seed)
    if not ckpt.is_file():
        raise FileNotFoundError(f"no source checkpoint at {ckpt}; train it first: python -m dartlib train --profile {profile}")
    model, _ = load_checkpoint(ckpt, device=device, expect={"arch": p.source.arch, "dataset": p.source.dataset})
    config = p.dart_config()
    return p, model, device, config


def _cmd_bench_refiners(args: argparse.Namespace) -> int:
    import torch

    from dartlib.perf.throughput import shared_pass_speedup
    import dataclasses

    from dartlib.data import load

    p, model, device, base = _profile_source(args.profile)
    alphas = p.sensitivity.alpha_values[: args.count] if args.count <= len(p.sensitivity.alpha_values) else range(args.count)
    configs = [dataclasses.replace(base, alpha=float(a)) for a in alphas]
    table = shared_pass_speedup(model, load(p.source.dataset, split="train"), configs=configs, n_steps=args.steps,
                                repeats=args.repeats, device=device)
    print(f"profile {args.profile}: {p.source.arch} on {p.source.dataset}, device {device}, torch threads "
          f"{torch.get_num_threads()}, {args.steps} steps each, best of {args.repeats}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"one pass is {table.attrs['speedup']:.2f}x faster than {len(configs)} separate trainings")
    return 0


def _cmd_bench_dart(args: argparse.Namespace) -> int:
    import torch

    from dartlib.perf.throughput import dart_overhead
    from dartlib.data import load

    p, model, device, config = _profile_source(args.profile)
    train = load(p.source.dataset, split="train")
    test = load(p.source.dataset, split="test")
    table = dart_overhead(model, train, test, config=config, test_batch_size=p.test.batch_size, n_steps=args.steps,
                          stream_size=args.stream, repeats=args.repeats, device=device)
    print(f"profile {args.profile}: {p.source.arch} on {p.source.dataset}, device {device}, torch threads "
          f"{torch.get_num_threads()}, best of {args.repeats}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"intermediate training / BN-adapt forward, images per second: {table.attrs['intermediate_over_forward']:.3f} (target >= 0.8)")
    print(f"BNAdapt+DART / BNAdapt, wall time over the stream: {table.attrs['dart_over_bnadapt_wall']:.3f} (target <= 1.05)")
    return 0


def add_bench(sub) -> None:
    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    corr = bench.add_parser("corruptions", help="our corruption generator vs imagecorruptions, images/second")
    corr.add_argument("--dataset", default="cifar10", help="whose test images are corrupted")
    corr.add_argument("--n", type=positive_int, default=1000, help="images corrupted")
    corr.add_argument("--severity", type=int, default=5, choices=range(1, 6), metavar="{1..5}",
                      help="the corruptions' severity")
    corr.set_defaults(func=_cmd_bench_corruptions)
    models = bench.add_parser("models", help="images/second of each backbone: eval, BN-adapt, training step")
    models.add_argument("--archs", nargs="+", type=names_of("architecture"),
                        default=["small-cnn", "resnet26-w16", "resnet26"], help="the backbones timed")
    models.add_argument("--batch", type=positive_int, help="images per batch (default: the paper's test batch)")
    models.add_argument("--repeats", type=positive_int, default=3, help="timed repeats")
    models.set_defaults(func=_cmd_bench_models)
    dartb = bench.add_parser("dart", help="DART's cost: intermediate training vs BN-adapt forward, BNAdapt+DART vs BNAdapt")
    dartb.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    dartb.add_argument("--steps", type=positive_int, default=50, help="intermediate steps timed")
    dartb.add_argument("--stream", type=positive_int, default=4000, help="test images in the timed stream")
    dartb.add_argument("--repeats", type=positive_int, default=3, help="timed repeats")
    dartb.set_defaults(func=_cmd_bench_dart)

    refb = bench.add_parser("refiners", help="refiners sharing their intermediate batches: separate trainings vs one pass")
    refb.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    refb.add_argument("--count", type=positive_int, default=5, help="refiners (the profile's alpha table values)")
    refb.add_argument("--steps", type=positive_int, default=20, help="intermediate steps per refiner")
    refb.add_argument("--repeats", type=positive_int, default=2, help="timed repeats")
    refb.set_defaults(func=_cmd_bench_refiners)
