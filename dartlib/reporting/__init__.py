"""Layer ``reporting``: the primitives every section's table and figure is made of. The paper's
numbers (``paper``), our table beside the paper's and its renderings (``tables``), the figure style
and saving (``figures``), what a reader sees of the data first (``data_views``) and the golden
reference values (``reference``). A section's own tables and figures live in its study
(``dartlib.studies``); the claims ledger and the book read them from the layer above (``dartlib.book``).
Imports the layers below."""
