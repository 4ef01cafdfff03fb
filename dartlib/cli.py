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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UnknownNameError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
