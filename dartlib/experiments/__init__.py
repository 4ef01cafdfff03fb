"""Layer ``experiments``: the engine every study runs on. Cells and the results store (``grid``),
per-image outcomes beside a row (``outcomes``), the test-time engine that runs a cell and a list
of cells (``engine``), settings built from a profile (``settings``), the source model the notebooks
share (``source_setup``) and grids on Ray (``distributed``). The same code runs on a GPU
(:mod:`dartlib.devices`). Imports ``tta``, ``dart``, ``models``, ``data`` and the base."""
