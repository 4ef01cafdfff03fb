"""``run``, ``refresh``, ``profiles`` and ``lab``: the notebooks executed, refreshed, parametrised
and opened (docs/cli.md, the runner)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dartlib.cli.common import (EXIT_DAMAGED, PROFILE_HELP, data_folders, non_negative_float, positive_int, repo_folder,
                                writable)
from dartlib.profiles import DEFAULT_PROFILE, profile_names

# the suite's damaged-file errors by the class name a notebook's kernel reports
DAMAGED_ERRORS = ("DamagedFileError", "CheckpointMismatchError")


def _cmd_run(args: argparse.Namespace) -> int:
    from dartlib.runner import check_override_output, format_summary, parse_override, read_overrides, run_profile
    from dartlib.schema import checked_profile

    checked_profile(args.profile)
    if args.publish:
        from dartlib.runner import published_dir

        published_dir(args.profile)  # refused before anything is written where a profile keeps none
    overrides = {}
    if args.overrides:
        overrides.update(read_overrides(args.overrides))
    overrides.update(parse_override(text) for text in args.set or [])
    check_override_output(profile=args.profile, overrides=overrides, output=args.output)  # before any write
    if args.output is None:
        writable(repo_folder("runs", args.profile), repo_folder("results", args.profile),
                 repo_folder("figures", args.profile), *data_folders(),
                 *([repo_folder("results", args.profile, "notebooks")] if args.publish else []))
    else:
        out = Path(args.output).expanduser().resolve()
        writable(*[(out / kind / args.profile, "give another --output folder") for kind in ("runs", "results", "figures")],
                 *data_folders())
    runs = run_profile(profile=args.profile, notebooks=args.notebooks, keep_going=args.keep_going,
                       publish_runs=args.publish, overrides=overrides, output=args.output, budget=args.budget)
    print(format_summary(runs))
    where = f"{args.output}/runs" if args.output else "runs"
    failed = [r for r in runs if r.status == "failed"]
    for r in failed:
        print(f"FAILED: notebook {r.notebook}, {r.detail}", file=sys.stderr)
        print(f"        executed copy: {where}/{args.profile}/{r.notebook}.ipynb", file=sys.stderr)
    stopped = [r for r in runs if r.status == "stopped"]
    if stopped and not failed:
        print(f"STOPPED by the time guard (--budget {args.budget:g}) in notebook {stopped[0].notebook}; finished grid "
              "rows are kept: run the same command again to resume", file=sys.stderr)
        return 3
    if failed and all(r.error in DAMAGED_ERRORS for r in failed):  # a refused file, as the grid command says
        return EXIT_DAMAGED
    return 1 if failed else 0



def _cmd_refresh(args: argparse.Namespace) -> int:
    from dartlib.runner import format_summary, refresh_notebooks

    runs = refresh_notebooks(args.notebooks)
    print(format_summary(runs))
    for r in runs:
        if r.status == "failed":  # the committed copy is left as it was
            print(f"FAILED: notebook {r.notebook} (left as committed): {(str(r.detail).splitlines() or [''])[0]}",
                  file=sys.stderr)
    return 1 if any(r.status == "failed" for r in runs) else 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.schema import sync_parameters_cells

    if args.sync_notebooks:
        load_profile("smoke")
        changed = sync_parameters_cells(write=True)
        print("\n".join(changed) if changed else "every parameters cell already holds the smoke values")
        return 0
    for name in profile_names():
        print(f"{name}: {load_profile(name)}")
    return 0


def _cmd_lab(args: argparse.Namespace) -> int:
    import os

    from dartlib.runner import lab_command

    if args.token == "" and not args.insecure_no_token:
        print("error: --token \"\" turns JupyterLab's authentication off: anyone who can reach the port (any user "
              "of this machine) can run code as you; give a token, or leave --token out for a random one, or add "
              "--insecure-no-token if that is really meant", file=sys.stderr)
        return 2
    if args.token == "":
        print("WARNING: --insecure-no-token: JupyterLab runs WITHOUT authentication; anyone who can reach its port "
              "can run code as you", file=sys.stderr)
    command = lab_command(port=args.port, token=args.token, open_browser=not args.no_browser)
    os.execv(command[0], command)
    return 0  # not reached: the process becomes JupyterLab


def add_run(sub) -> None:
    run = sub.add_parser("run", help="execute the numbered notebooks with papermill")
    run.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    run.add_argument("notebooks", nargs="*", help="notebook numbers or names (default: the profile's `notebooks` list, else all)")
    run.add_argument("--keep-going", action="store_true", help="run later notebooks after a failure")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override one profile value (repeatable; the value as in the YAML file, e.g. "
                          "--set dart_alpha=10 --set 'table1_corruptions=[gaussian_noise]'); needs --output")
    run.add_argument("--overrides", type=Path, metavar="FILE",
                     help="a YAML file of profile values to override (as --set, which goes on top); needs --output")
    run.add_argument("--output", type=Path, metavar="DIR",
                     help="write this run's results/, figures/ and runs/ under DIR instead of the repository")
    run.add_argument("--budget", type=non_negative_float, metavar="SECONDS",
                     help="time guard: interrupt the running cell when SECONDS have passed (finished grid rows "
                          "are kept), start no later notebook, exit with status 3; rerun to resume")
    run.add_argument("--publish", action="store_true",
                     help="also keep each executed notebook in results/<profile>/notebooks/ (the results book's source)")
    run.set_defaults(func=_cmd_run)


def add_refresh(sub) -> None:
    refresh = sub.add_parser("refresh", help="re-execute committed notebooks in place (smoke values)")
    refresh.add_argument("notebooks", nargs="*", help="notebook numbers or names (default: all)")
    refresh.set_defaults(func=_cmd_refresh)


def add_profiles(sub) -> None:
    profiles = sub.add_parser("profiles", help="list the profiles and their parameters")
    profiles.add_argument("--sync-notebooks", action="store_true",
                          help="write the smoke profile's values (notebooks/profiles/smoke.yaml, where they are stated) "
                               "into every notebook's parameters cell, and list what changed")
    profiles.set_defaults(func=_cmd_profiles)


def add_lab(sub) -> None:
    lab = sub.add_parser("lab", help="JupyterLab on the suite (what `make lab` runs)")
    lab.add_argument("--port", type=positive_int, help="port (default: JupyterLab's, 8888 or the next free one)")
    lab.add_argument("--token", help="the access token (default: a random one, printed); an empty one is refused "
                                     "unless --insecure-no-token is given")
    lab.add_argument("--insecure-no-token", action="store_true",
                     help="allow --token \"\": no authentication, anyone reaching the port can run code as you")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.set_defaults(func=_cmd_lab)
