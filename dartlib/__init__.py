"""dartlib: the library behind the DART reproducibility notebooks.

DART is "Label Distribution Shift-Aware Prediction Refinement for Test-Time Adaptation".
Notebooks under ``notebooks/`` are thin; all logic lives here, in layers that import only
downward (``tests/test_layers.py`` checks it):

=============  ===========================================================================
layer          holds
=============  ===========================================================================
(base)         ``paths``, ``registry``, ``devices``, ``settings_tree``, ``profiles``,
               ``environment``, ``provenance``, ``extras``: where things are, named choices,
               the compute device, every setting with its default, the profile files, what
               an executed notebook read
``data``       sources and their on-disk formats, corruptions, test protocols (LT,
               online imbalance), preparation, downloads, packing, augmentation, travel
``models``     backbones, source training, accuracy over a data set, committed artefacts,
               resume states, a user's own model
``dart``       the refinement module g_phi (Eqs. 2-4), its intermediate training (Alg. 1),
               DART-split (Alg. 3), fitting g_phi for a user's classifier
``tta``        the test-time methods behind one base class (refinement around each forward)
``experiments``  cells and the results store, the test-time engine, settings from a
               profile, keyed tables, grids on Ray
``analysis``   the toy Gaussian model, confusion, prediction deviation, HOC, effects, noise
``perf``       throughput, cost tables, corruption speed
``reporting``  the paper's numbers, tables beside the paper, figures
``studies``    one module per paper section: its cells, tables and figures; the grids
``book``       the claims ledger, the results book and the generated results page
(entry)        ``cli``, ``runner`` (papermill), ``schema``, ``__main__``
=============  ===========================================================================
"""

from __future__ import annotations

__version__ = "0.1.0"

import os as _os

if _os.environ.get("DART_READS_LOG"):  # an executed notebook's kernel: record the files it reads (dartlib.provenance)
    from pathlib import Path as _Path

    from dartlib.provenance import record_reads as _record_reads

    _record_reads(_Path(_os.environ["DART_READS_LOG"]))
