"""Layer ``studies``: one module per paper section, each holding what its section computes: its
cells, the context they share and how they run on the engine (:mod:`dartlib.experiments`). Table 1
(``table1``) and at the paper's g_phi (``paper_config``), online imbalance (``online_imbalance``:
Table 2), the ablations (``ablations``: Tables 3-5), sensitivity (``sensitivity``), the appendix's
further settings (``appendix_settings``: CIFAR-10C-imb, mixed domains, MEMO's BN, a condensed
D_int), natural shifts (``natural_shifts``), the large benchmarks (``large_benchmarks``),
intermediate training (``intermediate_training``: Section 4), the backbone study
(``backbone_strength``), the diagnosis of the failing claims (``diagnosis``), the JPEG copy's bound
(``jpeg_bound``), choosing alpha (``alpha_choice``) and DART on your own model (``own_model``).
Also the toy model's checks (``toy_analysis``: Section 2, Appendix C), the confusion matrices
(``confusion``: Figure 1), prediction deviation (``prediction_deviation``: Figures 3 and 4), the cost
table (``costs``), HOC (``hoc``: Appendix E) and the identifiability bound of the diagnosis
(``identifiability``). The grids the command line runs outside their notebook are registered once,
in ``grids``. Imports ``perf``, ``analysis``, ``experiments`` and the layers below."""
