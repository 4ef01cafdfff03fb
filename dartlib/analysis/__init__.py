"""Layer ``analysis``: the toy Gaussian model (``toy``: Section 2, Appendix C), confusion matrices
(``confusion``), prediction deviation (``deviation``: Figure 4), HOC (``hoc``: Appendix E) and
the sign of DART's effects (``effects``) and the noise of every number (``noise``): primitives
the studies (:mod:`dartlib.studies`) use. Imports ``experiments`` and the layers below."""
