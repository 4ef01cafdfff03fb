"""The grids that run outside their notebook (``python -m dartlib grid NAME``), beside the method
registry (:data:`dartlib.tta.METHODS`): a new grid has one home, here, and the CLI reads it.

Each grid names its notebook, its training stage (a ``train_*`` taking the profile's
:class:`~dartlib.experiments.settings.Settings` as ``settings``, with ``device`` and ``progress``:
it makes the trained inputs and test sets where absent), how a profile's context is prepared from
them (a ``prepare_*`` with the same arguments, which only loads), the cells of a profile (a function
of its settings), and
the results files of other grids whose rows of the same cells, with the same input digests, it
borrows instead of computing, and, where its cells need contexts of their own, a ``context_of``
taking the settings and the prepared context and giving each cell's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dartlib.experiments.engine import prepare_context
from dartlib.experiments.settings import Settings
from dartlib.experiments.training_stage import train_profile_inputs
from dartlib.registry import Registry
from dartlib.studies import (ablations, all_corruptions, backbone_strength, diagnosis, jpeg_bound, memo_views,
                            online_imbalance, paper_config, sensitivity, table1)


@dataclass(frozen=True)
class GridSpec:
    notebook: str
    description: str
    train: Callable
    prepare: Callable
    cells: Callable[[Settings], list]
    shared_results: tuple[str, ...] = ()
    context_of: Callable | None = None


GRIDS: Registry[GridSpec] = Registry("grid", {
    # the paper's g_phi and NOTE's 30-epoch IABN copy computed beside it: a profile whose own g_phi is
    # the paper's borrows those rows (equal inputs) instead of computing them again
    "table1": GridSpec("06_table1_main", "Table 1's CIFAR-10C-LT block", train_profile_inputs, prepare_context, table1.profile_cells,
                       ("paper_config.csv", "paper_note.csv")),
    "note_report": GridSpec("06_table1_main", "Table 1's NOTE+DART cells with dart_use=report",
                            train_profile_inputs, prepare_context,
                            table1.profile_note_report_cells),
    "online_imbalance": GridSpec("11_online_imbalance", "CIFAR-10C-imb with DART and DART-split", online_imbalance.train_online_inputs,
                                 online_imbalance.prepare_online_context, online_imbalance.profile_cells, online_imbalance.SHARED_RESULTS),
    "ablations": GridSpec("07_ablations", "BNAdapt with every DART variant of Tables 3-5 and DART-split",
                          ablations.train_ablation_inputs, ablations.prepare_ablation_context, ablations.ablation_cells),
    "backbone_study": GridSpec("14_backbone_study", "backbone width and severity", backbone_strength.train_study_inputs,
                               backbone_strength.prepare_study_context,
                               backbone_strength.profile_cells),
    "jpeg_bound": GridSpec("06_table1_main", "the JPEG copy's bound: one more JPEG round trip of the test streams",
                           train_profile_inputs, prepare_context, jpeg_bound.profile_cells, jpeg_bound.SHARED_RESULTS),
    "diagnosis": GridSpec("15_diagnosis", "Table 1's refiner varied one factor at a time, and over seeds",
                          diagnosis.train_diagnosis_inputs, diagnosis.prepare_diagnosis_context, diagnosis.diagnosis_cells, diagnosis.SHARED_RESULTS),
    "paper_config": GridSpec("06_table1_main", "Table 1 and CIFAR-10C-imb at the paper's g_phi (50 epochs, alpha 0.1)",
                             paper_config.train_paper_inputs, paper_config.prepare_paper_context, paper_config.profile_cells,
                             paper_config.SHARED_RESULTS),
    "paper_note": GridSpec("06_table1_main", "NOTE with its IABN copy fine-tuned for the paper's 30 epochs, with and "
                           "without the paper's g_phi", paper_config.train_paper_note_inputs,
                           paper_config.prepare_paper_note_context,
                           paper_config.paper_note_cells),
    "all_corruptions": GridSpec("09_more_settings", "TENT on CIFAR-10C-imb and MEMO on CIFAR-10C-LT over all 15 "
                                "corruptions", train_profile_inputs, prepare_context, all_corruptions.profile_cells,
                                all_corruptions.SHARED_RESULTS, all_corruptions.context_of),
    "sensitivity_all_corruptions": GridSpec("08_sensitivity", "notebook 08's TENT cells (alpha, test batch size) over "
                                            "all 15 corruptions", sensitivity.train_sensitivity_inputs,
                                            all_corruptions.prepare_sensitivity_context,
                                            all_corruptions.sensitivity_cells, all_corruptions.SENSITIVITY_SHARED_RESULTS,
                                            all_corruptions.sensitivity_context_of),
    "memo_views": GridSpec("09_more_settings", "MEMO's cells with the MEMO authors' 32 AugMix views per image, on "
                           "one corruption", train_profile_inputs, prepare_context, memo_views.profile_cells, (), memo_views.context_of),
})


def borrowers_of(experiment: str) -> list[str]:
    """The grids that borrow rows of ``experiment``'s results file (their ``shared_results`` name it):
    a row recomputed there is recomputed in their files too."""
    return [name for name in GRIDS if f"{experiment}.csv" in GRIDS[name].shared_results]
