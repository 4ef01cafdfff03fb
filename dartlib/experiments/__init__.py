"""Layer ``experiments``: cells and the results store (``grid``), the test-time engine that runs a
cell (``engine``), settings built from a profile (``settings``), and the grids of the notebooks:
Table 1 (``table1``), online imbalance (``online``), the large benchmarks (``benchmarks``),
ablations (``ablations``), alpha validation (``validation``), the backbone study
(``backbone_study``), and the notebooks' studies. The same code runs on a GPU
(:mod:`dartlib.devices`). Imports ``tta``, ``dart``, ``models``, ``data`` and the base."""

