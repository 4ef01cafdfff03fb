"""Layer ``reporting``: the paper's numbers (``paper``), our tables beside the paper's (``tables``),
the claims ledger (``claims``), figures and plot helpers (``figures``, ``data_figures``,
``toy_figures``) and the golden reference values (``reference``). Imports the layers below."""
