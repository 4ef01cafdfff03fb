"""The ``python -m dartlib`` command line."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from dartlib.profiles import DEFAULT_PROFILE, profile_names
from dartlib.registry import UnknownNameError

VALIDATION_EPOCHS = 2  # g_phi length of ``validate-alpha`` unless --epochs says otherwise
RESUMABLE = ("grid", "run", "train")
# Commands an installed copy runs (docs/install.md); every other one reads the notebooks, profiles or
# committed rows of a checkout.
WITHOUT_CHECKOUT = ("choose-alpha", "data")  # commands that keep finished work: an interrupted one is resumed by running it again


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def part_size_mib(text: str) -> float:
    """An argparse type: a part size in MiB, a finite number of at least one byte."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in MiB such as 16, got {text!r}") from None
    if not (value * 1024 * 1024 >= 1 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a size in MiB of at least one byte (such as 16), got {text}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def names_of(kind: str):
    """An argparse type: a name of ``kind`` (corruption, architecture, recipe, dataset: the names a
    profile may use, :data:`dartlib.schema.NAME_KINDS`); an unknown one names the nearest valid one."""

    def check(text: str) -> str:
        from dartlib.schema import NAME_KINDS, nearest

        valid = NAME_KINDS[kind]()
        if text not in valid:
            close = nearest(text, valid)
            raise argparse.ArgumentTypeError(f"unknown {kind} {text!r}{f' (did you mean {close!r}?)' if close else ''}; "
                                             f"valid: {', '.join(valid)}")
        return text

    check.__name__ = kind  # argparse names the type in some messages
    return check


class _HelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, ``(default: ...)``, unless the help already says
    it; an option that is off or unset unless given (a flag, a value with no default) has none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) or (
                not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)):
            return text
        shown = ", ".join(map(str, action.default)) if isinstance(action.default, list) else "%(default)s"
        return f"{text} (default: {shown})"


class _Parser(argparse.ArgumentParser):
    """An argument error is one line on stderr (the usage is one --help away), exit status 2; every
    option's help shows its default (:class:`_HelpFormatter`; subcommands' parsers are this class too)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 naming an unknown option of the chosen (sub)command and the nearest valid one."""
    import difflib

    while True:  # the deepest subcommand chosen
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or getattr(args, subs[0].dest, None) not in subs[0].choices:
            break
        parser = subs[0].choices[getattr(args, subs[0].dest)]
    options = [o for a in parser._actions for o in a.option_strings]
    words = []
    for word in extra:
        close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6) if word.startswith("-") else []
        words.append(f"{word} (did you mean {close[0]}?)" if close else word)
    parser.error(f"unrecognized argument{'s' if len(extra) > 1 else ''}: {', '.join(words)}")


DATA_ROOT_CHANGE = "point DART_DATA_DIR at a folder on a writable device with space"


def _writable(*folders: tuple[Path, str]) -> None:
    """Before anything is computed: every folder the command writes (``(folder, the alternative to
    offer)``) must take a file, else one line naming it and what to free or change
    (:class:`dartlib.data.files.NotWritableError`, exit 5)."""
    from dartlib.data.files import check_writable

    for folder, change in folders:
        check_writable(folder, change=change)


def _repo_folder(*parts: str) -> tuple[Path, str]:
    """A folder of the repository a command writes, with the alternative to offer: a writable checkout."""
    from dartlib.paths import REPO_ROOT

    return REPO_ROOT.joinpath(*parts), f"work in a clone of the repository on a writable device (git clone {REPO_ROOT})"


def _data_folders(*parts: str) -> list[tuple[Path, str]]:
    """The data root (caches, generated test sets) and its checkpoints/ (trained models and refiners)."""
    from dartlib.paths import data_root

    return [(data_root().joinpath(*parts), DATA_ROOT_CHANGE), (data_root() / "checkpoints", DATA_ROOT_CHANGE)]


def float_list(text: str) -> list[float]:
    """An argparse type: comma-separated numbers, e.g. ``0.1,1,10``."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers such as 0.1,1,10, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


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
        _writable(_repo_folder("runs", args.profile), _repo_folder("results", args.profile),
                  _repo_folder("figures", args.profile), *_data_folders(),
                  *([_repo_folder("results", args.profile, "notebooks")] if args.publish else []))
    else:
        out = Path(args.output).expanduser().resolve()
        _writable(*[(out / kind / args.profile, "give another --output folder") for kind in ("runs", "results", "figures")],
                  *_data_folders())
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
    return 1 if failed else 0


def _cmd_book(args: argparse.Namespace) -> int:
    from dartlib.book.site import build_book
    from dartlib.schema import checked_profile

    checked_profile(args.profile)
    from dartlib.book.site import BOOK_DIR

    out = Path(args.out) if args.out else BOOK_DIR / args.profile
    _writable((out.parent, "give another folder with --out DIR"))
    try:
        index = build_book(profile=args.profile, out=Path(args.out) if args.out else None, progress=True)
    except RuntimeError as err:  # Sphinx's own messages are above; the previous book is left as it was
        print(f"error: {err}", file=sys.stderr)
        return 1
    pages = sorted(p for p in index.parent.rglob("*.html") if p.name not in ("genindex.html", "search.html"))
    print(f"{args.profile} book: {len(pages)} pages; open {index}")
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


def _cmd_data_status(_: argparse.Namespace) -> int:
    from dartlib.data.sources import status

    damaged = 0
    for row in status():
        mark = ("DAMAGED" if row["problem"] else "present") if row["present"] else "ABSENT "
        print(f"{row['dataset']:<13} {mark}  {row['path']}")
        if row["problem"]:
            damaged += 1
            print(f"{'':<13}          wrong: {row['problem']}")
            print(f"{'':<13}          how to get it again: {row['how to get it']}")
        elif not row["present"]:
            print(f"{'':<13}          how to get it: {row['how to get it']}")
    return 1 if damaged else 0


def _cmd_data_download(args: argparse.Namespace) -> int:
    from dartlib.data.download import download

    _writable(*_data_folders()[:1])
    print(f"{args.dataset}: {download(args.dataset)}")
    return 0


def _cmd_data_prepare(args: argparse.Namespace) -> int:
    from dartlib.data.corruptions import CORRUPTIONS
    from dartlib.data.prepare import prepare_corrupted
    from dartlib.data.sources import corrupted_dir

    _writable((corrupted_dir(args.dataset), DATA_ROOT_CHANGE), *_data_folders()[:1])
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
    from dartlib.experiments.settings import dart_config
    from dartlib.devices import default_device
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.models.checkpoints import checkpoint_path, load_checkpoint

    p = load_profile(profile)
    device = default_device()
    ckpt = checkpoint_path(dataset=p["source_dataset"], arch=p["source_arch"], recipe=p["source_recipe"], seed=p["seed"])
    if not ckpt.is_file():
        raise FileNotFoundError(f"no source checkpoint at {ckpt}; train it first: python -m dartlib train --profile {profile}")
    model, _ = load_checkpoint(ckpt, device=device, expect={"arch": p["source_arch"], "dataset": p["source_dataset"]})
    config = dart_config(p)
    return p, model, device, config


def _cmd_bench_refiners(args: argparse.Namespace) -> int:
    import torch

    from dartlib.perf.throughput import shared_pass_speedup
    import dataclasses

    from dartlib.data import load

    p, model, device, base = _profile_source(args.profile)
    alphas = p["alpha_values"][: args.count] if args.count <= len(p["alpha_values"]) else range(args.count)
    configs = [dataclasses.replace(base, alpha=float(a)) for a in alphas]
    table = shared_pass_speedup(model, load(p["source_dataset"], split="train"), configs=configs, n_steps=args.steps,
                                repeats=args.repeats, device=device)
    print(f"profile {args.profile}: {p['source_arch']} on {p['source_dataset']}, device {device}, torch threads "
          f"{torch.get_num_threads()}, {args.steps} steps each, best of {args.repeats}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"one pass is {table.attrs['speedup']:.2f}x faster than {len(configs)} separate trainings")
    return 0


def _cmd_bench_dart(args: argparse.Namespace) -> int:
    import torch

    from dartlib.perf.throughput import dart_overhead
    from dartlib.data import load

    p, model, device, config = _profile_source(args.profile)
    train = load(p["source_dataset"], split="train")
    test = load(p["source_dataset"], split="test")
    table = dart_overhead(model, train, test, config=config, test_batch_size=p["test_batch_size"], n_steps=args.steps,
                          stream_size=args.stream, repeats=args.repeats, device=device)
    print(f"profile {args.profile}: {p['source_arch']} on {p['source_dataset']}, device {device}, torch threads "
          f"{torch.get_num_threads()}, best of {args.repeats}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"intermediate training / BN-adapt forward, images per second: {table.attrs['intermediate_over_forward']:.3f} (target >= 0.8)")
    print(f"BNAdapt+DART / BNAdapt, wall time over the stream: {table.attrs['dart_over_bnadapt_wall']:.3f} (target <= 1.05)")
    return 0


def _cmd_train_refiners(args: argparse.Namespace) -> int:
    """Train (or resume) notebook 15's refiners named by ``--variants``, each pass resumable."""
    from dartlib.studies.diagnosis import train_variants, variant

    if args.paper_tables:
        return _train_paper_table_refiners(args)
    if not args.variants:
        print("error: give --variants NAME[,NAME...] or --paper-tables", file=sys.stderr)
        return 2
    names = [n for n in args.variants.split(",") if n]
    for name in names:
        try:
            variant(name)
        except KeyError as err:
            print(f"error: {err.args[0]}", file=sys.stderr)
            return 2
    settings = _training_settings(args)
    train_variants(settings=settings, names=names, progress=True)
    print(f"{args.profile}: refiners of {', '.join(names)} trained (or found) beside {settings.checkpoint().name}")
    return 0


def _training_settings(args: argparse.Namespace):
    """``--profile``'s settings (checked before anything runs), with ``--threads`` applied and the data
    folders the refiners are saved into checked writable."""
    import torch

    from dartlib.experiments.settings import Settings
    from dartlib.schema import checked_profile as load_profile

    if args.threads:
        torch.set_num_threads(args.threads)
    settings = Settings.from_params(load_profile(args.profile))
    _writable(*_data_folders())
    return settings


def _train_paper_table_refiners(args: argparse.Namespace) -> int:
    """Notebooks 07 and 08's refiners at the paper's configuration, pass by pass in the order of
    :data:`dartlib.studies.paper_refiners.PASS_ORDER` (``--passes``: a subset), each resumable."""
    from dartlib.dart.intermediate import load_or_train_refiners
    from dartlib.experiments.source_setup import prepare_source
    from dartlib.studies.paper_refiners import PASS_ORDER, paper_table_refiners

    wanted = [n for n in (args.passes or ",".join(PASS_ORDER)).split(",") if n]
    unknown = sorted(set(wanted) - set(PASS_ORDER))
    if unknown:
        print(f"error: unknown pass {', '.join(unknown)}; valid: {', '.join(PASS_ORDER)}", file=sys.stderr)
        return 2
    settings = _training_settings(args)
    passes = paper_table_refiners(settings=settings)
    setup = prepare_source(settings=settings)
    for name in wanted:
        configs = passes[name]
        print(f"{args.profile}: pass {name}: {len(configs)} refiners ({', '.join(configs)})", flush=True)
        load_or_train_refiners(setup.checkpoint, setup.model, setup.train, list(configs.values()), progress=True)
        print(f"{args.profile}: pass {name} trained (or found) beside {setup.checkpoint.name}", flush=True)
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.models.checkpoints import load_checkpoint
    from dartlib.models.training import train_source

    p = load_profile(args.profile) if args.profile else {}
    dataset = args.dataset or p.get("source_dataset")
    arch = args.arch or p.get("source_arch")
    recipe = args.recipe or p.get("source_recipe")
    if not (dataset and arch and recipe):
        raise SystemExit("give --profile, or all of --dataset, --arch and --recipe")
    seed = args.seed if args.seed is not None else p.get("seed", 0)
    from dartlib.models.checkpoints import checkpoint_path

    target = checkpoint_path(dataset=dataset, arch=arch, recipe=recipe, seed=seed, directory=args.directory).parent
    _writable((target, "train into another folder with --directory DIR" if args.directory else DATA_ROOT_CHANGE),
              *([] if args.directory else _data_folders()[:1]))
    path = train_source(dataset=dataset, arch=arch, recipe=recipe, seed=seed, progress=not args.quiet,
                        max_epochs=args.max_epochs, directory=args.directory)
    if path.name.endswith(".partial.pt"):
        print(f"stopped after --max-epochs; resume with the same command: {path}")
        return 0
    _, meta = load_checkpoint(path)
    print(f"{path}: clean test accuracy {meta['clean_test_accuracy']:.2f}% after {meta['epochs']} epochs")
    return 0


def _cmd_artefacts(args: argparse.Namespace) -> int:
    from dartlib.models import artefacts

    if args.action == "compact-logs":
        from dartlib.dart.intermediate import compact_refiner_file

        _writable((artefacts.MANIFEST.parent, ""))
        done = [p.name for p in args.files if compact_refiner_file(p)]
        print(f"compacted the training logs of {len(done)} refiner file(s){': ' + ', '.join(done) if done else ''}; "
              f"then: python -m dartlib artefacts manifest")
        return 0
    if args.action == "manifest":
        _writable((artefacts.MANIFEST.parent, ""))
        path = artefacts.write_manifest()
        print(f"{path}: {len(artefacts.committed_files())} files")
        return 0
    problems = artefacts.verify_manifest()
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if not problems:
        print(f"{artefacts.MANIFEST}: every committed artefact present with its sha256")
    kinds = {p.kind for p in problems}
    # the documented statuses: a damaged file first, then a missing one; an unlisted file fails the check
    return EXIT_DAMAGED if "damaged" in kinds else EXIT_MISSING if "missing" in kinds else int(bool(problems))


def _cmd_reference(args: argparse.Namespace) -> int:
    from dartlib.reporting import reference

    from dartlib.schema import checked_profile

    checked_profile(args.profile)  # an unknown name lists the valid ones (exit 2)
    if args.action == "update":
        _writable(_repo_folder("tests", "golden", args.profile))
        print(f"stored the results of profile {args.profile} in {reference.update_reference(args.profile)}")
        return 0
    compared, problems = reference.compare_profile(args.profile)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    print(f"{compared} cells compared; {len(problems)} difference(s) beyond tolerance")
    return 1 if problems else 0


def _cmd_claims(args: argparse.Namespace) -> int:
    from dartlib.book.claims import evaluate, render
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs

    params = load_profile(args.profile)
    table = evaluate(args.profile, corrupted_dataset=params.get("corrupted_dataset"))
    print(render(table, profile=args.profile))
    return 0


def _cmd_grid(args: argparse.Namespace) -> int:
    import torch

    from dartlib.studies.grids import GRIDS
    from dartlib.registry import UnknownNameError
    from dartlib.experiments.grid import grid_status, parse_shard, shard
    from dartlib.paths import results_dir
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.experiments.engine import TrainedInputsMissing, evaluate_cell, run_cells
    from dartlib.experiments.settings import Settings

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
    prepare, make_cells = spec.prepare, spec.cells
    # a profile defines every notebook parameter (tests/test_runner.py)
    settings = Settings.from_params(load_profile(args.profile))
    if not args.status:  # --status writes nothing; the others the results file, trained refiners and caches
        _writable(_repo_folder("results", args.profile), *_data_folders())
    cells = make_cells(settings)
    for field in ("method", "refiner"):
        if not getattr(args, f"{field}s"):
            continue
        keep = getattr(args, f"{field}s").split(",")
        valid = list(dict.fromkeys(getattr(c, field) for c in cells))
        unknown = [v for v in keep if v not in valid]
        if unknown:
            print(f"error: unknown {field} {', '.join(unknown)}; valid: {', '.join(valid)}", file=sys.stderr)
            return 2
        cells = [c for c in cells if getattr(c, field) in keep]
    cells = shard(cells, args.shard) if args.shard else cells
    backend = args.backend or settings.get("grid_backend", "local")
    if backend == "ray" and not args.status:
        return _grid_on_ray(args, cells, prepare, settings)
    # --status trains nothing: it loads the trained inputs for their digests
    try:
        context, meta = prepare(settings=settings, progress=True, trained_only=args.status)[:2]
    except TrainedInputsMissing as err:  # name this grid's command, not the pattern
        raise TrainedInputsMissing(err.paths, command=f"python -m dartlib grid {args.experiment} --profile {args.profile}") from None
    runner = spec.context_of(settings, context) if spec.context_of else (lambda _: context)
    path = results_dir(args.profile) / f"{args.experiment}.csv"
    print(f"{args.profile}: {meta['arch']} ({meta['clean_test_accuracy']:.2f}% clean); {len(cells)} {args.experiment} "
          f"cells{' in shard ' + args.shard if args.shard else ''}; {path}")
    if args.outcomes:
        from dartlib.experiments.grid import fill_outcomes

        # the grids that borrow this one's rows get each recomputed row and its outcomes too
        borrowers = [path.with_name(f"{name}.csv") for name in GRIDS if path.name in GRIDS[name].shared_results]
        counts = fill_outcomes(cells, lambda cell: evaluate_cell(cell, runner(cell)), path=path,
                               experiment=args.experiment, inputs=lambda cell: runner(cell).inputs(cell),
                               borrowers=borrowers)
        print(f"{path}: {counts['checked']} rows given per-image outcomes (recomputed, equal), {counts['replaced']} "
              f"replaced (recomputed, different), {counts['already']} had them, {counts['skipped']} not current "
              f"(run the grid to compute them)")
        context.save_shared_source()
        return 0
    if args.status:
        table = grid_status(cells, path=path, inputs=lambda cell: runner(cell).inputs(cell))
        print(table.to_string())
        print(f"current {table.current.sum()} of {table.cells.sum()} cells; to compute: {table.stale.sum()} stale, "
              f"{table.suspect.sum()} suspect, {table.missing.sum()} missing")
        return 0
    reuse = [results_dir(args.profile) / name for name in spec.shared_results]
    run_cells(cells, runner, path=path, experiment=args.experiment, cell_progress=True, reuse=reuse)
    context.save_shared_source()  # a context with a logits store keeps its forwards for the next run
    return 0


def _grid_on_ray(args: argparse.Namespace, cells: list, prepare, settings) -> int:
    """``grid --backend ray``: the cells on Ray workers, each preparing the context once."""
    from dartlib.experiments.distributed import CellsFailed, ContextFactory, run_grid_ray
    from dartlib.studies.grids import GRIDS
    from dartlib.paths import results_dir

    if args.shard:
        print("error: --shard splits a grid between local processes; the ray backend schedules every cell itself",
              file=sys.stderr)
        return 2
    if GRIDS[args.experiment].context_of:
        print(f"error: grid {args.experiment} gives its cells contexts of their own, which the ray backend does not "
              f"build; run it with --backend local", file=sys.stderr)
        return 2
    path = results_dir(args.profile) / f"{args.experiment}.csv"
    shared = GRIDS[args.experiment].shared_results
    factory = ContextFactory(prepare, {"settings": settings, "progress": False}, args.threads)
    print(f"{args.profile}: {len(cells)} {args.experiment} cells on Ray "
          f"({args.cpus_per_cell:g} CPU, {args.gpus_per_cell:g} GPU per cell); {path}")
    try:
        run_grid_ray(cells, factory, path=path, experiment=args.experiment,
                     reuse=[results_dir(args.profile) / name for name in shared], address=args.address,
                     workers=args.workers, cpus_per_cell=args.cpus_per_cell, gpus_per_cell=args.gpus_per_cell)
    except (CellsFailed, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted: the workers are stopped, every finished cell is in {path}; resume with: "
              f"python -m dartlib {shlex.join(sys.argv[1:] if _ARGV is None else _ARGV)}", file=sys.stderr)
        return 130
    return 0


def validation_filename(*, corrupted: bool, epochs: int) -> str:
    """The results file of ``validate-alpha``: the default g_phi length keeps the original names
    (alpha_validation.csv, alpha_validation_corrupted.csv); another length gets its own file."""
    length = "" if epochs == VALIDATION_EPOCHS else f"_epochs{epochs}"
    return f"alpha_validation{'_corrupted' if corrupted else ''}{length}.csv"


def _cmd_validate_alpha(args: argparse.Namespace) -> int:
    import torch

    from dartlib.experiments.settings import dart_config
    from dartlib.data import load
    from dartlib.data.corruptions import HOLDOUT_CORRUPTIONS
    from dartlib.paths import results_dir
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.models.checkpoints import load_checkpoint
    from dartlib.models.training import train_source
    from dartlib.studies.alpha_choice import AlphaSearch, validate_alpha

    if args.threads:
        torch.set_num_threads(args.threads)
    corruptions = [c for c in (args.holdout_corruptions or "").split(",") if c]
    unknown = [c for c in corruptions if c not in HOLDOUT_CORRUPTIONS]
    if unknown:
        raise SystemExit(f"unknown held-out corruption(s) {', '.join(unknown)}; valid: {', '.join(HOLDOUT_CORRUPTIONS)}")
    p = load_profile(args.profile)
    _writable(_repo_folder("results", args.profile), *_data_folders())
    checkpoint = train_source(dataset=p["source_dataset"], arch=p["source_arch"], recipe=p["source_recipe"],
                              seed=p["seed"], progress=False)
    model, meta = load_checkpoint(checkpoint)
    # the rule keeps the paper's alpha unless it costs too much (dartlib.studies.alpha_choice), not the profile's current one
    config = dart_config(p, alpha=load_profile("paper")["dart_alpha"], epochs=args.epochs)
    search = AlphaSearch(alphas=args.alphas, heldout_per_class=args.heldout, batch_size=p["test_batch_size"],
                         max_loss=args.max_loss)
    frame, chosen = validate_alpha(checkpoint=checkpoint, model=model, train=load(p["source_dataset"], split="train"),
                                   config=config, search=search, holdout_corruptions=corruptions, severity=p["severity"])
    from dartlib.data.files import atomic_path

    path = results_dir(args.profile) / validation_filename(corrupted=bool(corruptions), epochs=args.epochs)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.4f")
    where = f", clean and under {', '.join(corruptions)} at severity {p['severity']}" if corruptions else ""
    print(f"{args.profile}: {meta['arch']} on {p['source_dataset']}; g_phi of {args.epochs} epochs on the training set "
          f"less {args.heldout} images per class, scored on those{where} (no test data)")
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    stream = "mean over the corrupted held-out i.i.d. streams" if corruptions else "the held-out i.i.d. stream"
    print(f"chosen alpha: {chosen:g} (the paper's {config.alpha:g} unless it loses more than {args.max_loss:g} points "
          f"on {stream}); table in {path}")
    return 0


def load_model(spec: str, *, weights: str | None = None):
    """The ``nn.Module`` that ``--model`` names: ``FILE.py:NAME`` or ``package.module:NAME``, NAME
    being a module instance or a callable that returns one (called without arguments); or a
    TorchScript ``.pt``/``.pth`` file (``torch.jit.save``; a pickled module is not read, since
    unpickling runs the code a file carries). ``weights``: a state dict file
    (``torch.save(model.state_dict())``, read with ``weights_only=True``) loaded into it."""
    import importlib
    import importlib.util

    import torch
    from torch import nn

    if spec.endswith((".pt", ".pth")) and ":" not in spec:
        path = Path(spec)
        if not path.is_file():
            raise SystemExit(f"--model {spec}: no such file")
        try:
            model = torch.jit.load(str(path), map_location="cpu")
        except RuntimeError as err:
            raise SystemExit(f"--model {spec} is not a TorchScript file ({err.__class__.__name__}): give "
                             "FILE.py:NAME (the code that builds the model) and --weights with its state dict, or "
                             "save it with torch.jit.save(torch.jit.script(model), path)") from None
    else:
        where, _, name = spec.rpartition(":")
        if not where or not name:
            raise SystemExit(f"--model {spec}: give FILE.py:NAME or package.module:NAME (NAME a model or a function "
                             "returning one), or a .pt file of a saved model")
        if where.endswith(".py"):
            if not Path(where).is_file():
                raise SystemExit(f"--model {spec}: no such file {where}")
            module_spec = importlib.util.spec_from_file_location(Path(where).stem, where)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        if not hasattr(module, name):
            raise SystemExit(f"--model {spec}: {where} has no {name!r}")
        model = getattr(module, name)
        if not isinstance(model, nn.Module) and callable(model):
            model = model()
    if not isinstance(model, nn.Module):
        raise SystemExit(f"--model {spec} gives a {type(model).__name__}, not a torch.nn.Module")
    if weights:
        from dartlib.models.checkpoints import load_weights

        state = load_weights(Path(weights))
        state = state.get("model", state.get("state_dict", state))
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise SystemExit(f"--weights {weights} does not fit --model {spec}: {err}") from None
    return model.eval()


def load_labelled(spec: str):
    """``--data``: an ``.npz`` file with arrays ``images`` and ``labels`` (uint8 N x H x W x C, or
    float N x C x H x W in [0, 1]), or the name of one of dartlib's data sets (its training split)."""
    import numpy as np

    if spec.endswith(".npz"):
        if not Path(spec).is_file():
            raise SystemExit(f"--data {spec}: no such file")
        with np.load(spec) as arrays:
            missing = [k for k in ("images", "labels") if k not in arrays]
            if missing:
                raise SystemExit(f"--data {spec} has arrays {sorted(arrays)}; it needs 'images' and 'labels' "
                                 "(np.savez(path, images=images, labels=labels))")
            return arrays["images"], arrays["labels"]
    from dartlib.data import load

    train = load(spec, split="train")
    return train.images, train.labels


def _cmd_choose_alpha(args: argparse.Namespace) -> int:
    import torch

    from dartlib.dart.fit import SettingError
    from dartlib.dart.refiner import DartConfig
    from dartlib.data.protocols import TEST_BATCH_SIZE
    from dartlib.devices import default_device
    from dartlib.studies.alpha_choice import AlphaSearch, select_alpha

    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model(args.model, weights=args.weights)
    images, labels = load_labelled(args.data)
    num_classes = args.num_classes or int(labels.max()) + 1
    given = {"alpha": args.keep, "epochs": args.epochs, "n_dir": args.n_dir, "batch_size": args.batch_size}
    config = DartConfig(**{k: v for k, v in given.items() if v is not None}, per_class=args.per_class, seed=args.seed)
    try:
        search = AlphaSearch(alphas=args.alphas, heldout_per_class=args.heldout,
                             batch_size=args.test_batch_size or TEST_BATCH_SIZE, shift_weight=args.shift_weight)
        validation = load_labelled(args.validation) if args.validation else None
        choice = select_alpha(model=model, data=(images, labels), num_classes=num_classes,
                              device=args.device or default_device(), config=config, search=search,
                              validation=validation, progress=not args.quiet)
    except SettingError as err:
        raise SystemExit(f"choose-alpha: {err}") from None
    where = (f"the {len(validation[1])} images of --validation" if validation is not None
             else "the training images held out (g_phi trained on the rest)")
    print(f"{type(model).__name__} on {len(labels)} labelled images ({num_classes} classes); g_phi of {config.epochs} "
          f"epochs per candidate, scored on {where} (no test data)")
    print(choice.table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(choice.report())
    print(choice)
    print(f"use DartConfig(alpha={choice.alpha:g}) in fit_refiner")
    if args.out:
        choice.table.to_csv(args.out, index=False, float_format="%.4f")
        print(f"table in {args.out}")
    return 0


def _cmd_data_pack(args: argparse.Namespace) -> int:
    from dartlib.data.packed import pack_image_folder
    from dartlib.environment import setting

    root = args.root or setting("DART_CIFAR10_DIR")
    if not root:
        raise SystemExit("give the CIFAR-10 image folder: --root DIR or DART_CIFAR10_DIR")
    index = pack_image_folder(root, args.out, preset=args.preset)
    sizes = ", ".join(f"{split} {len(entry['labels'])}" for split, entry in index["splits"].items())
    print(f"{args.out}: {sizes} images, {len(index['frost'])} frost photographs")
    return 0


def _cmd_travel_copy(args: argparse.Namespace) -> int:
    from dartlib.data.packed import pack_image_folder
    from dartlib.environment import setting
    from dartlib.data.travel import MIB, TRAVEL_LIMIT, folder_bytes, sparse_copy

    extra = []
    if args.pack_cifar10:
        root = setting("DART_CIFAR10_DIR")
        if not root:
            raise SystemExit("--pack-cifar10 needs the CIFAR-10 image folder in DART_CIFAR10_DIR")
        packed = Path(args.out).with_name(Path(args.out).name + ".cifar10.xz")
        pack_image_folder(root, packed, preset=6)
        extra.append(packed)
    copy = sparse_copy(args.out, extra=extra + list(args.carry or []))
    for path in extra:
        path.unlink()
    total = folder_bytes(args.out)
    print(copy.describe())
    print(f"travels: {total / MIB:.1f} MiB of the {TRAVEL_LIMIT / MIB:.0f} MiB a GPU slot takes")
    return 0 if total <= TRAVEL_LIMIT else 4


def _cmd_travel_patterns(_: argparse.Namespace) -> int:
    from dartlib.data.travel import SPARSE_PATTERNS

    print("\n".join(SPARSE_PATTERNS))  # one a line: git sparse-checkout set --no-cone --stdin
    return 0


def _cmd_travel_split(args: argparse.Namespace) -> int:
    from dartlib.data.travel import MIB, split_file

    manifest = split_file(args.file, args.out, part_bytes=int(args.part_mib * MIB))
    print(manifest)
    return 0


def _cmd_travel_join(args: argparse.Namespace) -> int:
    from dartlib.data.travel import join_parts, sha256_file

    out = join_parts(args.manifest, args.out)
    print(f"{out}: sha256 {sha256_file(out)} (checked against {args.manifest})")
    return 0


def _cmd_travel_unpack(args: argparse.Namespace) -> int:
    from dartlib.data import packed

    index, payload = packed.read_packed(args.packed)
    out = Path(args.out).resolve()
    site = packed.install_frost(index, payload, out / "site")
    arrays = {split: packed.decode_split(index, payload, split) for split in ("train", "test")}
    root = packed.install_as_image_folder(arrays, out / "cifar10")
    print(f"export DART_CIFAR10_DIR={root}")
    if site is not None:  # the kernels import imagecorruptions' frost photographs from there
        print(f"export PYTHONPATH={out / 'site'}${{PYTHONPATH:+:$PYTHONPATH}}")
    return 0


PROFILE_HELP = "profile name: a file notebooks/profiles/<name>.yaml (python -m dartlib profiles lists them)"


def _parser_run(sub) -> None:
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


def _parser_book(sub) -> None:
    book = sub.add_parser("book", help="build a profile's results book (static HTML) from its executed notebooks")
    book.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    book.add_argument("--out", help="output folder (default: build/book/<profile>/)")
    book.set_defaults(func=_cmd_book)


def _parser_lab(sub) -> None:
    lab = sub.add_parser("lab", help="JupyterLab on the suite (what `make lab` runs)")
    lab.add_argument("--port", type=positive_int, help="port (default: JupyterLab's, 8888 or the next free one)")
    lab.add_argument("--token", help="the access token (default: a random one, printed); an empty one is refused "
                                     "unless --insecure-no-token is given")
    lab.add_argument("--insecure-no-token", action="store_true",
                     help="allow --token \"\": no authentication, anyone reaching the port can run code as you")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.set_defaults(func=_cmd_lab)


def _parser_refresh(sub) -> None:
    refresh = sub.add_parser("refresh", help="re-execute committed notebooks in place (smoke values)")
    refresh.add_argument("notebooks", nargs="*", help="notebook numbers or names (default: all)")
    refresh.set_defaults(func=_cmd_refresh)


def _parser_profiles(sub) -> None:
    profiles = sub.add_parser("profiles", help="list the profiles and their parameters")
    profiles.add_argument("--sync-notebooks", action="store_true",
                          help="write the smoke profile's values (notebooks/profiles/smoke.yaml, where they are stated) "
                               "into every notebook's parameters cell, and list what changed")
    profiles.set_defaults(func=_cmd_profiles)


def _parser_data(sub) -> None:
    data = sub.add_parser("data", help="datasets: status and local generation").add_subparsers(dest="data", required=True)
    data.add_parser("status", help="which datasets are present, where, and how to get the others").set_defaults(
        func=_cmd_data_status
    )
    fetch = data.add_parser("download", help="download a dataset with a public source (checksums verified)")
    fetch.add_argument("dataset", choices=["cifar10", "cifar100", "fmnist", "cifar10c", "cifar100c"],
                       help="the dataset to download into the data root")
    fetch.set_defaults(func=_cmd_data_download)
    prepare = data.add_parser("prepare", help="generate a corrupted test set in the CIFAR-C layout")
    prepare.add_argument("dataset", choices=["cifar10c", "cifar100c", "fmnistc"],
                         help="the corrupted test set to generate from its clean test set")
    prepare.add_argument("--severities", type=int, nargs="+", default=[5], choices=range(1, 6), metavar="{1..5}",
                         help="the severities to generate (default: 5, the paper's)")
    prepare.add_argument("--corruptions", nargs="+", type=names_of("corruption"),
                         help="the corruptions to generate (default: all 15)")
    prepare.add_argument("--seed", type=int, default=0, help="seed of the corruptions' random draws")
    prepare.set_defaults(func=_cmd_data_prepare)

    pack = data.add_parser("pack-cifar10", help="pack the CIFAR-10 image folder into one lzma file (for a GPU machine)")
    pack.add_argument("--out", required=True, help="the packed file, e.g. .gpu_carry/cifar10.xz")
    pack.add_argument("--root", help="the image folder (default: $DART_CIFAR10_DIR)")
    pack.add_argument("--preset", type=int, default=6, help="lzma preset (default 6)")
    pack.set_defaults(func=_cmd_data_pack)


def _parser_travel(sub) -> None:
    travel = sub.add_parser("travel", help="what goes to a GPU machine (at most 64 MiB) and what comes back "
                                           "(parts of at most 16 MiB)").add_subparsers(dest="travel", required=True)
    tcopy = travel.add_parser("copy", help="the tracked files a GPU run of the notebooks reads, into a new folder")
    tcopy.add_argument("--out", required=True, type=Path, help="a new folder (sent instead of the repository)")
    tcopy.add_argument("--pack-cifar10", action="store_true",
                       help="also pack $DART_CIFAR10_DIR into OUT/.gpu_carry/ (python -m dartlib data pack-cifar10)")
    tcopy.add_argument("--carry", nargs="*", type=Path, help="other files to put under OUT/.gpu_carry/")
    tcopy.set_defaults(func=_cmd_travel_copy)
    travel.add_parser("patterns", help="the same choice as git sparse-checkout patterns (for a checkout whose working "
                                       "tree travels)").set_defaults(func=_cmd_travel_patterns)
    tsplit = travel.add_parser("split", help="a file in parts of at most 16 MiB plus a sha256 manifest")
    tsplit.add_argument("file", type=Path, help="the file to split")
    tsplit.add_argument("--out", required=True, type=Path, help="folder for the parts and the manifest")
    tsplit.add_argument("--part-mib", type=part_size_mib, default=16.0, help="the largest part, MiB (default 16)")
    tsplit.set_defaults(func=_cmd_travel_split)
    tjoin = travel.add_parser("join", help="join parts, checking every part's and the whole file's sha256")
    tjoin.add_argument("manifest", type=Path, help="the <file>.parts.json written by `travel split`")
    tjoin.add_argument("--out", type=Path, help="the joined file (default: its name beside the manifest)")
    tjoin.set_defaults(func=_cmd_travel_join)
    tunpack = travel.add_parser("unpack-cifar10", help="on the GPU machine: the packed CIFAR-10 as an image folder "
                                                      "the notebooks read (prints the exports to make)")
    tunpack.add_argument("--packed", required=True, type=Path, help="the file of `data pack-cifar10`")
    tunpack.add_argument("--out", required=True, type=Path, help="a folder for the image folder and frost photographs")
    tunpack.set_defaults(func=_cmd_travel_unpack)


def _parser_bench(sub) -> None:
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


def _parser_claims(sub) -> None:
    claims = sub.add_parser("claims", help="check the paper's claims (data/paper/claims.yaml) on a profile's results")
    claims.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    claims.set_defaults(func=_cmd_claims)


def _parser_grid(sub) -> None:
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


def _parser_validate_alpha(sub) -> None:
    valid = sub.add_parser("validate-alpha", help="choose alpha for a profile's backbone on held-out training data")
    valid.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    valid.add_argument("--alphas", type=float_list, default="0.1,1,10", help="comma-separated candidates (default 0.1,1,10)")
    valid.add_argument("--epochs", type=positive_int, default=VALIDATION_EPOCHS, help="intermediate epochs of each candidate's g_phi")
    valid.add_argument("--heldout", type=positive_int, default=500, help="training images per class held out")
    valid.add_argument("--max-loss", type=non_negative_float, default=0.5, help="accuracy points DART may lose on held-out i.i.d.")
    valid.add_argument("--holdout-corruptions",
                       help="comma-separated held-out corruptions (speckle_noise, gaussian_blur, saturate) applied to the "
                            "held-out images at the profile's severity; the rule then reads their mean i.i.d. loss")
    valid.add_argument("--threads", type=positive_int, help="torch CPU threads for this process")
    valid.set_defaults(func=_cmd_validate_alpha)


def _parser_choose_alpha(sub) -> None:
    choose = sub.add_parser(
        "choose-alpha", help="choose alpha for your own model on labelled data (no test data): per candidate, DART's "
                             "gain over BNAdapt on held-out batches without and with label shift, with SEs; the paper's "
                             "alpha unless another scores more than 2 SE better")
    choose.add_argument("--model", required=True,
                        help="FILE.py:NAME or package.module:NAME (a model, or a function returning one), or a TorchScript "
                             ".pt file (torch.jit.save); it maps float N x C x H x W in [0, 1] "
                             "to logits and has BatchNorm layers")
    choose.add_argument("--weights", help="a state dict file loaded into --model (torch.save(model.state_dict()))")
    choose.add_argument("--data", required=True,
                        help="labelled training images: an .npz with arrays 'images' (uint8 N x H x W x C or float "
                             "N x C x H x W in [0, 1]) and 'labels', or a data set's name (its training split)")
    choose.add_argument("--num-classes", type=positive_int, help="the model's number of outputs (default: largest label + 1)")
    choose.add_argument("--alphas", type=float_list, default="0.1,0.3,1,3,10,30", help="comma-separated candidates")
    choose.add_argument("--keep", type=non_negative_float,
                        help="the alpha kept unless it loses too much (default: the paper's, DartConfig.alpha)")
    choose.add_argument("--shift-weight", type=non_negative_float, default=0.5,
                        help="weight w in [0, 1] of the gain under label shift in each candidate's score, "
                             "(1 - w) x gain without shift + w x gain under shift")
    choose.add_argument("--validation", help="labelled images the model was not trained on (.npz with 'images' and "
                                             "'labels'): scored instead of a held-out part of --data, and g_phi "
                                             "trained on all of --data")
    choose.add_argument("--heldout", type=positive_int, help="training images per class held out (default: a fifth of "
                                                             "the smallest class, at most 500)")
    choose.add_argument("--epochs", type=positive_int, help="intermediate epochs of each candidate's g_phi; validate "
                                                            "with the epochs you will deploy (default: DartConfig's)")
    choose.add_argument("--n-dir", type=positive_int, help="Dirichlet chunks over D_int, N_dir (default: DartConfig's)")
    choose.add_argument("--per-class", type=positive_int, help="D_int images per class (default: all that every class has)")
    choose.add_argument("--batch-size", type=positive_int, help="intermediate batch size (default: DartConfig's)")
    choose.add_argument("--test-batch-size", type=positive_int, help="batch size of the held-out streams (default: the "
                                                                     "paper's test batch, protocols.TEST_BATCH_SIZE)")
    choose.add_argument("--seed", type=int, default=0, help="seed of the held-out split, D_int and g_phi")
    choose.add_argument("--device", help="cpu, cuda or cuda:<index> (default: the GPU when torch sees one)")
    choose.add_argument("--out", help="write the held-out table to this CSV file")
    choose.add_argument("--threads", type=positive_int, help="torch CPU threads for this process")
    choose.add_argument("--quiet", action="store_true", help="no progress bar")
    choose.set_defaults(func=_cmd_choose_alpha)


def _parser_train_refiners(sub) -> None:
    tref = sub.add_parser("train-refiners", help="train (or resume) notebook 15's refiners g_phi (e.g. the paper's "
                                                "configuration, alpha0.1-epochs50): hours of one core, resumable by epoch")
    tref.add_argument("--profile", default=DEFAULT_PROFILE, help="the profile whose source model and settings they use")
    tref.add_argument("--paper-tables", action="store_true",
                      help="instead of --variants: every refiner notebooks 07 and 08 need at the paper's configuration "
                           "(50 epochs at alpha 0.1; dartlib.studies.paper_refiners), one resumable pass at a time")
    tref.add_argument("--passes", help="with --paper-tables: a comma-separated subset of batch64, unif-lt, batch32, "
                                       "batch128 (default: all, in that order)")
    tref.add_argument("--variants",
                      help="comma-separated variants of dartlib.studies.diagnosis.VARIANTS; those sharing their "
                           "intermediate batches train in one pass (name one to resume its own pass's state file)")
    tref.add_argument("--threads", type=positive_int, help="torch CPU threads (1 reproduces the committed refiners)")
    tref.set_defaults(func=_cmd_train_refiners)


def _parser_train(sub) -> None:
    train = sub.add_parser("train", help="train (or resume) a source model; the checkpoint lands under the data root")
    train.add_argument("--profile", help="take dataset, arch, recipe and seed from this profile (the options below "
                                         "override its values; default: none, then --dataset, --arch and --recipe "
                                         "are needed)")
    train.add_argument("--dataset", type=names_of("dataset"), help="the training set (default: the profile's "
                                                                   "source_dataset)")
    train.add_argument("--arch", type=names_of("architecture"), help="the backbone (default: the profile's source_arch)")
    train.add_argument("--recipe", type=names_of("recipe"), help="the training recipe: epochs, optimiser, schedule, "
                                                                 "augmentation (default: the profile's source_recipe)")
    train.add_argument("--seed", type=int, help="seed of the initialisation and the batches (default: the profile's "
                                                "seed, else 0)")
    train.add_argument("--max-epochs", type=positive_int, help="stop after this many epochs in this call (the next call resumes)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--directory", type=Path,
                       help="train into this folder instead of the data root's checkpoints/ (where the committed "
                            "models are, which are reused): retrains and leaves them alone")
    train.set_defaults(func=_cmd_train)


def _parser_artefacts(sub) -> None:
    arte = sub.add_parser("artefacts", help="the committed trained models (data/checkpoints/MANIFEST.json)")
    arte.add_argument("action", choices=["verify", "manifest", "compact-logs"],
                      help="verify: every listed file present with its sha256; manifest: rewrite the list; "
                           "compact-logs: keep every 50th step of the training logs of the refiner FILES")
    arte.add_argument("files", nargs="*", type=Path, help="compact-logs: the refiner files (data/checkpoints/*.pt)")
    arte.set_defaults(func=_cmd_artefacts)


def _parser_reference(sub) -> None:
    ref = sub.add_parser("reference", help="a profile's results against the stored values (tests/golden/<profile>/)")
    ref.add_argument("action", choices=["check", "update"],
                     help="check: compare within the stated tolerances; update: store the current results")
    ref.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    ref.set_defaults(func=_cmd_reference)


# One function a command, in the order `python -m dartlib --help` lists them.
COMMAND_PARSERS = (_parser_run, _parser_book, _parser_lab, _parser_refresh, _parser_profiles, _parser_data,
                   _parser_travel, _parser_bench, _parser_claims, _parser_grid, _parser_validate_alpha,
                   _parser_choose_alpha, _parser_train_refiners, _parser_train, _parser_artefacts, _parser_reference)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dartlib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMAND_PARSERS:
        add(sub)
    return parser


_ARGV: list[str] | None = None  # the arguments of the running command (its resume hint repeats them)


def _stop_on_signal(signum: int, _frame) -> None:
    """SIGTERM or SIGHUP (``kill``, make passing on its own SIGTERM, a closed terminal) stop the
    command as Ctrl-C does: files being written are removed, kernels and workers are shut down, and
    a command that resumes says how."""
    raise KeyboardInterrupt


def signals_stop_the_command() -> None:
    """Installed by ``python -m dartlib`` (not by a test calling :func:`main`): SIGTERM and SIGHUP
    raise KeyboardInterrupt, and under make the process ends with make."""
    import os
    import signal

    if threading_main():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _stop_on_signal)
    # Under make (MAKELEVEL set), this process also ends when make is killed outright (SIGKILL): make
    # cannot pass that on, the kernel can (Linux's parent-death signal).
    if os.environ.get("MAKELEVEL") and sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# Exit statuses (docs/cli.md lists them): what a script calling the suite can rely on.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MISSING, EXIT_DAMAGED, EXIT_NOT_WRITABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5, 130


def _one_line_warnings():
    """The suite's warnings (stale rows recomputed, a cache discarded) as one ``warning:`` line on
    stderr each, while a command runs."""
    import contextlib
    import warnings

    @contextlib.contextmanager
    def installed():
        show = warnings.showwarning

        def one_line(message, category, filename, lineno, file=None, line=None):
            if category.__module__.startswith("dartlib"):
                print(f"warning: {message}", file=sys.stderr if file is None else file)
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = one_line
        try:
            yield
        finally:
            warnings.showwarning = show

    return installed()


def _where(err: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``err``'s traceback in the suite's code."""
    import traceback

    frames = [f for f in traceback.extract_tb(err.__traceback__) if "dartlib" in f.filename.replace("\\", "/")]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {Path(f.filename).name}:{f.lineno} in {f.name})"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _runs_here(command: str) -> bool:
    """Whether ``command`` can run from here: an installed copy (no checkout) runs only the commands
    of :data:`WITHOUT_CHECKOUT`; the others say so in one line."""
    from dartlib.paths import from_checkout

    if command in WITHOUT_CHECKOUT or from_checkout():
        return True
    print(f"error: `python -m dartlib {command}` works on a checkout of the repository (its notebooks, "
          f"profiles and committed rows), which an installed copy does not hold: clone the repository and run it "
          f"there; an installed copy runs {' and '.join(WITHOUT_CHECKOUT)} (docs/install.md)", file=sys.stderr)
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m dartlib``: the command's exit status; every error is one line on stderr naming the
    file or variable, what is wrong and the remedy (exit statuses: :data:`EXIT_USAGE` and the others
    above, listed in docs/cli.md)."""
    import json
    import lzma

    from dartlib.data.files import DamagedFileError, as_write_error
    from dartlib.data.travel import PartsError
    from dartlib.environment import EnvironmentSettingError, check_environment, setting
    from dartlib.experiments.grid import ClaimWaitTimeout
    from dartlib.profiles import ProfileError

    global _ARGV
    argv = sys.argv[1:] if argv is None else argv
    _ARGV = list(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unknown_options(parser, args, extra)
    if not _runs_here(args.command):
        return EXIT_MISSING
    try:
        check_environment()  # every variable the suite reads, before anything is written
    except EnvironmentSettingError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with _one_line_warnings():
            return args.func(args)
    except KeyboardInterrupt:
        hint = f"; resume with: python -m dartlib {shlex.join(argv)}" if args.command in RESUMABLE else ""
        print(f"interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ClaimWaitTimeout as err:  # names the cell, the process holding it and what to do
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except (DamagedFileError, PartsError) as err:  # each names the file, what is wrong and the remedy
        print(f"error: {err}", file=sys.stderr)
        return EXIT_DAMAGED
    except (UnknownNameError, ProfileError, EnvironmentSettingError) as err:  # bad settings: nothing computed
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as err:  # DataMissingError says what is missing and how to get it
        text = str(err) if err.filename is None else f"{err.filename}: {err.strerror}; check the path given"
        print(f"error: {text}", file=sys.stderr)
        return EXIT_MISSING
    except NotADirectoryError as err:
        print(f"error: {err.strerror}", file=sys.stderr)
        return EXIT_NOT_WRITABLE
    except FileExistsError as err:  # a new folder was asked for (travel copy --out): the message names it
        print(f"error: {err.strerror if err.filename else _first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:  # no space, no permission, a read-only device: the path and what to free or change
        problem = as_write_error(err)
        if problem is None:
            problem = (f"{err.filename}: {err.strerror}; check that the path can be read and written" if err.filename
                       else err.strerror or _first_line(err))
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_NOT_WRITABLE
    except (json.JSONDecodeError, lzma.LZMAError) as err:  # a reader that did not name its file
        print(f"error: a damaged {'JSON' if isinstance(err, json.JSONDecodeError) else 'lzma'} file "
              f"({_first_line(err)}){_where(err)}; fetch or write it again", file=sys.stderr)
        return EXIT_DAMAGED
    except ModuleNotFoundError as err:  # an optional command without its extra: the line that installs it
        from dartlib.extras import missing_module_message

        line = missing_module_message(err, command=args.command)
        if line is None or setting("DART_TRACEBACK") == "1":
            raise
        print(f"error: {line}", file=sys.stderr)
        return EXIT_MISSING
    except Exception as err:  # not a failure the suite knows: still one line, with where it happened
        if setting("DART_TRACEBACK") == "1":
            raise
        print(f"error: {type(err).__name__}: {_first_line(err)}{_where(err)}; this is not a failure the suite "
              f"knows how to explain: rerun with DART_TRACEBACK=1 for the full traceback and report it",
              file=sys.stderr)
        return EXIT_FAILED
