"""Layer ``analysis``: the toy Gaussian model (``toy``: Section 2, Appendix C), confusion matrices
(``confusion``), prediction deviation (``deviation``: Figure 4), HOC (``hoc``: Appendix E) and
the sign of DART's effects (``effects``). Imports the layers below."""
