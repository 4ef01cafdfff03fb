"""Measured numbers typed by hand into the project's prose (docs/*.md and README.md).

The rule: every measured number on those pages (an accuracy, a gain, an SE, a count of outcomes, a
timing) comes from a generated block, ``<!-- generated: NAME -->`` ... ``<!-- end: NAME -->``, which
:mod:`dartlib.book.results_page` renders from the committed rows, the paper's committed tables
(``data/paper/``) or a benchmark's committed output. What prose may write is narrow and stated here:

* settings, named by the keyword before them (``alpha 0.1``, ``rho = 1 / 10 / 100``, ``severity 5``,
  ``batch 200``, ``width 16``, ``Dirichlet 0.1``, ``learning rate 0.1``; :data:`SETTING_WORDS`), or by the noun after an
  integer (``50 epochs``, ``15 corruptions``, ``4 seeds``; :data:`SETTING_NOUNS`), or in a hyphenated
  compound (``2-epoch``, ``2-core``, ``4-view``);
* versions (``1.2.0``; a number after :data:`VERSION_WORDS`), years and dates, names (``CIFAR-10.1``,
  ``ResNet-26``) and the size of a published data set in GB (``2.9 GB``; a size in MB is this
  repository's own, measured, and is a finding);
* references to a table, figure, section, equation, appendix, notebook or line (:data:`REFERENCE_WORDS`);
* a number that continues a list started by an allowed one (``notebooks 04, 07 and 08``, ``IR 20, 50, 5000``).

A number in a code fence, in inline code or in a link's target is not prose and is skipped.

A decimal number is measured unless allowed. An integer counts as measured only where it reads as a
measurement: with a unit (``%``, ``s``, ``seconds``, ``minutes``, ``hours``, ``points``, ``x``), as an
outcome count (``319 of 10,000``, ``1,424 passed``, ``765 cells``; :data:`COUNT_WORDS`), or beside a
verdict (``HOLDS: 12``). ``tests/test_prose_numbers.py`` runs :func:`findings` on fixtures and on every
committed page."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dartlib.paths import REPO_ROOT

SETTING_WORDS = ("alpha", "rho", "ir", "severity", "seed", "seeds", "batch", "batches", "width", "epoch", "epochs",
                 "lr", "dirichlet", "quality", "ddof", "hidden", "int_batch", "k", "n", "top", "views", "threads",
                 "tau", "margin", "confidence", "threshold", "momentum", "factor", "ema", "sgd", "adam",
                 "decay", "delta", "temperature", "epsilon", "norm", "most", "default", "n_dir", "w", "scale")
SETTING_NOUNS = ("epoch", "epochs", "corruption", "corruptions", "seed", "seeds", "class", "classes", "view", "views",
                 "core", "cores", "thread", "threads", "gpu", "gpus", "repeat", "repeats", "image", "images", "batch",
                 "batches", "step", "steps", "layer", "layers", "severity", "severities", "method", "methods",
                 "notebook", "notebooks", "profile", "profiles", "corrupted", "times", "channels", "augmix")
VERSION_WORDS = ("python", "pytorch", "torch", "torchvision", "numpy", "pandas", "cuda", "version", "versions", "v",
                 "jupyter", "jupyterlab", "nbformat", "ubuntu", "debian", "cff-version", "pip", "conda", "scipy",
                 "matplotlib", "pytest", "sklearn", "scikit-learn", "numba", "python3")
REFERENCE_WORDS = ("table", "tables", "figure", "figures", "fig", "fig.", "section", "sections", "§", "eq", "eq.",
                   "equation", "equations", "appendix", "notebook", "notebooks", "page", "pages", "line", "lines",
                   "step", "steps", "claim", "chapter", "algorithm", "issue", "arxiv:", "item", "row")
COUNT_WORDS = ("passed", "failed", "skipped", "errors", "error", "xfailed", "xpassed", "warnings", "deselected",
               "cells", "checks", "tests", "differ", "current", "stale", "holds", "fails", "rows")
UNITS = ("%", "s", "seconds", "second", "ms", "min", "minutes", "minute", "h", "hours", "hour", "points", "point",
         "x", "×", "pp")
# pages written whole from the rows (docs/claims.md: dartlib.book.claims_page.write_claims_page, whose
# test fails when the committed page is not the generated one)
GENERATED_PAGES = ("docs/claims.md",)
_JOIN = re.compile(r"^\s*(?:/|,|and|or|to|-|–|,\s*and|then)\s*$", re.I)
_SKIPPED = [re.compile(r"<!-- generated: (?P<name>[a-z0-9_]+) -->\n.*?<!-- end: (?P=name) -->", re.S),
            re.compile(r"^(?P<fence>```|~~~).*?^(?P=fence)", re.S | re.M),
            re.compile(r"<!--.*?-->", re.S), re.compile(r"`(?:[^`\n]|\n(?!\s*\n))+`"), re.compile(r"\]\([^)\s]*\)"),
            re.compile(r"https?://\S+"), re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"),
            re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b")]
_NUMBER = re.compile(r"(?<![\w.])[-+−]?\d+(?:,\d{3})*(?:\.\d+)*")
_WORD_BEFORE = re.compile(r"([^\s(\[*]+)\s*(?:[=:]|of|at)?\s*$", re.I)
_SETTING_PHRASE = re.compile(r"(?:learning rate|weight decay)\s*(?:of|=|:)?\s*$", re.I)
_WORD_AFTER = re.compile(r"^\s*([A-Za-z%×]+|%)")


@dataclass(frozen=True)
class Finding:
    """A measured number typed into prose: its line (1-based), the number, and the line's text."""

    line: int
    number: str
    text: str


def _blanked(text: str) -> str:
    """``text`` with what is not prose (generated blocks, code, comments, link targets, dates) blanked
    to spaces, newlines kept, so that positions and line numbers stay those of ``text``."""
    for pattern in _SKIPPED:
        text = pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return text


def _word_before(line: str, start: int) -> str:
    """The word before position ``start`` of ``line``, lower case, with an ``=``, ``:``, "of" or
    "at" between skipped (``rho = 1`` gives "rho", ``severity-5`` "severity")."""
    match = _WORD_BEFORE.search(line[:start])
    return match.group(1).lower().strip(",;").rstrip("-") if match else ""


def _is_allowed(line: str, start: int, end: int, *, previous_allowed_end: int | None) -> bool:
    """Whether the number at ``line[start:end]`` is a setting, a version, a year or a reference."""
    token = line[start:end].lstrip("+-−")
    before, after = _word_before(line, start), line[end:]
    if re.fullmatch(r"\d+\.\d+\.\d+(?:\.\d+)*", token) or before in VERSION_WORDS:
        return True
    if re.fullmatch(r"(?:19|20)\d\d", token) or before in REFERENCE_WORDS or before in SETTING_WORDS or (
            _SETTING_PHRASE.search(line[:start])):
        return True
    if previous_allowed_end is not None and _JOIN.match(line[previous_allowed_end:start]):
        return True
    if re.match(r"-[A-Za-z]", after) or re.match(r"\s?[x×]\s?\d", after) or re.search(r"\d\s?[x×]\s?$", line[:start]):
        return True  # a hyphenated compound ("2-epoch", "4-view") or a shape ("32 x 32")
    if re.search(r"(?i)(?:cifar|resnet|wrn|top)-$", line[:start]) or re.match(r"\s?(?:GB|GiB)\b", after):
        return True  # a name ("CIFAR-10.1") or the size of a published data set ("2.9 GB")
    noun = _WORD_AFTER.match(after)
    return "." not in token and noun is not None and noun.group(1).lower() in SETTING_NOUNS


def _is_measured(line: str, start: int, end: int) -> bool:
    """Whether the number at ``line[start:end]`` reads as a measurement (before any allowance)."""
    token, after = line[start:end], line[end:]
    if "." in token:
        return True
    unit = re.match(r"^(%|×|\s?(?:[A-Za-z]+))(?![\w])", after)
    if unit and unit.group(1).strip().lower() in UNITS:
        return True
    if re.match(r"^\s+of\s+(?:the\s+)?\d", after) or re.search(r"(?:HOLDS|FAILS|NOISE|RUN):\s*$", line[:start]):
        return True
    count = re.match(r"^\s+([A-Za-z]+)", after)
    return count is not None and count.group(1).lower() in COUNT_WORDS


def findings(*, text: str) -> list[Finding]:
    """Every measured number of markdown ``text`` outside generated blocks, code and link targets
    that the module's allowance does not cover, in order."""
    found = []
    for number, line in enumerate(_blanked(text).splitlines(), start=1):
        previous_allowed_end = None
        for match in _NUMBER.finditer(line):
            start, end = match.span()
            if end < len(line) and re.match(r"[A-Za-z_]", line[end]) and not re.match(r"(?:s|x|h|ms|min)\b", line[end:]):
                continue  # part of a name: "3x3", "2nd"
            if _is_allowed(line, start, end, previous_allowed_end=previous_allowed_end):
                previous_allowed_end = end
                continue
            previous_allowed_end = None
            if _is_measured(line, start, end):
                found.append(Finding(number, match.group(0), text.splitlines()[number - 1].strip()))
    return found


def pages(*, root: Path = REPO_ROOT) -> list[Path]:
    """The pages the rule covers: the README and every page of ``docs/`` but those written whole by
    a generator (:data:`GENERATED_PAGES`)."""
    return [root / "README.md", *(p for p in sorted((root / "docs").glob("*.md"))
                                  if str(p.relative_to(root)) not in GENERATED_PAGES)]


def page_findings(*, root: Path = REPO_ROOT) -> dict[str, list[Finding]]:
    """:func:`findings` of every page of :func:`pages`, by path relative to ``root``."""
    return {str(p.relative_to(root)): findings(text=p.read_text()) for p in pages(root=root)}


if __name__ == "__main__":
    for page, found in page_findings().items():
        print(f"{page}: {len(found)}")
