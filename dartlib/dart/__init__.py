"""Layer ``dart``: the refinement module g_phi and its test-time use (``refiner``: Eqs. 2-4,
Algorithm 2), its intermediate training with Dirichlet-sampled batches (``intermediate``:
Algorithm 1; DART-split, Algorithm 3). Imports ``models``, ``data`` and the base.

The refiner's public names are re-exported here (``from dartlib.dart import DartConfig, Refiner``),
as they were importable from the former ``dartlib.dart`` module."""

from dartlib.dart.refiner import (  # noqa: F401
    AdditiveRefinementModule, DartConfig, RefinementModule, Refiner, SeverityDetector, adaptive_temperature,
    additive_refine, batch_statistics, config_dict, matched_hidden, norm_preserving, refine,
)
from dartlib.models.training import cosine_lr  # noqa: F401
