"""``validate-alpha`` and ``choose-alpha``: DART's alpha chosen on held-out training data, for a
profile's backbone or for a user's own model (docs/using-dart.md)."""

from __future__ import annotations

import argparse

from dartlib.cli.common import PROFILE_HELP, data_folders, float_list, non_negative_float, positive_int, repo_folder, writable
from dartlib.profiles import DEFAULT_PROFILE

VALIDATION_EPOCHS = 2  # g_phi length of ``validate-alpha`` unless --epochs says otherwise


def validation_filename(*, corrupted: bool, epochs: int) -> str:
    """The results file of ``validate-alpha``: the default g_phi length keeps the original names
    (alpha_validation.csv, alpha_validation_corrupted.csv); another length gets its own file."""
    length = "" if epochs == VALIDATION_EPOCHS else f"_epochs{epochs}"
    return f"alpha_validation{'_corrupted' if corrupted else ''}{length}.csv"


def _cmd_validate_alpha(args: argparse.Namespace) -> int:
    import torch

    from dartlib.data.corruptions import HOLDOUT_CORRUPTIONS
    from dartlib.experiments.settings import Settings
    from dartlib.paths import results_dir
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs
    from dartlib.studies.alpha_choice import AlphaSearch, validate_profile_alpha

    if args.threads:
        torch.set_num_threads(args.threads)
    corruptions = [c for c in (args.holdout_corruptions or "").split(",") if c]
    unknown = [c for c in corruptions if c not in HOLDOUT_CORRUPTIONS]
    if unknown:
        raise SystemExit(f"unknown held-out corruption(s) {', '.join(unknown)}; valid: {', '.join(HOLDOUT_CORRUPTIONS)}")
    p = Settings.from_params(load_profile(args.profile))
    writable(repo_folder("results", args.profile), *data_folders())
    search = AlphaSearch(alphas=args.alphas, heldout_per_class=args.heldout, batch_size=p.test.batch_size,
                         max_loss=args.max_loss)
    path = results_dir(args.profile) / validation_filename(corrupted=bool(corruptions), epochs=args.epochs)
    found = validate_profile_alpha(settings=p, paper_alpha=Settings.from_profile("paper").dart.alpha, search=search,
                                   epochs=args.epochs, path=path, holdout_corruptions=corruptions)
    where = f", clean and under {', '.join(corruptions)} at severity {p.test.severity}" if corruptions else ""
    print(f"{args.profile}: {found.meta['arch']} on {p.source.dataset}; g_phi of {args.epochs} epochs on the "
          f"training set less {args.heldout} images per class, scored on those{where} (no test data)")
    print(found.frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    stream = "mean over the corrupted held-out i.i.d. streams" if corruptions else "the held-out i.i.d. stream"
    print(f"chosen alpha: {found.chosen:g} (the paper's {found.config.alpha:g} unless it loses more than "
          f"{args.max_loss:g} points on {stream}); table in {path}")
    return 0


def _cmd_choose_alpha(args: argparse.Namespace) -> int:
    import torch

    from dartlib.dart.fit import SettingError
    from dartlib.dart.refiner import DartConfig
    from dartlib.data.labelled import LabelledDataError, load_labelled
    from dartlib.data.protocols import TEST_BATCH_SIZE
    from dartlib.devices import default_device
    from dartlib.models.user_model import ModelSpecError, load_model
    from dartlib.studies.alpha_choice import AlphaSearch, select_alpha

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model = load_model(args.model, weights=args.weights)
        images, labels = load_labelled(args.data)
        validation = load_labelled(args.validation) if args.validation else None
    except (ModelSpecError, LabelledDataError) as err:  # the message names the option and the file
        raise SystemExit(str(err)) from None
    num_classes = args.num_classes or int(labels.max()) + 1
    given = {"alpha": args.keep, "epochs": args.epochs, "n_dir": args.n_dir, "batch_size": args.batch_size}
    config = DartConfig(**{k: v for k, v in given.items() if v is not None}, per_class=args.per_class, seed=args.seed)
    try:
        search = AlphaSearch(alphas=args.alphas, heldout_per_class=args.heldout,
                             batch_size=args.test_batch_size or TEST_BATCH_SIZE, shift_weight=args.shift_weight)
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


def add_validate_alpha(sub) -> None:
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


def add_choose_alpha(sub) -> None:
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
