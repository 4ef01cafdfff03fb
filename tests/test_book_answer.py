"""The book opens with the answer: which of the paper's claims hold, fail or were not run, in plain
sentences with their numbers, each claim once; no page shows the paper's LaTeX, a claim's id or a
test marker; the ledger is evaluated once per set of inputs."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from dartlib.book import answer, plain, site
from dartlib.book import claims as ledger
from dartlib.experiments.settings import Settings


def test_every_claim_has_a_plain_title_and_its_sentence_reads_without_latex():
    claims = ledger.load_claims()
    assert set(plain.CLAIM_TITLES) == {c["id"] for c in claims}
    for claim in claims:
        text = plain.plain_text(claim["quote"])
        assert not re.search(r"[\\$~{}]", text), (claim["id"], text)
        assert not re.search(r"[\\$~{}]", plain.claim_title(claim["id"]))
    assert plain.plain_text(r"As shown in Table~\ref{table: cifar10lt}, 5-18\% gains") == "As shown in Table 1, 5-18% gains"
    assert plain.plain_text(r"while ROID~\cite{marsden2024universal}, a method") == \
        "while ROID (Marsden et al., 2024), a method"
    assert plain.plain_text(r"($\rho=1, 10$) and $\bar{p}_\gB$") == "(ρ = 1, 10) and p̄_B"


def test_latex_the_book_cannot_read_is_an_error_naming_where_to_add_it():
    with pytest.raises(ValueError, match="PAPER_LABELS in dartlib/book/plain.py"):
        plain.plain_text(r"Table~\ref{table: unknown}")
    with pytest.raises(ValueError, match="dartlib/book/plain.py"):
        plain.plain_text(r"the $\beta$ of it")
    with pytest.raises(KeyError, match="CLAIM_TITLES in dartlib/book/plain.py"):
        plain.claim_title("no-such-claim")


def test_checks_are_said_in_the_tables_words():
    assert answer.check_words("gain bnadapt+dart over none at 10") == "gain of BNAdapt+DART over the method alone at 10"
    assert answer.check_words("gain bnadapt+table1 over epochs50 at 100") == \
        "gain of BNAdapt+DART (Table 1's g_φ) over DART (50 epochs) at 100"
    assert plain.method_words("batch ce_u_pbar separability 1 vs 5000") == "batch D(u, p̄) separability 1 vs 5000"


def _row(claim: str, status: str, *, margin: float, configuration: str = "", ours: float = 1.0) -> dict:
    return dict(claim=claim, check="gain bnadapt+dart over none at 10", paper=5.7, ours=ours, se=0.3, bound=0.0,
                margin=margin, status=status, condition="> 0", se_kind="images", configuration=configuration)


def test_a_claim_is_listed_once_under_the_verdict_of_the_configuration_nearest_the_papers():
    """A claim with a failing and an unrun check is listed as failing only; one judged at the
    profile's g_phi (FAILS) and at the paper's (HOLDS) is headed by the paper's, the other named."""
    claims = [c for c in ledger.load_claims() if c["id"] in ("dart-improves-every-method", "dart-gains-grow-with-rho")]
    table = pd.DataFrame([
        _row("dart-improves-every-method", "FAILS", margin=-3.1, ours=-1.2),
        _row("dart-improves-every-method", "NOT RUN", margin=math.nan, ours=math.nan),
        _row("dart-gains-grow-with-rho", "FAILS", margin=-2.5),
        _row("dart-gains-grow-with-rho", "HOLDS", margin=4.0, configuration="paper g_phi", ours=5.9),
    ])
    answers = answer.claim_answers(table=table, claims=claims)
    assert [(a.verdict, a.run, a.checks) for a in answers] == [("FAILS", 1, 2), ("HOLDS", 1, 1)]
    lists = "\n".join(answer.claim_lists(answers=answers))
    every = plain.claim_title("dart-improves-every-method")
    assert lists.count(every) == 1 and "### Not run" not in lists
    assert "ours -1.2 ± 0.3, the paper +5.7" in lists and "1 of 2 checks run" in lists
    grow = next(line for line in lists.splitlines() if plain.claim_title("dart-gains-grow-with-rho") in line)
    assert "**HOLDS** at the paper's g_φ: ours +5.9 ± 0.3" in grow and "the profile's g_φ: FAILS" in grow
    assert answer.counts_sentence(answers).startswith("Of the paper's 2 claims checked here, **1 hold, 1 fail**")
    # a claim run in no configuration: one line over all of its checks, no configuration named
    split = [c for c in ledger.load_claims() if c["id"] == "dart-split-large-scale"]
    unrun = pd.DataFrame([_row("dart-split-large-scale", "NOT RUN", margin=math.nan, configuration=c, ours=math.nan)
                          for c in ("", "paper g_phi")])
    line = answer.claim_lists(answers=answer.claim_answers(table=unrun, claims=split))[2]
    assert line.endswith("**NOT RUN**: none of its 2 checks has rows on this profile."), line
    # a profile with no rows at all (a fresh clone): one sentence, no list of headline claims
    first = answer.answer_section(answers=answer.claim_answers(table=unrun, claims=split), profile="smoke",
                                  setting="small-cnn")
    assert first == ["Of the paper's 1 claims checked here, none has rows on the smoke profile on this checkout: "
                     "every claim below reads NOT RUN.", ""]


@pytest.fixture(scope="module")
def cpu_source(tmp_path_factory):
    """The cpu book's Sphinx source as the generator writes it (the ledger from its cache when warm)."""
    return site.write_book_source(profile="cpu", out=tmp_path_factory.mktemp("book") / "src")


LATEX = re.compile(r"\\(?:ref|cite|label|bar|rho|alpha|phi)\b|~\\|\$\\")


def test_no_page_shows_latex_a_claim_id_or_a_test_marker(cpu_source):
    ids = [c["id"] for c in ledger.load_claims()]
    pages = {p.name: p.read_text() for p in cpu_source.glob("*.md")}
    assert {"index.md", "claims.md", "gallery.md", "tables.md"} <= set(pages)
    problems = [f"{name}: {m.group(0)!r}" for name, text in pages.items() for m in LATEX.finditer(text)]
    problems += [f"{name}: claim id {cid}" for name, text in pages.items() for cid in ids
                 if re.search(rf"(?<![\w-]){re.escape(cid)}(?![\w-])", text)]
    for notebook in sorted((cpu_source / "notebooks").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            if "NBVAL" in "".join(cell["source"]):
                problems.append(f"{notebook.name}: a test marker in a cell")
    assert not problems, "\n".join(problems[:20])
    claims_page = pages["claims.md"]
    assert "## DART gains 5 to 18 points under label shift on CIFAR-10-C and loses nothing without it." in claims_page
    assert "## DART's gain grows with the imbalance ratio ρ and is free at ρ = 1." in claims_page


def test_the_overview_opens_with_the_answer_each_claim_once(cpu_source):
    overview = (cpu_source / "index.md").read_text()
    head = overview.split("## Every claim")[0]
    assert head.splitlines()[0] == "# DART: what reproduces (cpu profile)"
    assert re.search(r"Of the paper's 36 claims checked here, \*\*\d+ hold, \d+ fail\*\*", head)
    # the first screen: the counts and the four headline claims, each with ours ± SE beside the paper's
    assert len(head) < 1100, len(head)
    headline = re.findall(r"^- \*\*(?:HOLDS|FAILS|WITHIN NOISE)\*\* .*: (?:at (?:ρ = |IR )\d+ )?ours [-+]?\d+\.\d ± "
                          r"\d+\.\d, the paper [-+]?\d+\.\d\.$", head, re.M)
    assert len(headline) == 4, head
    listed = overview.split("## Every claim")[1].split("## The profile")[0]
    for claim_id in plain.CLAIM_TITLES:
        assert listed.count(plain.claim_title(claim_id)) == 1, claim_id
    # the diagnosis table scrolls inside its own box, its cells wrapping; no internal variant names
    diagnosis = overview.split("**Why DART's cost")[1]
    assert '<div class="scroll-box">' in diagnosis.split("</table>")[0] and "epochs50" not in diagnosis


def test_the_ledger_is_evaluated_once_per_set_of_inputs(tmp_path, monkeypatch):
    """The first build evaluates the ledger and keeps it; the next reads it back; a changed results
    file is a new key (evaluated again)."""
    import shutil

    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(site.REPO_ROOT / "results" / "cpu" / "costs.csv", results / "costs.csv")
    sources = site.BookSources(profile="cpu", notebooks=tmp_path, figures=tmp_path, results=results)
    calls = []
    real = ledger.evaluate
    monkeypatch.setattr(ledger, "evaluate", lambda *a, **k: calls.append(1) or real(*a, **k))
    settings = Settings.from_profile("cpu")
    first = site.ledger_table(sources=sources, settings=settings, cache=tmp_path / "cache")
    second = site.ledger_table(sources=sources, settings=settings, cache=tmp_path / "cache")
    assert len(calls) == 1 and first.equals(second)
    (results / "costs.csv").write_text((results / "costs.csv").read_text().replace("bnadapt", "bnadapt", 1) + "\n")
    site.ledger_table(sources=sources, settings=settings, cache=tmp_path / "cache")
    assert len(calls) == 2 and len(list((tmp_path / "cache").glob("cpu-*.json"))) == 1


def test_a_damaged_ledger_cache_is_discarded_and_evaluated_again(tmp_path, monkeypatch):
    """The ledger's cache holds its key and the digest of its table: an edited value (digest kept),
    a file cut short or a file of another key is discarded with one warning naming it."""
    import json
    import shutil

    from dartlib.data.files import CacheDiscardedWarning

    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(site.REPO_ROOT / "results" / "cpu" / "costs.csv", results / "costs.csv")
    sources = site.BookSources(profile="cpu", notebooks=tmp_path, figures=tmp_path, results=results)
    calls = []
    real = ledger.evaluate
    monkeypatch.setattr(ledger, "evaluate", lambda *a, **k: calls.append(1) or real(*a, **k))
    settings, cache = Settings.from_profile("cpu"), tmp_path / "cache"
    first = site.ledger_table(sources=sources, settings=settings, cache=cache)
    (path,) = cache.glob("cpu-*.json")
    stored = json.loads(path.read_text())
    edited = json.loads(stored["table"])
    edited["columns"]["status"][0] = "HOLDS" if edited["columns"]["status"][0] != "HOLDS" else "FAILS"
    damages = {"an edited value": json.dumps({**stored, "table": json.dumps(edited)}),
               "a file cut short": path.read_text()[:200],
               "another key": json.dumps({**stored, "key": "0" * 20})}
    for what, text in damages.items():
        path.write_text(text)
        with pytest.warns(CacheDiscardedWarning, match=rf"{path.name}: .*; discarded, the ledger is evaluated again"):
            again = site.ledger_table(sources=sources, settings=settings, cache=cache)
        assert again.equals(first), what
    assert len(calls) == 1 + len(damages)
