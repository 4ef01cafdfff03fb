"""dartlib: the library behind the DART reproducibility notebooks.

DART is "Label Distribution Shift-Aware Prediction Refinement for Test-Time Adaptation".
Notebooks under ``notebooks/`` are thin; all logic lives here, in layers that import only
downward (``tests/test_layers.py`` checks it):

=============  ===========================================================================
layer          holds
=============  ===========================================================================
(base)         ``paths``, ``registry``, ``devices``, ``profiles``: where things are, named
               choices, the compute device, the profile files
``data``       sources and their on-disk formats, corruptions, test protocols (LT,
               online imbalance), preparation, downloads, packing, image augmentation
``models``     backbones, source training, accuracy over a data set, committed artefacts
``dart``       the refinement module g_phi (Eqs. 2-4), its intermediate training (Alg. 1),
               DART-split (Alg. 3)
``tta``        the test-time methods behind one base class (refinement around each forward)
``experiments``  cells and the results store, the test-time engine, settings from a
               profile, and the grids: Table 1, online imbalance, large benchmarks,
               ablations, alpha validation, backbone study, the GPU one-command run
``analysis``   the toy Gaussian model, confusion, prediction deviation, HOC, effects
``reporting``  the paper's numbers, tables beside the paper, claims, figures
``perf``       throughput, cost tables, corruption speed
(entry)        ``cli``, ``runner`` (papermill), ``__main__``
=============  ===========================================================================

Modules that moved when the package was layered raise an ImportError naming their new place.
"""

from __future__ import annotations

import importlib.abc
import sys

__version__ = "0.1.0"

# former flat modules -> their place in the layers (user code importing an old path gets told where)
MOVED_MODULES = {
    "dartlib.models": "dartlib.models.backbones", "dartlib.training": "dartlib.models.training",
    "dartlib.evaluation": "dartlib.models.evaluation", "dartlib.artefacts": "dartlib.models.artefacts",
    "dartlib.intermediate": "dartlib.dart.intermediate", "dartlib.table1": "dartlib.experiments.engine "
    "(the Table 1 grid: dartlib.experiments.table1)", "dartlib.online": "dartlib.experiments.online",
    "dartlib.benchmarks": "dartlib.experiments.benchmarks", "dartlib.ablations": "dartlib.experiments.ablations",
    "dartlib.validation": "dartlib.experiments.validation", "dartlib.backbone_study": "dartlib.experiments.backbone_study",
    "dartlib.gpu_fast": "dartlib.experiments.gpu_fast", "dartlib.gpu_run": "dartlib.experiments.gpu_run",
    "dartlib.toy": "dartlib.analysis.toy", "dartlib.confusion": "dartlib.analysis.confusion",
    "dartlib.deviation": "dartlib.analysis.deviation", "dartlib.hoc": "dartlib.analysis.hoc",
    "dartlib.effects": "dartlib.analysis.effects", "dartlib.paper": "dartlib.reporting.paper",
    "dartlib.report": "dartlib.reporting.tables", "dartlib.claims": "dartlib.reporting.claims",
    "dartlib.figures": "dartlib.reporting.figures", "dartlib.data_plots": "dartlib.reporting.data_figures",
    "dartlib.toy_plots": "dartlib.reporting.toy_figures", "dartlib.reference": "dartlib.reporting.reference",
    "dartlib.bench": "dartlib.perf.throughput", "dartlib.costs": "dartlib.perf.costs",
    "dartlib.data.corruption_bench": "dartlib.perf.corruption_speed",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Consulted after every real finder: an old module path gets an error naming the new one."""

    def find_spec(self, fullname, path, target=None):
        if fullname in MOVED_MODULES and fullname != "dartlib.models":
            raise ModuleNotFoundError(f"{fullname} moved to {MOVED_MODULES[fullname]} when dartlib was layered "
                                      "(see dartlib/__init__.py and ARCHITECTURE.md)", name=fullname)
        return None


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
