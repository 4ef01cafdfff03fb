"""The book's answer: which of the paper's claims hold, fail or were not run on a profile, in plain
sentences with the numbers behind them (the overview's first screen, :func:`answer_section`), each
claim in detail (:func:`claim_lists`) and the book's claims page (:func:`book_claims_page`).

Everything is read from the ledger's evaluation (``claims.evaluate``: one row per check) and its
verdict per claim (``claims.claim_verdicts``); nothing here judges a check. A claim judged in more
than one configuration (the profile's g_phi, the paper's g_phi, every corruption) is headed by the
verdict of the configuration nearest the paper's (:data:`CONFIGURATION_ORDER`), the others named
beside it, so that a claim is listed once: as holding, failing, within noise or not run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from dartlib.analysis.noise import SE_SENTENCE
from dartlib.book import claims as ledger, verdict_rules
from dartlib.book.plain import claim_title, method_words, plain_text

# The paper's headline claims (its abstract and Section 5.1), stated first on the overview.
MAIN_CLAIMS = ("abstract-gains-without-degradation", "dart-gains-grow-with-rho", "dart-improves-every-method",
               "dart-above-noadapt-on-cifar10c-imb")
# Which configuration's verdict heads a claim: the paper's g_phi, then every corruption, then the profile's own.
CONFIGURATION_ORDER = ("paper g_phi", "all 15 corruptions", "")
HEADINGS = {"FAILS": "Fail", "WITHIN NOISE": "Within noise", "HOLDS": "Hold", "NOT RUN": "Not run"}


@dataclass(frozen=True)
class ClaimAnswer:
    """One claim as the book states it: its verdict in the configuration nearest the paper's, the
    check behind it (``decisive``: a row of the ledger's table, None where nothing was run) and the
    other configurations' verdicts."""

    claim_id: str
    title: str
    sentence: str
    verdict: str  # one of verdict_rules.VERDICTS
    configuration: str  # "" for the profile's g_phi
    run: int
    checks: int
    decisive: object | None
    others: tuple[tuple[str, str], ...]
    shift: str = ""  # the claim's label shift: "lt" (rho) or "online-imb" (IR)


def _rank(configuration: str) -> int:
    for i, prefix in enumerate(CONFIGURATION_ORDER):
        if configuration.startswith(prefix):
            return i
    return len(CONFIGURATION_ORDER)


def _configuration_label(configuration: str) -> str:
    return configuration.replace("paper g_phi", "the paper's g_φ") or "the profile's g_φ"


def claim_answers(*, table: pd.DataFrame, claims: list[dict]) -> list[ClaimAnswer]:
    """One :class:`ClaimAnswer` per claim of ``claims``, in the ledger's order."""
    configurations = table["configuration"].fillna("") if "configuration" in table else pd.Series("", table.index)
    table = table.assign(configuration=configurations)
    out = []
    for claim in claims:
        rows = table[table["claim"] == claim["id"]]
        verdicts = {}
        for configuration, sub in rows.groupby("configuration", sort=False):
            verdicts[configuration] = ledger.claim_verdicts(table=sub, claims=[claim]).get(claim["id"], "NOT RUN")
        run_configurations = [c for c, v in verdicts.items() if not v.startswith("NOT RUN")]
        if not run_configurations:  # nothing run in any configuration: one line for all its checks
            out.append(ClaimAnswer(claim["id"], claim_title(claim["id"]), plain_text(claim["quote"]), "NOT RUN", "",
                                   0, len(rows), None, (), str(claim.get("shift") or "")))
            continue
        chosen = min(run_configurations, key=_rank)
        verdict = next(v for v in verdict_rules.VERDICTS if verdicts[chosen].startswith(v))
        sub = rows[rows["configuration"] == chosen]
        run = int((sub["status"] != "NOT RUN").sum())
        decisive = None
        if verdict != "NOT RUN":
            same = sub[sub["status"] == verdict]
            decisive = next(same.sort_values("margin").itertuples()) if len(same) else None
        others = tuple((_configuration_label(c), v) for c, v in verdicts.items() if c != chosen)
        out.append(ClaimAnswer(claim["id"], claim_title(claim["id"]), plain_text(claim["quote"]), verdict,
                               chosen, run, len(sub), decisive, others, str(claim.get("shift") or "")))
    return out


def _signed(check: str) -> bool:
    return not check.startswith(("accuracy", "cost")) and "separability" not in check


def check_words(check: str) -> str:
    """A check of the ledger in words: "gain bnadapt+dart over none at 10" -> "gain of BNAdapt+DART
    over BNAdapt at 10"."""
    text = method_words(check)
    for old, new in ((" over none", " over the method alone"), ("gain ", "gain of "), ("drop ", "drop of "),
                     ("accuracy ", "accuracy of "), ("->", " → ")):
        text = text.replace(old, new)
    return text


def numbers(row) -> str:
    """"ours +4.1 ± 0.3, the paper +7.8 (gain of BNAdapt+DART over the method alone at 100)"."""
    signed = _signed(row.check)
    fmt = "+.1f" if signed else ".1f"
    ours = f"{row.ours:{fmt}}" + ("" if row.se_kind == "exact" else f" ± {row.se:.1f}")
    paper = "" if math.isnan(row.paper) else f", the paper {row.paper:{fmt}}"
    return f"ours {ours}{paper} ({check_words(row.check)})"


def _line(a: ClaimAnswer) -> str:
    if a.verdict == "NOT RUN":
        return f"{a.title} **NOT RUN**: none of its {a.checks} checks has rows on this profile."
    where = "" if not a.configuration else f" at {_configuration_label(a.configuration)}"
    run = f"; {a.run} of {a.checks} checks run" if a.run < a.checks else ""
    detail = "" if a.decisive is None else f": {numbers(a.decisive)}"
    others = "".join(f"; {c}: {v}" for c, v in a.others)
    return f"{a.title} **{a.verdict}**{where}{detail}{run}{others}."


def _short_line(a: ClaimAnswer) -> str:
    """The first screen's line: the verdict, the claim and the decisive check's numbers, where it is
    taken said in a few words (the lists below say which check)."""
    if a.decisive is None:
        return f"**{a.verdict}** {a.title}"
    r = a.decisive
    fmt = "+.1f" if _signed(r.check) else ".1f"
    at = re.search(r" at (\d+(?:\.\d+)?)", r.check)
    where = "" if not at else f" at {'IR ' if a.shift == 'online-imb' else 'ρ = '}{at[1]}"
    paper = "" if math.isnan(r.paper) else f", the paper {r.paper:{fmt}}"
    return f"**{a.verdict}** {a.title.rstrip('.')}:{where} ours {r.ours:{fmt}} ± {r.se:.1f}{paper}."


def counts_sentence(answers: list[ClaimAnswer]) -> str:
    """"Of the paper's 36 claims, 12 hold, 18 fail, 2 are within noise and 4 were not run"."""
    n = {v: sum(a.verdict == v for a in answers) for v in verdict_rules.VERDICTS}
    return (f"Of the paper's {len(answers)} claims checked here, **{n['HOLDS']} hold, {n['FAILS']} fail**, "
            f"{n['WITHIN NOISE']} are within noise and {n['NOT RUN']} were not run")


def answer_section(*, answers: list[ClaimAnswer], profile: str, setting: str) -> list[str]:
    """The overview's first screen: the counts, then the paper's headline claims with their numbers;
    one sentence where no claim has rows (a fresh clone before ``make reproduce``): a list of
    headline claims all reading NOT RUN would push the page's warning off a phone's first screen."""
    if all(a.verdict == "NOT RUN" for a in answers):
        return [f"Of the paper's {len(answers)} claims checked here, none has rows on the {profile} profile on this "
                "checkout: every claim below reads NOT RUN.", ""]
    main = [a for a in answers if a.claim_id in MAIN_CLAIMS]
    return [f"{counts_sentence(answers)} on the {profile} profile ({setting}; at the paper's g_φ where run, each "
            f"beyond {verdict_rules.MARGIN_SE:g} SE). The paper's headline claims:", "",
            *[f"- {_short_line(a)}" for a in main], ""]


def claim_lists(*, answers: list[ClaimAnswer]) -> list[str]:
    """Every claim once, under its verdict, with the check behind the verdict."""
    lines = []
    for verdict in HEADINGS:
        group = [a for a in answers if a.verdict == verdict]
        if not group:
            continue
        lines += [f"### {HEADINGS[verdict]} ({len(group)})", "", *[f"- {_line(a)}" for a in group], ""]
    return lines


def book_claims_page(*, table: pd.DataFrame, claims: list[dict], profile: str) -> str:
    """The book's claims page: each claim headed by its plain sentence, the paper's sentence, the
    verdict and every check (ours ± SE, the paper's, the condition, the margin in SE)."""
    answers = {a.claim_id: a for a in claim_answers(table=table, claims=claims)}
    lines = [f"# The paper's claims ({profile} profile)", "",
             counts_sentence(list(answers.values())) + ". Each claim below: the paper's sentence, its verdict and "
             "every check. How to read a check is at the foot of the page.", ""]
    for claim in claims:
        a = answers[claim["id"]]
        lines += [f"## {a.title}", "", f"> {a.sentence}", "", f"*{plain_text(claim['where'])}*", "",
                  f"**Verdict:** {_line(a).split('**', 2)[1]}"
                  + (f" at {_configuration_label(a.configuration)}" if a.configuration else "")
                  + "".join(f" · {c}: {v}" for c, v in a.others) + ".", "",
                  f"**Reading.** {plain_text(claim['reading'])}", "",
                  "| check | condition | paper | ours ± SE | margin | status |", "|---|---|---|---|---|---|"]
        for r in table[table["claim"] == claim["id"]].itertuples():
            signed = _signed(r.check)
            fmt = "+.2f" if signed else ".2f"
            paper = "–" if math.isnan(r.paper) else f"{r.paper:{fmt}}"
            ours = "–" if math.isnan(r.ours) else f"{r.ours:{fmt}}" + ("" if r.se_kind == "exact" else f" ± {r.se:.2f}")
            margin = "" if math.isnan(r.margin) else ("exact" if math.isinf(r.margin) else f"{r.margin:+.1f} SE")
            config = f" ({_configuration_label(r.configuration)})" if getattr(r, "configuration", "") else ""
            lines.append(f"| {check_words(r.check)}{config} | {method_words(r.condition)} | {paper} | {ours} | "
                         f"{margin} | {r.status} |")
        lines.append("")
    lines += ["## How to read a check", "",
              "Ours is the mean accuracy (or a difference of means) ± its standard error. "
              f"{SE_SENTENCE}. The margin is the distance from the condition's bound in standard errors, positive on "
              "the side the sentence asserts. HOLDS: the asserted effect is there beyond 2 SE; FAILS: contradicted "
              "beyond 2 SE; WITHIN NOISE: the effect is smaller than 2 SE either way; NOT RUN: the rows are absent. "
              "Reduced profiles test the direction and rough size of an effect, not the paper's number.", ""]
    return "\n".join(lines)
