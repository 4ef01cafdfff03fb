"""The ``python -m dartlib`` command line."""

from __future__ import annotations

import argparse
import sys

from dartlib.profiles import DEFAULT_PROFILE, profile_names
from dartlib.registry import UnknownNameError


def _cmd_run(args: argparse.Namespace) -> int:
    from dartlib.runner import format_summary, run_profile

    runs = run_profile(profile=args.profile, notebooks=args.notebooks, keep_going=args.keep_going)
    print(format_summary(runs))
    failed = [r for r in runs if r.status == "failed"]
    for r in failed:
        print(f"FAILED: notebook {r.notebook}, {r.detail}", file=sys.stderr)
        print(f"        executed copy: runs/{args.profile}/{r.notebook}.ipynb", file=sys.stderr)
    return 1 if failed else 0


def _cmd_refresh(args: argparse.Namespace) -> int:
    from dartlib.runner import format_summary, refresh_notebooks

    runs = refresh_notebooks(args.notebooks)
    print(format_summary(runs))
    return 1 if any(r.status == "failed" for r in runs) else 0


def _cmd_profiles(_: argparse.Namespace) -> int:
    from dartlib.profiles import load_profile

    for name in profile_names():
        print(f"{name}: {load_profile(name)}")
    return 0


def _cmd_data_status(_: argparse.Namespace) -> int:
    from dartlib.data.sources import status

    for row in status():
        mark = "present" if row["present"] else "ABSENT "
        print(f"{row['dataset']:<13} {mark}  {row['path']}")
        if not row["present"]:
            print(f"{'':<13}          how to get it: {row['how to get it']}")
    return 0


def _cmd_data_download(args: argparse.Namespace) -> int:
    from dartlib.data.download import download

    print(f"{args.dataset}: {download(args.dataset)}")
    return 0


def _cmd_data_prepare(args: argparse.Namespace) -> int:
    from dartlib.data.corruptions import CORRUPTIONS
    from dartlib.data.prepare import prepare_corrupted

    folder = prepare_corrupted(
        args.dataset,
        severities=args.severities,
        corruptions=args.corruptions or CORRUPTIONS,
        seed=args.seed,
    )
    print(f"{args.dataset}: written to {folder}")
    return 0


def _cmd_bench_corruptions(args: argparse.Namespace) -> int:
    from dartlib.data import load
    from dartlib.data.corruption_bench import run_benchmark

    images = load(args.dataset, split="test").images[: args.n]
    table = run_benchmark(images, severity=args.severity)
    print(f"{len(images)} {args.dataset} test images, severity {args.severity}, one run on this machine")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0


def _cmd_bench_models(args: argparse.Namespace) -> int:
    import torch

    from dartlib.bench import model_throughput

    device = "cuda" if torch.cuda.is_available() else "cpu"
    table = model_throughput(args.archs, batch=args.batch, repeats=args.repeats, device=device)
    print(f"batch {args.batch}, {args.repeats} timed repeats after one warm-up, torch threads {torch.get_num_threads()}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.0f}"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dartlib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute the numbered notebooks with papermill")
    run.add_argument("--profile", default=DEFAULT_PROFILE, help="profile name (notebooks/profiles/*.yaml)")
    run.add_argument("notebooks", nargs="*", help="notebook numbers or names (default: all)")
    run.add_argument("--keep-going", action="store_true", help="run later notebooks after a failure")
    run.set_defaults(func=_cmd_run)

    refresh = sub.add_parser("refresh", help="re-execute committed notebooks in place (smoke values)")
    refresh.add_argument("notebooks", nargs="*", help="notebook numbers or names (default: all)")
    refresh.set_defaults(func=_cmd_refresh)

    profiles = sub.add_parser("profiles", help="list the profiles and their parameters")
    profiles.set_defaults(func=_cmd_profiles)

    data = sub.add_parser("data", help="datasets: status and local generation").add_subparsers(dest="data", required=True)
    data.add_parser("status", help="which datasets are present, where, and how to get the others").set_defaults(
        func=_cmd_data_status
    )
    fetch = data.add_parser("download", help="download a dataset with a public source (checksums verified)")
    fetch.add_argument("dataset", choices=["cifar10", "cifar100", "fmnist", "cifar10c", "cifar100c"])
    fetch.set_defaults(func=_cmd_data_download)
    prepare = data.add_parser("prepare", help="generate a corrupted test set in the CIFAR-C layout")
    prepare.add_argument("dataset", choices=["cifar10c", "cifar100c", "fmnistc"])
    prepare.add_argument("--severities", type=int, nargs="+", default=[5], help="default: 5 (the paper's)")
    prepare.add_argument("--corruptions", nargs="+", help="default: all 15")
    prepare.add_argument("--seed", type=int, default=0)
    prepare.set_defaults(func=_cmd_data_prepare)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    corr = bench.add_parser("corruptions", help="our corruption generator vs imagecorruptions, images/second")
    corr.add_argument("--dataset", default="cifar10")
    corr.add_argument("--n", type=int, default=1000)
    corr.add_argument("--severity", type=int, default=5)
    corr.set_defaults(func=_cmd_bench_corruptions)
    models = bench.add_parser("models", help="images/second of each backbone: eval, BN-adapt, training step")
    models.add_argument("--archs", nargs="+", default=["small-cnn", "resnet26-w16", "resnet26"])
    models.add_argument("--batch", type=int, default=200)
    models.add_argument("--repeats", type=int, default=3)
    models.set_defaults(func=_cmd_bench_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UnknownNameError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except FileNotFoundError as err:  # DataMissingError says what is missing and how to get it
        print(f"error: {err}", file=sys.stderr)
        return 3
