"""``docs/claims.md`` and the ledger's text: the count and size lines, each claim's checks as a table
(:func:`render`), the page over the smoke, cpu and gpu profiles (:func:`claims_page`,
:func:`write_claims_page`), the configuration each verdict judges in words
(:func:`judged_configuration`, from what the rows record: :func:`recorded_refiner`) and the
verdicts that changed between two evaluations (:func:`ledger_changes`). The ledger itself, its
checks and verdicts: :mod:`dartlib.book.claims`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dartlib.analysis.noise import SE_SENTENCE
from dartlib.book.claims import PAPER_CONFIG, REDUCED_PROFILES, claim_verdicts, evaluate, load_claims
from dartlib.book.verdict_rules import MARGIN_SE, SIZES, VERDICTS
from dartlib.data.corruptions import CORRUPTIONS
from dartlib.experiments.grid import read_results
from dartlib.experiments.settings import ABLATION_SHORTCUT, SHORTCUT, Settings, refiner_words
from dartlib.paths import REPO_ROOT
from dartlib.experiments.cell_options import cell_options
from dartlib.studies.diagnosis import PAPER_VARIANT
from dartlib.tta.note import PAPER_IABN_EPOCHS

CLAIMS_PAGE = REPO_ROOT / "docs" / "claims.md"
# the committed results each profile's column of docs/claims.md reads (smoke: its stored values)
PAGE_RESULTS = {"smoke": REPO_ROOT / "tests" / "golden" / "smoke", "cpu": REPO_ROOT / "results" / "cpu",
                "gpu": REPO_ROOT / "results" / "gpu"}


def verdict_counts(*, table: pd.DataFrame) -> dict[str, int]:
    """{verdict: checks} over the checks of ``table``, in :data:`~dartlib.book.verdict_rules.VERDICTS`' order."""
    counts = table["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in VERDICTS}


def size_counts(*, table: pd.DataFrame) -> dict[str, int]:
    """{size verdict: checks} over the checks of ``table`` that judge a stated size, in
    :data:`~dartlib.book.verdict_rules.SIZES`' order."""
    sized = table[table["size"].fillna("") != ""] if "size" in table else table.iloc[:0]
    counts = sized["size"].value_counts() if len(sized) else pd.Series(dtype=int)
    return {s: int(counts.get(s, 0)) for s in SIZES}


def count_line(*, table: pd.DataFrame) -> str:
    """"HOLDS: a, WITHIN NOISE: b, FAILS: c, NOT RUN: d" over the checks of ``table``."""
    return ", ".join(f"{s}: {n}" for s, n in verdict_counts(table=table).items())


def size_line(*, table: pd.DataFrame) -> str:
    """"Size of n stated effects: a as stated, b larger, c smaller, d undecided, e not run" over the
    checks of ``table`` that judge a stated size."""
    counts = size_counts(table=table)
    return f"Size of {sum(counts.values())} stated effects: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items())


def _size(r) -> str:
    """" · size LARGER x2.31 (margin 1.00)" for a check of a stated size, "" otherwise."""
    size = getattr(r, "size", "") or ""
    if not size or size == "NOT RUN":
        return ""
    ratio = "" if math.isnan(r.ratio) else f" ×{r.ratio:.2f}"
    return f" · size {size}{ratio} (margin {r.size_margin:.2f})"


def _seeds(r) -> str:
    """Where ours has one seed, that its SE has no seed term; with several, how many and the SE multiple
    that decides."""
    seeds = int(getattr(r, "seeds", 0) or 0)
    if seeds == 1 and getattr(r, "se_kind", "") in ("images", "bound"):
        return " · 1 seed: no seed term"
    return f" · {seeds} seeds, decided at {r.critical:.2f} SE" if seeds > 1 else ""


def _paper_own(r) -> str:
    reading = getattr(r, "paper_reading", "") or ""
    return " · the paper's own numbers FAIL this reading" if reading == "FAILS" else ""


def _number(value: float, *, signed: bool) -> str:
    return "—" if math.isnan(value) else format(value, "+.2f" if signed else ".2f")


def _ours(r, *, signed: bool) -> str:
    if math.isnan(r.ours):
        return "—"
    return _number(r.ours, signed=signed) + ("" if getattr(r, "se_kind", "") == "exact" else f" ± {r.se:.2f}")


def _margin(r) -> str:
    if math.isinf(r.margin):
        return "exact" if getattr(r, "se_kind", "") == "exact" else f"{'+' if r.margin > 0 else '-'}∞ SE (SE 0)"
    return "" if math.isnan(r.margin) else f"{r.margin:+.2f} SE"


def render(table: pd.DataFrame, *, profile: str) -> str:
    """A plain-text report: one line per check (ours ± SE, the paper's value, the condition and the
    margin in SE), a verdict per claim, and a count per verdict."""
    lines = [f"claims on profile {profile} (direction verdicts at {MARGIN_SE:g} standard errors, or the t quantile of "
             f"that level where seeds add a term; a stated size judged apart: within the claim's margin of the paper's "
             f"number, larger or smaller; the last two lines count both)"]
    width = max([34, *map(len, table["check"])])
    verdicts = claim_verdicts(table=table)
    for claim_id, group in table.groupby("claim", sort=False):
        lines.append(f"{claim_id}: {verdicts[claim_id]}")
        for r in group.itertuples():
            signed = not r.check.startswith(("accuracy", "cost")) and "separability" not in r.check
            lines.append(f"  {r.status:<12} {r.check:<{width}} ours {_ours(r, signed=signed):>15}  paper "
                         f"{_number(r.paper, signed=signed):>6}  ({r.condition}; {_margin(r) or 'no margin'})"
                         f"{_size(r)}{_seeds(r)}{_paper_own(r)}")
    lines.append(count_line(table=table))
    lines.append(size_line(table=table))
    return "\n".join(lines)


def claims_page(*, sources: dict[str, tuple[Path, str | None]], claims: list[dict] | None = None,
                title: str = "The claims ledger", changes: pd.DataFrame | None = None) -> str:
    """A Markdown page of the ledger: for each claim the paper's sentence and where it stands, why
    it is read this way, its verdict per profile, and each check with ours ± SE and the margin per
    profile. ``sources`` maps a profile to (results folder, its stand-in for CIFAR-10-C)."""
    claims = claims if claims is not None else load_claims()
    tables = {p: evaluate(p, corrupted_dataset=ds, claims=claims, folder=folder) for p, (folder, ds) in sources.items()}
    verdicts = {p: claim_verdicts(table=t, claims=claims) for p, t in tables.items()}
    judged = {p: judged_settings(profile=p, folder=folder) for p, (folder, _) in sources.items()}
    lines = [f"# {title}", "",
             "Generated by `dartlib.book.claims_page.write_claims_page()` from `data/paper/claims.yaml` and the "
             "committed results (" + ", ".join(f"{p}: `{f.relative_to(REPO_ROOT) if f.is_relative_to(REPO_ROOT) else f}`"
                                               for p, (f, _) in sources.items()) + "); do not edit by hand.", "",
             "Each claim quotes the paper's sentence as the LaTeX source has it, then one check per setting the "
             "sentence names. Ours is the mean accuracy (or difference of means) ± its standard error. "
             f"{SE_SENTENCE}. A condition against other rows is judged on the difference of both sides' rows, "
             "paired. The margin is the distance from the condition's bound in standard errors, "
             "positive on the side the sentence asserts. HOLDS: the asserted effect is there beyond 2 SE; "
             "FAILS: contradicted beyond 2 SE; WITHIN NOISE: the effect is smaller than 2 SE either way; NOT RUN: "
             "the rows are absent. Where ours is a mean over g_phi seeds, the SE holds the spread of the per-seed "
             "values and the verdict is decided at the t quantile of 2 SE's level (up to 4.53 SE with 3 seeds); "
             "\"1 seed: no seed term\" marks a quantity whose SE leaves out the seed. A no-loss sentence (`>= -E`, "
             "`<= E`) is read with a stated margin E and judged the same three ways; \"at least\", \"over\" and "
             "\"significant\" are one-sided, and a trend is judged step by step over the settings it names. A "
             "sentence that states a size gets two verdicts: its direction (the condition) and its size apart: AS "
             "STATED within the claim's margin of the paper's number (stated with its reason), LARGER or SMALLER "
             "beyond it, with the ratio ours / paper, UNDECIDED between. Where the paper's own numbers fail a "
             "reading, the check says so (docs/noise.md).", "",
             "Checks over all claims, direction: " + "; ".join(f"**{p}** {count_line(table=t)}" for p, t in tables.items()),
             "",
             "Checks over all claims, size: " + "; ".join(f"**{p}** {size_line(table=t)}" for p, t in tables.items()), ""]
    for claim in claims:
        lines += [f"## `{claim['id']}`", "", f"> {claim['quote'].strip()}", "", f"*{claim['where']}*", "",
                  f"**Reading.** {' '.join(claim['reading'].split())}", "",
                  *([f"**Size margin.** {_margin_words(claim)}: {' '.join(str(claim['size_reason']).split())}", ""]
                    if claim.get("size_margin") else []),
                  "**Verdict.** " + " · ".join(f"{p}: {verdicts[p].get(claim['id'], 'NOT RUN')}" for p in tables), "",
                  "**Configuration judged.** " + " · ".join(
                      f"{p}: {judged_configuration(settings=judged[p][0], recorded=judged[p][1], experiments=claim_experiments(claim))}"
                      for p in tables if p != "smoke"), "",
                  "| check | condition | paper | " + " | ".join(tables) + " |",
                  "|---|---|---|" + "---|" * len(tables)]
        first = next(iter(tables.values()))
        for i, r in enumerate(first[first.claim == claim["id"]].itertuples()):
            signed = not r.check.startswith(("accuracy", "cost")) and "separability" not in r.check
            cells = []
            for t in tables.values():
                o = t[t.claim == claim["id"]].iloc[i]
                cells.append(o.status if o.status == "NOT RUN" else
                             f"{_ours(o, signed=signed)} ({_margin(o)}) {o.status}{_size(o)}{_seeds(o)}")
            lines.append(f"| {r.check} | `{r.condition}` | {_number(r.paper, signed=signed)}{_paper_own(r)} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    if changes is not None and len(changes):
        lines += ["## Verdicts changed by the ledger's second revision", "",
                  "Against the ledger as it read before (its checks and noise model at commit f67a1ee, on the same "
                  "committed rows): `reading` where the check's condition changed (a stated size now two-sided within "
                  "half of it; a no-loss sentence with a stated margin; every baseline the sentence names), `noise "
                  "model` where only the SE changed (clustered by image and paired where rows have per-image "
                  "outcomes, an upper bound where not), `new check` for sentences that had none.", "",
                  "| claim | check | condition before | condition after | before | after | reason |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| `{r['claim']}` | {r['check']} | `{r['condition before']}` | `{r['condition after']}` | "
                  f"{r['before']} | {r['after']} | {r['reason']} |" for r in changes.to_dict("records")]
        lines.append("")
    return "\n".join(lines)


def _margin_words(claim: dict) -> str:
    margin = claim["size_margin"]
    parts = [f"{margin['points']:g} points" if "points" in margin else "",
             f"{margin['fraction']:g} of the paper's number" if "fraction" in margin else ""]
    return "the larger of " + " and ".join(p for p in parts if p) if all(parts) else next(p for p in parts if p)


def claim_experiments(claim: dict) -> list[str]:
    """The results files a claim's checks read: the claim's, then those its checks name."""
    named = [e for check in claim["checks"] for e in (check.get("experiment") or [])]
    return list(dict.fromkeys([*claim["experiment"], *named]))


def recorded_refiner(*, folder: Path) -> dict:
    """The main refiner's epochs and alpha as the results of ``folder`` record them, not as the
    profile file asks: a run's own record (``run.json``'s ``gphi``: the epochs it trained, cut by its
    time guard, and the alpha its DART rows carry in ``params``), else the refiner file of the
    ``table1`` variant that ``diagnosis_refiners.csv`` names (its saved config). Empty where neither
    is there (the profile's values then stand, and the label says so)."""
    import json

    run = folder / "run.json"
    if run.is_file():
        gphi = json.loads(run.read_text()).get("gphi") or {}
        table = folder / "table1.csv"
        alphas = set()
        if table.is_file():
            rows = read_results(table)
            dart = rows[rows["refiner"] == "dart"]["params"].astype(str)
            alphas = {cell_options(p).get("alpha") for p in dart} - {None}
        if "epochs" in gphi and len(alphas) == 1:
            return {"dart_epochs": int(gphi["epochs"]), "dart_alpha": float(alphas.pop()), "recorded": run.name}
    variant = _variant_of_table1_rows(folder)
    provenance = folder / "diagnosis_refiners.csv"
    if variant and provenance.is_file():
        files = pd.read_csv(provenance)
        named = files[files["variant"] == variant]["file"]
        path = REPO_ROOT / "data" / "checkpoints" / str(named.iloc[0]) if len(named) else None
        if path is not None and path.is_file():
            import torch

            config = torch.load(path, map_location="cpu", weights_only=True)["config"]
            return {"dart_epochs": int(config["epochs"]), "dart_alpha": float(config["alpha"]),
                    "recorded": f"{path.name}'s config, notebook 15's {variant}, whose rows have the input digests of "
                                f"table1.csv's BNAdapt+DART rows"}
    return {}


def _variant_of_table1_rows(folder: Path) -> str | None:
    """The notebook-15 variant (``diagnosis.csv``) whose seed-0 BNAdapt+DART rows have the same input
    digests as every BNAdapt+DART row of ``table1.csv``: the digest covers the refiner's weights and
    settings, so the two were computed with one trained g_phi. None where no variant matches all."""
    table, diagnosis = folder / "table1.csv", folder / "diagnosis.csv"
    if not (table.is_file() and diagnosis.is_file()):
        return None
    ours = read_results(table)
    ours = ours[(ours["method"] == "bnadapt") & (ours["refiner"] == "dart")]
    rows = read_results(diagnosis)
    rows = rows[(rows["method"] == "bnadapt") & (rows["seed"].astype(int) == 0)]
    stream = ["shift", "corruption", "shift_param"]
    for variant, theirs in rows[rows["refiner"] != "none"].groupby("refiner", sort=False):
        paired = ours.merge(theirs, on=stream, suffixes=("", "_v"))
        if len(ours) and len(paired) == len(ours) and (paired["inputs"].astype(str) == paired["inputs_v"].astype(str)).all():
            return str(variant)
    return None


def judged_settings(*, profile: str, folder: Path) -> tuple[Settings, str]:
    """``profile``'s settings with the refiner its rows in ``folder`` record (:func:`recorded_refiner`) on
    top, and where that record is (empty where there is none)."""
    found = recorded_refiner(folder=folder)
    where = found.pop("recorded", "")
    return Settings.from_profile(profile, **found), where


def judged_configuration(*, settings: Settings, recorded: str, experiments: list[str]) -> str:
    """The configuration the rows of ``experiments`` were computed with on a profile (``settings``, with
    the refiner its rows record; ``recorded``: where that record is, empty where there is none), in
    words, beside the paper's where it differs."""
    s = settings

    def n(values: list) -> str:
        return f"{len(values)}"

    main = f"g_phi {s.dart.epochs} epochs at alpha {s.dart.alpha:g}" + (
        f" (recorded: {recorded})" if recorded else " (the profile file's; no record of the rows')")
    held = set(s.run.shortcut_studies)

    def main_of(study: str) -> str:  # a study the profile still holds at the former shortcut says so
        return f"the former shortcut, {refiner_words(SHORTCUT)} (shortcut_studies)" if study in held else main

    def ablation_of(study: str) -> str:
        values = s.replace(**ABLATION_SHORTCUT) if study in held else s
        words = f"g_phi {values.ablations.epochs} epochs at alpha {values.ablations.alpha:g}"
        return f"the former shortcut, {words} (shortcut_studies)" if study in held else words

    ablation = ablation_of("sensitivity")

    parts = {
        "table1": f"Table 1: {main}, {n(s.table1.corruptions)} corruptions, NOTE's IABN {s.methods.note_finetune_epochs} "
                  f"epoch(s) (the paper: {PAPER_IABN_EPOCHS})",
        "online_imbalance": f"CIFAR-10C-imb: {main_of('online_imbalance')}, {n(s.online.corruptions)} corruptions (TENT, SAR, ODS on "
                            f"{n(s.online.split_tta_corruptions)})",
        "more_settings": f"{main_of('more_settings')}; MEMO on {n(s.more_settings.memo_corruptions)} corruptions, CIFAR-10C-imb on {n(s.more_settings.imb_corruptions)}",
        "ablations": f"ablation refiners: {ablation_of('ablations')}, {n(s.ablations.corruptions)} corruptions",
        "sensitivity": f"sensitivity refiners: {ablation}, one setting changed at a time, "
                       f"{n(s.sensitivity.corruptions)} corruptions",
        "sensitivity_tent": f"TENT+DART with the alpha table's refiners ({ablation}, each at the table's alpha), "
                            f"{n(s.sensitivity.tent_corruptions)} corruptions",
        "sensitivity_batch": f"test batches: {ablation}, {n(s.sensitivity.tent_corruptions)} corruptions",
        "intermediate_training": f"{main}",
        "costs": f"test-time costs on {s.costs.corruption}, one device (notebook 10)",
        "prediction_deviation": "BNAdapt's test batches of CIFAR-10C-imb, gaussian_noise (notebook 05)",
        "diagnosis": "notebook 15's refiners, each named by its variant (docs/results.md)",
        "paper_config": f"checks on +{PAPER_VARIANT} rows: {PAPER_CONFIG}, g_phi seeds 0, 1, 2 where run (BNAdapt), else 0, "
                        f"{n(s.table1.corruptions)} corruptions (CIFAR-10C-imb: {n(s.more_settings.imb_corruptions)}; notebook 06)",
        "all_corruptions": f"TENT on CIFAR-10C-imb and MEMO on CIFAR-10C-LT over all {len(CORRUPTIONS)} corruptions "
                           f"where computed ({main_of('all_corruptions')}; results file all_corruptions)",
        "sensitivity_all_corruptions": f"notebook 08's TENT and test-batch cells over all {len(CORRUPTIONS)} corruptions "
                                       f"where computed ({ablation}; the alpha table's cells at the table's alpha; results file "
                                       f"sensitivity_all_corruptions)",
        "paper_note": f"NOTE's rows at the paper's g_phi: its IABN fine-tuned {PAPER_IABN_EPOCHS} epochs where they are "
                      f"computed (results file paper_note), else {s.methods.note_finetune_epochs}",
    }
    said = [parts[e] for e in experiments if e in parts]
    return "; ".join(dict.fromkeys(said)) + f" (the paper: {PAPER_CONFIG}, every corruption)" if said else ""


def ledger_changes(*, before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Every check whose verdict differs between two evaluations of the ledger (``evaluate``'s
    tables), with the reason: ``new check``, ``check removed``, ``reading`` (its condition changed)
    or ``noise model`` (same condition, another SE)."""
    key = ["claim", "check", "condition_key"]

    def keyed(t: pd.DataFrame) -> pd.DataFrame:
        t = t.assign(condition_key=t["condition"].str.replace(r" = -?[\d.]+$", "", regex=True))
        return t.assign(n=t.groupby(key[:2]).cumcount())

    a, b = keyed(before), keyed(after)
    merged = a.merge(b, on=["claim", "check", "n"], how="outer", suffixes=("_before", "_after"), indicator=True)
    rows = []
    for r in merged.astype(object).fillna("").to_dict("records"):
        if r["_merge"] == "right_only":
            reason, old, new = "new check", "", r["status_after"]
        elif r["_merge"] == "left_only":
            reason, old, new = "check removed", r["status_before"], ""
        else:
            old, new = r["status_before"], r["status_after"]
            if old == new:
                continue
            reason = "noise model" if r["condition_key_before"] == r["condition_key_after"] else "reading"
        rows.append({"claim": r["claim"], "check": r["check"], "condition before": r["condition_before"],
                     "condition after": r["condition_after"], "before": old, "after": new, "reason": reason})
    return pd.DataFrame(rows, columns=["claim", "check", "condition before", "condition after", "before", "after",
                                       "reason"])


def page_sources(*, profiles: tuple[str, ...] = REDUCED_PROFILES) -> dict[str, tuple[Path, str | None]]:
    """(committed results folder, corrupted stand-in) of each profile of ``docs/claims.md``."""
    return {p: (PAGE_RESULTS[p], Settings.from_profile(p).test.corrupted_dataset) for p in profiles}


def committed_page() -> str:
    """``docs/claims.md`` as the ledger and the committed smoke, cpu and gpu results give it, with the
    verdicts that changed against the cpu ledger before its second revision (``claims_before.csv``)."""
    before = PAGE_RESULTS["cpu"] / "claims_before.csv"
    changes = None
    if before.is_file():
        changes = ledger_changes(before=pd.read_csv(before, keep_default_na=False),
                                 after=evaluate("cpu", corrupted_dataset=page_sources()["cpu"][1]))
    return claims_page(sources=page_sources(), changes=changes)


def write_claims_page(*, path: Path = CLAIMS_PAGE) -> Path:
    """Write ``docs/claims.md`` (:func:`committed_page`)."""
    path.write_text(committed_page())
    return path
