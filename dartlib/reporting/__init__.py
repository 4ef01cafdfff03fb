"""Layer ``reporting``: what a reader sees, one module per topic. The paper's numbers (``paper``),
our tables beside the paper's (``tables``: shared helpers; ``table1_report``, ``accuracy_tables``,
``costs``), the figure style and saving (``figures``) and the figures by topic (``data_views``,
``analysis_figures``, ``training_figures``, ``accuracy_figures``, ``diagnosis``), the claims ledger
(``claims``), the golden reference values (``reference``) and the results book (``book``). Imports
the layers below."""
