"""The book's words for the paper's claims: each claim in one short plain sentence
(:data:`CLAIM_TITLES`), the paper's LaTeX sentence as plain text (:func:`plain_text`) and a check of
the ledger in words (:func:`check_words`). No page of the book shows LaTeX, a claim's id or a
method's internal name (``tests/test_book_answer.py`` scans the built pages)."""

from __future__ import annotations

import re


# Each claim of data/paper/claims.yaml in one short plain sentence, what the book heads it with
# (the paper's own sentence follows). The book refuses a claim that has none here.
CLAIM_TITLES = {
    'abstract-gains-without-degradation': 'DART gains 5 to 18 points under label shift on CIFAR-10-C and loses nothing without it.',
    'dart-improves-every-method': 'DART improves every test-time adaptation method, more as rho grows, and keeps rho = 1.',
    'dart-gains-grow-with-rho': "DART's gain grows with the imbalance ratio rho and is free at rho = 1.",
    'bnadapt-degrades-under-label-shift': 'BNAdapt loses accuracy as rho grows and falls below NoAdapt at rho = 100.',
    'tent-sar-degrade-under-label-shift': 'TENT and SAR lose accuracy under label shift.',
    'label-shift-aware-methods-degrade-less': 'NOTE, DELTA and ODS lose less under label shift than the other methods.',
    'dart-split-large-scale': 'DART-split gains 16.7 to 39.8 points on CIFAR-100-C-imb and 0.2 to 4.8 on ImageNet-C-imb.',
    'dart-split-above-noadapt-cifar100c': 'DART-split beats NoAdapt by over 4 points at every imbalance ratio on CIFAR-100-C-imb.',
    'dart-split-on-cifar10c-lt': 'DART-split gains about 10 points at rho = 100 and matches BNAdapt at rho = 1 and 10.',
    'dart-beats-dart-split-on-cifar10c-lt': 'DART beats DART-split on CIFAR-10-C-LT at every rho.',
    'prediction-deviation-input-gains': 'Feeding g_phi the prediction deviation gains 3.2 to 6.7 points.',
    'pbar-distance-rises-then-falls-with-ir': 'The distance of the mean prediction from uniform rises up to IR 20, then falls.',
    'pbar-alone-cannot-tell-ir1-from-ir5000-on-figure-4': 'The mean prediction alone cannot tell IR 1 from IR 5000.',
    'prediction-deviation-tells-ir1-from-ir5000': 'The prediction deviation tells IR 1 from IR 5000.',
    'w-beats-b-under-severe-shift': 'Refining with the matrix W beats the bias b by 0.4 and 2.3 points at rho = 10 and 100.',
    'w-and-b-together-best': 'W and b together do best at rho = 10 and 100.',
    'uniform-lt-sampling-wins-on-lt': 'Training g_phi on uniform and long-tailed batches only wins on CIFAR-10-C-LT.',
    'dirichlet-sampling-for-online-imbalance': 'Without Dirichlet batches g_phi does much worse on CIFAR-10-C-imb.',
    'affine-beats-additive': 'An additive output instead of the affine one does worse at every rho.',
    'mixed-domains': 'DART gains 61.1 points on mixed domains.',
    'dart-on-bnadapt-costs-nothing-at-test-time': 'DART on BNAdapt adds almost no test-time cost.',
    'dart-on-other-methods-needs-a-second-classifier': 'DART on other methods costs a second classifier.',
    'memo-adapted-bn-degrades': 'MEMO with adapted BN loses 2 and 13.4 points at rho = 10 and 100.',
    'dart-recovers-memo': "DART recovers MEMO's losses under label shift.",
    'memo-stored-bn-below-noadapt': 'MEMO with stored BN does not degrade under label shift but stays below NoAdapt.',
    'dart-improves-on-cifar10c-imb': 'DART improves every method on CIFAR-10-C-imb.',
    'bnadapt-below-noadapt-on-cifar10c-imb': 'BNAdapt falls below NoAdapt at IR 20 to 5000 on CIFAR-10-C-imb.',
    'dart-above-noadapt-on-cifar10c-imb': 'BNAdapt with DART beats NoAdapt at every IR on CIFAR-10-C-imb.',
    'alpha-zero-costs-balanced-batches': 'Without regularisation (alpha = 0) TENT with DART loses about 2 points at rho = 1.',
    'dart-stable-across-alpha': 'DART is stable for alpha between 0.01 and 1.',
    'dart-robust-to-intermediate-batch-and-width': "DART's gain is robust to g_phi's batch size and width.",
    'intermediate-batch-128-gains-less': 'An intermediate batch of 128 gains about 14 points at rho = 100, 32 or 64 about 18.',
    'ten-epochs-close-to-fifty': 'Ten epochs of g_phi come within 1.8 points of fifty.',
    'bnadapt-worsens-with-smaller-test-batches': 'BNAdapt gets worse as the test batch shrinks from 200 to 4.',
    'bnadapt-below-noadapt-at-test-batch-4': 'BNAdapt falls slightly below NoAdapt at a test batch of 4.',
    'dart-helps-small-test-batches': 'DART gains about 3 points for BNAdapt at test batches of 4 or 8.',
}

# The paper's \\ref labels the claims quote, by what they name (Section and table in each claim's `where`).
PAPER_LABELS = {
    "fig: fig_intro": "Figure 3",
    "fig: label distribution shift detection": "Figure 4",
    "table: cifar10lt": "Table 1",
    "table: dart-split on cifar10clt": "the table of DART-split on CIFAR-10C-LT (Appendix B)",
    "table: memo": "the table of MEMO on CIFAR-10C-LT (Appendix F)",
}
# The works the claims cite, as author and year.
PAPER_CITATIONS = {"marsden2024universal": ("Marsden et al.", "2024"), "ttab_zhao": ("Zhao et al.", "2023")}
_MATH = (  # LaTeX inside $...$, in the order applied
    (r"\\bar\{p\}_\\gB", "p̄_B"), (r"\\bar\{\\theta\}_0", "θ̄₀"), (r"f_\{(.*?)\}", r"f_\1"), (r"d_\\gB", "d_B"),
    (r"g_\\phi", "g_φ"), (r"\\rho", "ρ"), (r"\\alpha", "α"), (r"\\&", "&"), (r"\s*=\s*", " = "), (r",(?=\S)", ", "),
)


def claim_title(claim_id: str) -> str:
    """The claim's short plain sentence; a claim without one is an error naming where to add it."""
    if claim_id not in CLAIM_TITLES:
        raise KeyError(f"claim {claim_id!r} of data/paper/claims.yaml has no plain title: add one to CLAIM_TITLES in "
                       "dartlib/book/plain.py")
    return re.sub(r"\brho\b", "ρ", re.sub(r"\balpha\b", "α", CLAIM_TITLES[claim_id])).replace("g_phi", "g_φ")


def _math(text: str) -> str:
    for pattern, replacement in _MATH:
        text = re.sub(pattern, replacement, text)
    if "\\" in text or "{" in text:
        raise ValueError(f"no plain form for the LaTeX math ${text}$: add it to _MATH in dartlib/book/plain.py")
    return text


def _citation(match: re.Match) -> str:
    key = match["key"]
    if key not in PAPER_CITATIONS:
        raise ValueError(f"no author for the citation {key!r}: add it to PAPER_CITATIONS in dartlib/book/plain.py")
    who, year = PAPER_CITATIONS[key]
    return f" ({who}, {year})" if match["tie"] else f"{who} ({year})"


def _label(match: re.Match) -> str:
    if match["label"] not in PAPER_LABELS:
        raise ValueError(f"no name for the paper's label {match['label']!r}: add it to PAPER_LABELS in "
                         "dartlib/book/plain.py")
    return PAPER_LABELS[match["label"]]


def plain_text(latex: str) -> str:
    """A sentence of the paper's LaTeX source as plain text: ``Table~\\ref{table: cifar10lt}`` ->
    "Table 1", ``ROID~\\cite{marsden2024universal}`` -> "ROID (Marsden et al., 2024)", ``$\\rho=100$``
    -> "ρ = 100", ``\\%`` -> "%". A command it does not know is an error (nothing is dropped unread)."""
    text = " ".join(latex.split())
    text = re.sub(r"(?P<tie>~)?\\cite\{(?P<key>[^}]*)\}", _citation, text)
    text = re.sub(r"(?:Table|Figure|Fig\.)~\\ref\{(?P<label>[^}]*)\}", _label, text)
    text = re.sub(r"\$(.*?)\$", lambda m: _math(m[1]), text)
    text = text.replace("\\%", "%").replace("~", " ")
    if leftover := re.search(r"\\[A-Za-z]+|[{}$]", text):
        raise ValueError(f"no plain form for {leftover[0]!r} in the paper's sentence {latex!r}: extend plain_text in "
                         "dartlib/book/plain.py")
    return text


_ROWS = re.compile(r"\b(?P<method>[a-z][a-z0-9_]*)(?:\+(?P<refiner>[a-z0-9][\w.-]*[\w]))?\b")
# The refiners the ledger names (results' refiner column), in words: internal names never reach a page.
REFINER_WORDS = {"dart": "DART", "dart-split": "DART-split", "alpha0.1-epochs50": "DART (the paper's g_φ)",
                 "table1": "DART (Table 1's g_φ)", "epochs50": "DART (50 epochs)", "dart-pbar-only": "DART (p̄ input only)",
                 "dart-w-only": "DART (W only)", "dart-b-only": "DART (b only)", "dart-additive": "DART (additive output)",
                 "dart-sampling-unif-lt": "DART (uniform and long-tailed batches only)"}
COLUMN_WORDS = {"ce_u_pbar": "D(u, p̄)", "gmac_executed_per_image": "GMACs per image", "params_m": "parameters",
                "wall_clock_s": "wall clock"}


def method_words(text: str) -> str:
    """Method names of a check in the tables' words: ``bnadapt+dart`` -> "BNAdapt+DART"."""
    from dartlib.reporting.tables import METHOD_NAMES

    def refiner(name: str) -> str:
        return REFINER_WORDS.get(name) or (f"DART ({name[5:].replace('-', ' ')})" if name.startswith("dart-") else name)

    def replace(match: re.Match) -> str:
        if match["method"] in METHOD_NAMES:
            name = METHOD_NAMES[match["method"]]
            return name if match["refiner"] in (None, "none") else f"{name}+{refiner(match['refiner'])}"
        if match["refiner"] is None and (match["method"] in REFINER_WORDS or match["method"].startswith("dart-")):
            return refiner(match["method"])
        return COLUMN_WORDS.get(match[0], match[0])
    return _ROWS.sub(replace, text)
