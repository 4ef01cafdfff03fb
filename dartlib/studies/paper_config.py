"""Table 1 and CIFAR-10C-imb at the paper's g_phi (Appendix A: 50 intermediate epochs at alpha
0.1) on a profile whose own refiner (``dart_epochs``, ``dart_alpha``) is a shortcut: notebook 06's
section "At the paper's g_phi", beside the profile's rows (``table1.csv``) and the paper's.

The refiners are notebook 15's variants of the paper's configuration (:data:`PAPER_VARIANTS`: g_phi
seeds 0, 1 and 2), the cells are keyed by those names, and each seed's streams are drawn with its
seed, as Section 5.1's "mean and std over seeds" has them. The grid holds, in the order a grid
stopped part-way should have finished them:

1. BNAdapt without DART, with the seed-0 refiner and with the profile's own on CIFAR-10C-LT (every
   rho of ``lt_rhos``) and CIFAR-10C-imb (every IR of ``imb_table_irs``, NoAdapt beside), seed-0
   streams;
2. the same for seeds 1 and 2 on their own streams;
3. the other Table 1 methods without DART, with the seed-0 refiner and with the profile's own on
   CIFAR-10C-LT.

Rows of the same cells with the same input digests are borrowed from Table 1's, the diagnosis's and
the online-imbalance grids' files (:data:`SHARED_RESULTS`)."""

from __future__ import annotations

from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings
from dartlib.studies.diagnosis import SEED_GROUPS, variant_config
from dartlib.studies.table1 import TABLE1_METHODS

PAPER_VARIANTS: tuple[str, ...] = SEED_GROUPS["paper"]
# in this order: the files whose rows carry per-image outcomes first
SHARED_RESULTS = ("table1.csv", "online_imbalance.csv", "diagnosis.csv", "more_settings.csv")


def _lt(settings: Settings, seed: int) -> dict:
    limit = settings["table1_stream_limit"]
    return dict(dataset=[settings["corrupted_dataset"]], shift=["lt"], shift_param=[float(r) for r in settings["lt_rhos"]],
                corruption=list(settings["table1_corruptions"]), severity=[settings["severity"]], seed=[seed],
                params=[f"limit={limit}"] if limit else [""])


def _imb(settings: Settings, seed: int) -> dict:
    return dict(dataset=[settings["corrupted_dataset"]], shift=["online-imb"],
                shift_param=[float(r) for r in settings["imb_table_irs"]], corruption=list(settings["imb_corruptions"]),
                severity=[settings["severity"]], seed=[seed], params=[f"subset={settings['imb_subset_size']}"])


def variant_seed(*, settings: Settings, name: str) -> int:
    """The seed of variant ``name``'s refiner, which is also its test streams' seed."""
    return variant_config(settings=settings, name=name).seed


def paper_config_cells(settings: Settings, *, names: list[str] | None = None) -> list[Cell]:
    """The grid of the module docstring for the paper variants ``names`` (default: every one with
    a trained refiner)."""
    names = trained_paper_variants(settings=settings) if names is None else names
    cells: list[Cell] = []
    for name in names:
        seed = variant_seed(settings=settings, name=name)
        # seed 0: the profile's own refiner ("dart") beside, on the same streams
        refiners = ["none", "dart", name] if name == PAPER_VARIANTS[0] else ["none", name]
        if name == PAPER_VARIANTS[0]:
            cells += grid(**_lt(settings, seed), method=["noadapt"], refiner=["none"])  # Table 1's, borrowed
        cells += grid(**_lt(settings, seed), method=["bnadapt"], refiner=refiners)
        cells += grid(**_imb(settings, seed), method=["noadapt"], refiner=["none"])
        cells += grid(**_imb(settings, seed), method=["bnadapt"], refiner=refiners)
    if PAPER_VARIANTS[0] in names:
        others = [m for m in (*TABLE1_METHODS, *settings["extra_methods"]) if m not in ("noadapt", "bnadapt")]
        for method in others:  # method by method: a grid stopped part-way holds whole rows
            cells += grid(**_lt(settings, settings["seed"]), method=[method], refiner=["none", "dart", PAPER_VARIANTS[0]])
    return list(dict.fromkeys(cells))


def profile_cells(settings: Settings) -> list[Cell]:
    """:func:`paper_config_cells` of a profile's trained paper variants."""
    return paper_config_cells(settings)


def trained_paper_variants(*, settings: Settings) -> list[str]:
    """The paper variants whose refiner is saved beside the profile's source checkpoint."""
    from dartlib.dart.intermediate import refiner_path

    checkpoint = settings.checkpoint()
    return [n for n in PAPER_VARIANTS if refiner_path(checkpoint, variant_config(settings=settings, name=n)).is_file()]


def prepare_paper_context(*, settings: Settings, device: str | None = None, progress: bool = False,
                          trained_only: bool = False):
    """Table 1's context (NOTE's IABN model included) with every trained paper variant's refiner
    under its variant name; nothing is trained here (``python -m dartlib train-refiners --profile P
    --variants NAME`` trains one, hours of a CPU core). Returns (context, source metadata)."""
    from dartlib.dart.intermediate import load_or_train_refiners
    from dartlib.experiments.engine import prepare_context
    from dartlib.paths import data_root

    context, meta = prepare_context(settings=settings, device=device, progress=progress, trained_only=trained_only)
    names = trained_paper_variants(settings=settings)
    configs = [variant_config(settings=settings, name=n) for n in names]
    refiners = load_or_train_refiners(settings.checkpoint(), context.source, None, configs, progress=progress)
    context.refiners.update({n: refiner for n, (refiner, _) in zip(names, refiners)})
    context.logits_store = data_root() / "cache"  # BNAdapt's logits, shared with the diagnosis's runs
    return context, meta


def paper_config_results(*, profile: str, compute: bool, progress: bool = False):
    """The rows of the grid (``results/<profile>/paper_config.csv``) for every paper variant, in
    grid order. ``compute``: first compute the missing or stale cells of the trained variants (hours
    on a CPU; ``python -m dartlib grid paper_config --profile P`` does the same outside a notebook),
    borrowing equal rows from :data:`SHARED_RESULTS`; otherwise read the stored rows as they are
    (``grid paper_config --status`` checks them where the test data are)."""
    from dartlib.experiments.engine import run_cells
    from dartlib.experiments.grid import stored_rows
    from dartlib.paths import results_dir

    settings = Settings.from_profile(profile)
    folder = results_dir(profile)
    path = folder / "paper_config.csv"
    if compute:
        context, _ = prepare_paper_context(settings=settings, progress=progress)
        run_cells(profile_cells(settings), context, path=path, experiment="paper_config", progress=progress,
                  reuse=[folder / name for name in SHARED_RESULTS])
        context.save_shared_source()
    return stored_rows(paper_config_cells(settings, names=list(PAPER_VARIANTS)), path=path)
