"""``train``, ``train-refiners`` and ``artefacts``: the source models and refiners g_phi trained
(resumable), and the committed trained files checked against their manifest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dartlib.cli.common import (DATA_ROOT_CHANGE, EXIT_DAMAGED, EXIT_MISSING, data_folders, grid_settings, names_of,
                                positive_int, writable)
from dartlib.profiles import DEFAULT_PROFILE


def _cmd_train(args: argparse.Namespace) -> int:
    """The source model of ``--profile`` (or of ``--dataset/--arch/--recipe``, alone), then, for a
    profile, the rest of its training stage (:func:`_training_stage`)."""
    from dartlib.models.checkpoints import checkpoint_path, load_checkpoint
    from dartlib.models.training import train_source
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs

    from dartlib.experiments.settings import Settings

    p = Settings.from_params(load_profile(args.profile)) if args.profile else None
    dataset = args.dataset or (p.source.dataset if p else None)
    arch = args.arch or (p.source.arch if p else None)
    recipe = args.recipe or (p.source.recipe if p else None)
    if not (dataset and arch and recipe):
        raise SystemExit("give --profile, or all of --dataset, --arch and --recipe")
    grids = _grid_names(args.grids)  # checked before anything trains
    if grids is None:
        return 2
    seed = args.seed if args.seed is not None else (p.seed if p else 0)
    target = checkpoint_path(dataset=dataset, arch=arch, recipe=recipe, seed=seed, directory=args.directory).parent
    writable((target, "train into another folder with --directory DIR" if args.directory else DATA_ROOT_CHANGE),
             *([] if args.directory else data_folders()[:1]))
    path = train_source(dataset=dataset, arch=arch, recipe=recipe, seed=seed, progress=not args.quiet,
                        max_epochs=args.max_epochs, directory=args.directory)
    if path.name.endswith(".partial.pt"):
        print(f"stopped after --max-epochs; resume with the same command: {path}")
        return 0
    _, meta = load_checkpoint(path)
    print(f"{path}: clean test accuracy {meta['clean_test_accuracy']:.2f}% after {meta['epochs']} epochs")
    source_only = any(v is not None for v in (args.dataset, args.arch, args.recipe, args.seed, args.directory))
    if p is None or source_only:
        return 0
    return _training_stage(p, grids=grids, progress=not args.quiet)


def _grid_names(grids: str | None) -> list[str] | None:
    """The grids of ``--grids`` (comma-separated names of :data:`~dartlib.studies.grids.GRIDS`, or all);
    None, after an error line listing the valid names, where one is unknown."""
    from dartlib.studies.grids import GRIDS

    names = list(GRIDS) if grids == "all" else [n for n in (grids or "").split(",") if n]
    unknown = [n for n in names if n not in GRIDS]
    if unknown:
        print(f"error: unknown grid {', '.join(unknown)}; valid: {', '.join(GRIDS)}, or all", file=sys.stderr)
        return None
    return names


def _training_stage(settings, *, grids: list[str], progress: bool) -> int:
    """The rest of the profile's training stage after its source model: the corrupted test sets, g_phi
    and the methods' trained inputs (:func:`~dartlib.experiments.training_stage.train_profile_inputs`),
    then each of ``grids``' own (:attr:`~dartlib.studies.grids.GridSpec.train`)."""
    from dartlib.experiments.training_stage import train_profile_inputs
    from dartlib.studies.grids import GRIDS

    writable(*data_folders())
    train_profile_inputs(settings=settings, progress=progress)
    print(f"{settings.profile}: the corrupted test sets (severity {settings.test.severity}), g_phi and the methods' "
          f"trained inputs trained (or found) beside {settings.checkpoint().name}")
    for name in grids:
        GRIDS[name].train(settings=grid_settings(settings, name), progress=progress)
        print(f"{settings.profile}: grid {name}'s trained inputs trained (or found)")
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
    writable(*data_folders())
    return settings


def _train_paper_table_refiners(args: argparse.Namespace) -> int:
    """Notebooks 07 and 08's refiners at the paper's configuration, pass by pass in the order of
    :data:`dartlib.studies.paper_refiners.PASS_ORDER` (``--passes``: a subset), each resumable."""
    from dartlib.dart.intermediate import load_or_train_refiners
    from dartlib.experiments.training_stage import train_source_inputs
    from dartlib.studies.paper_refiners import PASS_ORDER, paper_table_refiners

    wanted = [n for n in (args.passes or ",".join(PASS_ORDER)).split(",") if n]
    unknown = sorted(set(wanted) - set(PASS_ORDER))
    if unknown:
        print(f"error: unknown pass {', '.join(unknown)}; valid: {', '.join(PASS_ORDER)}", file=sys.stderr)
        return 2
    settings = _training_settings(args)
    passes = paper_table_refiners(settings=settings)
    setup = train_source_inputs(settings=settings)
    for name in wanted:
        configs = passes[name]
        print(f"{args.profile}: pass {name}: {len(configs)} refiners ({', '.join(configs)})", flush=True)
        load_or_train_refiners(setup.checkpoint, setup.model, setup.train, list(configs.values()), progress=True)
        print(f"{args.profile}: pass {name} trained (or found) beside {setup.checkpoint.name}", flush=True)
    return 0


def _cmd_artefacts(args: argparse.Namespace) -> int:
    from dartlib.models import artefacts

    if args.action == "compact-logs":
        from dartlib.dart.intermediate import compact_refiner_file

        writable((artefacts.MANIFEST.parent, ""))
        done = [p.name for p in args.files if compact_refiner_file(p)]
        print(f"compacted the training logs of {len(done)} refiner file(s){': ' + ', '.join(done) if done else ''}; "
              f"then: python -m dartlib artefacts manifest")
        return 0
    if args.action == "manifest":
        writable((artefacts.MANIFEST.parent, ""))
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


def add_train(sub) -> None:
    train = sub.add_parser("train", help="the training stage: a profile's source model, corrupted test sets, g_phi and "
                                         "the methods' trained inputs (and --grids'), each trained or generated "
                                         "where absent (or one source model alone); under the data root")
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
    train.add_argument("--grids", help="with --profile: also these grids' own trained inputs (comma-separated names "
                                       "of `python -m dartlib grid`, or all)")
    train.add_argument("--max-epochs", type=positive_int, help="stop after this many epochs in this call (the next call resumes)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--directory", type=Path,
                       help="train into this folder instead of the data root's checkpoints/ (where the committed "
                            "models are, which are reused): retrains and leaves them alone")
    train.set_defaults(func=_cmd_train)


def add_train_refiners(sub) -> None:
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


def add_artefacts(sub) -> None:
    arte = sub.add_parser("artefacts", help="the committed trained models (data/checkpoints/MANIFEST.json)")
    arte.add_argument("action", choices=["verify", "manifest", "compact-logs"],
                      help="verify: every listed file present with its sha256; manifest: rewrite the list; "
                           "compact-logs: keep every 50th step of the training logs of the refiner FILES")
    arte.add_argument("files", nargs="*", type=Path, help="compact-logs: the refiner files (data/checkpoints/*.pt)")
    arte.set_defaults(func=_cmd_artefacts)
