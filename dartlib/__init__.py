"""dartlib: the library behind the DART reproducibility notebooks.

DART is "Label Distribution Shift-Aware Prediction Refinement for Test-Time Adaptation".
Notebooks under ``notebooks/`` are thin; all logic lives here.
"""

__version__ = "0.1.0"
