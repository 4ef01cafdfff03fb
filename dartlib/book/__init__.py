"""Layer ``book``: what a reader sees across the sections, on top of the studies. The claims ledger
(``claims``: each sentence of the paper, its checks and their verdicts at 2 SE), the results book
(``site``: the static HTML site built from a profile's executed notebooks and its generated pages)
and the book's progress bars (``progress``). Imports every layer below."""
