"""``grid``: a notebook's experiment grid computed outside the notebook, resumable, shardable, on
this process or on Ray workers (docs/cli.md, the grids; docs/scale-out.md)."""

from __future__ import annotations

import argparse
import shlex
import sys

from dartlib.cli.common import (PROFILE_HELP, RunningCommand, data_folders, grid_settings, non_negative_float, positive_int,
                                repo_folder, writable)
from dartlib.profiles import DEFAULT_PROFILE


def _cmd_grid(args: argparse.Namespace) -> int:
    import torch

    from dartlib.experiments.grid import parse_shard
    from dartlib.experiments.grid_jobs import CellChoiceError, choose_cells, prepare_job
    from dartlib.experiments.settings import Settings
    from dartlib.paths import results_dir
    from dartlib.registry import UnknownNameError
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.studies.grids import GRIDS, borrowers_of

    if args.shard:
        try:
            parse_shard(args.shard)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        spec = GRIDS[args.experiment]
    except UnknownNameError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # a profile defines every notebook parameter (tests/test_runner.py)
    settings = grid_settings(Settings.from_params(load_profile(args.profile)), args.experiment)
    if not args.status:  # --status writes nothing; the others the results file, trained refiners and caches
        writable(repo_folder("results", args.profile), *data_folders())
    try:
        cells = choose_cells(spec.cells(settings), methods=args.methods.split(",") if args.methods else (),
                             refiners=args.refiners.split(",") if args.refiners else (), shard_spec=args.shard)
    except CellChoiceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    backend = args.backend or settings.run.grid_backend
    if backend == "ray" and not args.status:
        return _grid_on_ray(args, cells, spec, settings)
    path = results_dir(args.profile) / f"{args.experiment}.csv"
    if not args.status:  # --status trains nothing: it loads the trained inputs for their digests
        spec.train(settings=settings, progress=True)
    job = prepare_job(experiment=args.experiment, prepare=spec.prepare, context_of=spec.context_of, settings=settings,
                      cells=cells, path=path, command=f"python -m dartlib grid {args.experiment} --profile {args.profile}")
    print(f"{args.profile}: {job.meta['arch']} ({job.meta['clean_test_accuracy']:.2f}% clean); {len(cells)} "
          f"{args.experiment} cells{' in shard ' + args.shard if args.shard else ''}; {path}")
    if args.outcomes:
        counts = job.fill_outcomes(borrowers=[path.with_name(f"{name}.csv") for name in borrowers_of(args.experiment)])
        print(f"{path}: {counts['checked']} rows given per-image outcomes (recomputed, equal), {counts['replaced']} "
              f"replaced (recomputed, different), {counts['already']} had them, {counts['skipped']} not current "
              f"(run the grid to compute them)")
        return 0
    reuse = [results_dir(args.profile) / name for name in spec.shared_results]
    if args.status:
        table = job.status(reuse=reuse)
        print(table.to_string())
        borrowed = int(table.borrowable.sum())
        print(f"current {table.current.sum()} of {table.cells.sum()} cells; to compute: {table.stale.sum()} stale, "
              f"{table.suspect.sum()} suspect, {table.missing.sum()} missing"
              + (f" ({borrowed} of them borrowed from {', '.join([path.name, *(p.name for p in reuse)])}, not computed)"
                 if borrowed else ""))
        return 0
    job.run(reuse=reuse)
    return 0


def _grid_on_ray(args: argparse.Namespace, cells: list, spec, settings) -> int:
    """``grid --backend ray``: the cells on Ray workers, each preparing the context once (``spec``:
    the grid's :class:`~dartlib.studies.grids.GridSpec`)."""
    from dartlib.experiments.distributed import CellsFailed, ContextFactory, run_grid_ray
    from dartlib.paths import results_dir

    if args.shard:
        print("error: --shard splits a grid between local processes; the ray backend schedules every cell itself",
              file=sys.stderr)
        return 2
    if spec.context_of:
        print(f"error: grid {args.experiment} gives its cells contexts of their own, which the ray backend does not "
              f"build; run it with --backend local", file=sys.stderr)
        return 2
    path = results_dir(args.profile) / f"{args.experiment}.csv"
    spec.train(settings=settings, progress=True)  # once, here: the workers only load
    factory = ContextFactory(spec.prepare, {"settings": settings, "progress": False}, args.threads)
    print(f"{args.profile}: {len(cells)} {args.experiment} cells on Ray "
          f"({args.cpus_per_cell:g} CPU, {args.gpus_per_cell:g} GPU per cell); {path}")
    try:
        run_grid_ray(cells, factory, path=path, experiment=args.experiment,
                     reuse=[results_dir(args.profile) / name for name in spec.shared_results], address=args.address,
                     workers=args.workers, cpus_per_cell=args.cpus_per_cell, gpus_per_cell=args.gpus_per_cell)
    except (CellsFailed, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        argv = sys.argv[1:] if RunningCommand.argv is None else RunningCommand.argv
        print(f"interrupted: the workers are stopped, every finished cell is in {path}; resume with: "
              f"python -m dartlib {shlex.join(argv)}", file=sys.stderr)
        return 130
    return 0


def add_grid(sub) -> None:
    grid_ = sub.add_parser("grid", help="compute a notebook's experiment grid outside the notebook (resumable, shardable)")
    grid_.add_argument("experiment", help="a grid of dartlib.studies.grids.GRIDS: table1, note_report, "
                                          "online_imbalance, ablations, backbone_study, jpeg_bound, diagnosis, paper_config "
                                          "(an unknown name lists them)")
    grid_.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    grid_.add_argument("--shard", help="i/n: run every n-th cell starting at i (workers share the results file)")
    grid_.add_argument("--threads", type=positive_int, help="torch CPU threads for this process")
    grid_.add_argument("--refiners", help="comma-separated refiners to keep (e.g. none: the cells without DART first)")
    grid_.add_argument("--methods", help="comma-separated methods to keep (e.g. note,sar: split the slow ones across workers)")
    grid_.add_argument("--status", action="store_true",
                       help="count current, stale and missing cells per method and refiner, and compute nothing")
    grid_.add_argument("--outcomes", action="store_true",
                       help="recompute the current rows that lack per-image outcomes (the noise model's input, "
                            "docs/noise.md): an equal accuracy adds them, a different one replaces the row "
                            "and the copies other grids borrowed")
    grid_.add_argument("--backend", choices=["local", "ray"],
                       help="local (default, or the profile's grid_backend): this process; ray: Ray workers "
                            "(docs/scale-out.md)")
    grid_.add_argument("--address", help="ray: the cluster to join (auto, host:6379, ray://host:10001); default: "
                                         "a Ray instance started on this machine")
    grid_.add_argument("--cpus-per-cell", type=non_negative_float, default=1.0, help="ray: CPUs (torch threads) per worker")
    grid_.add_argument("--gpus-per-cell", type=non_negative_float, default=0.0, help="ray: GPUs per worker (0.25: four cells per GPU)")
    grid_.add_argument("--workers", type=positive_int, help="ray: how many workers (default: as many as the cluster holds)")
    grid_.set_defaults(func=_cmd_grid)
