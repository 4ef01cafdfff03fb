"""The refiners g_phi that notebooks 07 (ablations, Tables 3-5, DART-split) and 08 (sensitivity:
alpha, intermediate batch x width, epochs) need at the paper's configuration (Appendix A: 50
intermediate epochs at alpha 0.1; a table that varies a setting varies only that one), grouped into
the training passes that share their intermediate batches, in the order of the verdicts they decide.

A profile whose own ablation refiners are a shortcut (``ablation_epochs``, ``ablation_alpha``) gets
these by :data:`PAPER_ABLATION` on top of its settings; the refiner files are named by their
configuration (:func:`dartlib.dart.intermediate.refiner_path`), so a notebook that later asks for the
same configuration finds them. ``python -m dartlib train-refiners --profile cpu --paper-tables``
trains them, one resumable pass at a time (its state saved after every epoch)."""

from __future__ import annotations

from dataclasses import replace

from dartlib.dart.refiner import DartConfig
from dartlib.experiments.settings import Settings
from dartlib.studies.ablations import VARIANTS as ABLATION_VARIANTS
from dartlib.studies.ablations import ablation_base_config, variant_config
from dartlib.studies.sensitivity import refiner_changes

# The paper's g_phi for the ablation and sensitivity tables: 50 epochs at alpha 0.1 (Appendix A),
# and the epochs table's own rows (its appendix table: 1, 5, 10, 25 and 50; 2 kept beside them).
PAPER_ABLATION: dict = {"ablation_alpha": 0.1, "ablation_epochs": 50, "ablation_n_dir": 250, "ablation_per_class": 0,
                        "epochs_grid": [1, 2, 5, 10, 25]}

# The passes in the order of the verdicts they decide: the suspected artefacts of the shortcut first
# (DART-split, p_bar-only input, W vs b, additive vs affine, alpha = 0, with the alpha, width and
# epochs rows that read the same batches at little extra cost), the sampling ablation, then the
# robustness grid's other intermediate batch sizes.
PASS_ORDER: tuple[str, ...] = ("batch64", "unif-lt", "batch32", "batch128")


def _pass_name(config: DartConfig) -> str:
    return "unif-lt" if config.sampling == "unif-lt" else f"batch{config.batch_size}"


def paper_table_refiners(*, settings: Settings) -> dict[str, dict[str, DartConfig]]:
    """{pass name: {the tables' refiner name: config}} at the paper's configuration, passes in
    :data:`PASS_ORDER`; a config that several tables name appears once, under its first name."""
    paper = settings.replace(**PAPER_ABLATION)
    base = ablation_base_config(paper)
    named = {f"ablation {n}": variant_config(n, base) for n in ABLATION_VARIANTS}
    named |= {f"sensitivity {n}": replace(base, **c) for n, c in refiner_changes(paper).items()}
    passes: dict[str, dict[str, DartConfig]] = {name: {} for name in PASS_ORDER}
    seen: set[DartConfig] = set()
    for name, config in named.items():
        if config in seen:
            continue
        seen.add(config)
        passes[_pass_name(config)][name] = config
    return passes
