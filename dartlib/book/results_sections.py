"""The generated blocks of ``docs/results.md`` and ``docs/profiles.md`` beyond the paper's
configuration (:mod:`dartlib.book.results_page` collects them): each renders committed rows, the
paper's committed tables (``data/paper/``) or the claims ledger on them, never a number typed by hand.

Blocks (``NAME``): Table 1's BNAdapt rows and CIFAR-10C-imb over notebook 15's three seed replicas
beside the paper's mean ± std (``table1_seeds``, :func:`dartlib.studies.diagnosis.seed_table`); the gpu
profile's Table 1 and CIFAR-10C-imb means beside the paper's (``gpu_table1``, ``gpu_imb``, from
``results/gpu/table1.csv`` and ``results/gpu/online_imbalance.csv``); the gpu ledger's tally
(``gpu_claims_tally``, :func:`claims_tally`); notebook 14's backbone study
(``backbone_study``, :func:`dartlib.studies.backbone_strength.report`); and docs/deviations.md's
JPEG bound (``jpeg_bound``, :func:`dartlib.studies.jpeg_bound.jpeg_bound_table`) and docs/using-dart.md's
alpha advice (``alpha_advice``, the committed output of ``benchmarks/alpha_advice.py``); docs/gpu.md's H200
rates (``paper_c10_rates``, ``results/paper-c10/rates.txt`` as the benchmark wrote it)."""

from __future__ import annotations

import pandas as pd

from dartlib.paths import REPO_ROOT, results_dir

_LABELS = {"noadapt": "NoAdapt", "bnadapt": "BNAdapt", "tent": "TENT", "pl": "PL", "sar": "SAR"}


def markdown(frame: pd.DataFrame, *, first: str | None = None) -> str:
    """``frame`` as a markdown table, its columns as they are named; its index the first column,
    headed ``first``, or left out where ``first`` is None."""
    head = ([first] if first is not None else []) + list(map(str, frame.columns))
    rows = [([str(i)] if first is not None else []) + list(map(str, row)) for i, row in zip(frame.index, frame.to_numpy())]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def seeds_block(*, profile: str) -> str:
    """Notebook 15's seed replicas of Table 1's refiner (``results/<profile>/diagnosis.csv``): per
    setting, mean ± std over seeds of the mean over the corruptions, beside the paper's mean ± std."""
    from dartlib.experiments.settings import Settings
    from dartlib.studies import diagnosis_report

    settings = Settings.from_profile(profile)
    table = diagnosis_report.report(profile=profile, names=settings.diagnosis.variants).seed_table("table1")
    return markdown(table.rename(columns={"method": "row", "ours": "ours, mean ± std over seeds",
                                          "paper": "paper, mean ± std over 4 seeds"}))


def _paper_means(name: str) -> pd.Series:
    """The paper's mean over corruptions of its committed table ``name``, by (method, refiner, shift_param)."""
    from dartlib.reporting.paper import load_table

    paper = load_table(name)
    paper = paper[(paper["dataset"] == "cifar10c") & (paper["corruption"] == "mean")]
    return paper.set_index(["method", "refiner", "shift_param"])["accuracy"]


def _means(path) -> pd.Series:
    """The mean accuracy over the corruptions of a results file, by (method, refiner, shift_param)."""
    from dartlib.experiments.grid import read_results

    rows = read_results(path)
    return rows.groupby(["method", "refiner", "shift_param"])["accuracy"].mean()


def _cell(means: pd.Series, key: tuple) -> str:
    return f"{means[key]:.1f}" if key in means.index else ""


def gpu_table1_block(*, profile: str = "gpu") -> str:
    """The gpu profile's Table 1 CIFAR-10C-LT means (``results/gpu/table1.csv``, the methods it ran),
    "paper / gpu" per rho."""
    ours, paper = _means(results_dir(profile) / "table1.csv"), _paper_means("table1_main")
    rhos = sorted({float(r) for r in ours.index.get_level_values("shift_param")})
    out = []
    for method in [m for m in _LABELS if m in ours.index.get_level_values("method")]:
        for refiner in ("none", "dart"):
            key = (method, refiner)
            if not any(key + (r,) in ours.index for r in rhos):
                continue
            row = {"method": _LABELS[method] + ("+DART" if refiner == "dart" else "")}
            for rho in rhos:
                row[f"rho = {rho:g}, paper / {profile}"] = f"{_cell(paper, key + (rho,))} / {_cell(ours, key + (rho,))}"
            out.append(row)
    return markdown(pd.DataFrame(out))


def gpu_imb_block(*, profile: str = "gpu") -> str:
    """The gpu profile's CIFAR-10C-imb means (``results/gpu/online_imbalance.csv``) per line and IR,
    with the paper's (its CIFAR-10C-imb table) beside where it has the line."""
    ours, paper = _means(results_dir(profile) / "online_imbalance.csv"), _paper_means("app_cifar10c_imb")
    irs = sorted({float(r) for r in ours.index.get_level_values("shift_param")})
    out = []
    for method, refiner in dict.fromkeys((m, r) for m, r, _ in ours.index):
        suffix = "" if refiner == "none" else "+" + refiner.upper().replace("-SPLIT", "-split")
        row = {"line": _LABELS.get(method, method) + suffix}
        for ir in irs:
            theirs = _cell(paper, (method, refiner, ir))
            row[f"IR {ir:g}, {profile} (paper)"] = _cell(ours, (method, refiner, ir)) + (f" ({theirs})" if theirs else "")
        out.append(row)
    frame = pd.DataFrame(out)
    return markdown(frame)


def backbone_block(*, profile: str = "cpu") -> str:
    """Notebook 14's points (``results/<profile>/backbone_study.csv``) with the gpu profile's width-64
    point, ordered by BNAdapt's accuracy at rho = 1."""
    from dartlib.experiments.settings import Settings
    from dartlib.studies import backbone_strength

    settings = Settings.from_profile(profile)
    table = backbone_strength.report(rows=backbone_strength.study_results(
        profile=profile, compute=False, archs=settings.backbone_study.archs,
        severities=settings.backbone_study.severities)).points()
    width = table["arch"].str.extract(r"-w(\d+)$")[0].fillna("64 (gpu profile)")
    return markdown(pd.DataFrame({
        "backbone, severity": [f"width {w}, s{s}" for w, s in zip(width, table["severity"])],
        "NoAdapt": table["noadapt"].map("{:.1f}".format), "BNAdapt, rho = 1": table["bnadapt"].map("{:.1f}".format),
        "DART's cost, rho = 1": table["rho1_cost"].map("{:.2f}".format),
        "DART's gain, IR 50": table["ir50_gain"].map("{:+.1f}".format),
        "IR 5000": table["ir5000_gain"].map("{:+.1f}".format)}))


def jpeg_block(*, profile: str) -> str:
    """The JPEG copy's bound (``results/<profile>/jpeg_bound.csv``, :func:`dartlib.studies.jpeg_bound.jpeg_bound_table`):
    each method as it is and after one more JPEG round trip, mean over the corruptions ± SE, and the
    change paired image by image."""
    from dartlib.experiments.grid import folder_outcomes, read_results
    from dartlib.studies.jpeg_bound import jpeg_bound_table

    folder = results_dir(profile)
    table = jpeg_bound_table(rows=read_results(folder / "jpeg_bound.csv"), outcomes=folder_outcomes(folder))
    names = [_LABELS[m] + ("+DART" if r == "dart" else "") for m, r in zip(table["method"], table["refiner"])]
    return markdown(pd.DataFrame({"method": names, "as it is": table["as is"],
                                  "one more JPEG round trip": table["re-JPEG"], "change": table["change"]}))


_ADVICE_MODELS = {"smoke": "the smoke model (small CNN, RGB 32 x 32)", "grey": "a grey 28 x 28 CNN (300 steps)",
                  "docs": "this page's model"}


def alpha_advice_block(*, folder=REPO_ROOT / "benchmarks" / "results") -> str:
    """``benchmarks/alpha_advice.py``'s committed output (``alpha_advice.csv``, and from
    ``alpha_advice.txt`` the candidates each choice cannot be separated from): per model and held-out
    set, the chosen alpha, what the chooser says, and its held-out estimate beside the test streams'
    gain, without and with label shift (bold: the two differ by more than 2 SE of their difference)."""
    import re

    rows = pd.read_csv(folder / "alpha_advice.csv")
    unseparated = [m.group(1) if m else None for m in (
        re.search(r"cannot separate it from alpha = (.*?) \(", section)
        for section in (folder / "alpha_advice.txt").read_text().split("\n== ")[1:])]

    def pair(row, kind: str) -> str:
        test = f"{row[kind + '_test']:+.2f} ± {row[kind + '_test_se']:.2f}"
        return (f"{row[kind + '_heldout']:+.2f} ± {row[kind + '_heldout_se']:.2f} / "
                + (test if row[kind + "_within_2se"] else f"**{test}**"))

    out = []
    for (_, row), others in zip(rows.iterrows(), unseparated):
        says = [] if row["helps"] else ["does not help"]
        says += [] if others is None else [f"cannot separate from {others}"]
        out.append({"model": _ADVICE_MODELS.get(row["model"], row["model"]), "held out from": row["held_out_from"],
                    "alpha": f"{row['alpha']:g}", "says": "; ".join(says) or "separates; helps",
                    "no shift: held-out / test": pair(row, "iid"), "shifted: held-out / test": pair(row, "shifted")})
    return markdown(pd.DataFrame(out))


def benchmark_table_block(*, path) -> str:
    """The markdown table a benchmark wrote into its committed output ``path`` (its ``|`` lines, as
    written; ``results/paper-c10/rates.txt`` from ``benchmarks/device_paths.py``), under the line that
    names its device."""
    lines = path.read_text().splitlines()
    return lines[0] + "\n\n" + "\n".join(line for line in lines if line.startswith("|")) + "\n"


def claims_tally(*, profile: str) -> str:
    """The README's tally of the claims ledger on ``profile``'s committed results (the counts of
    :func:`dartlib.book.claims_page.count_line` and :func:`~dartlib.book.claims_page.size_line`), in words."""
    from dartlib.book.claims import evaluate
    from dartlib.book.claims_page import PAGE_RESULTS, size_counts, verdict_counts
    from dartlib.experiments.settings import Settings

    table = evaluate(profile, corrupted_dataset=Settings.from_profile(profile).test.corrupted_dataset,
                     folder=PAGE_RESULTS[profile])
    size = size_counts(table=table)
    return (f"of {len(table)} checks, " + ", ".join(f"{n} {v}" for v, n in verdict_counts(table=table).items())
            + f". Size, for the {sum(size.values())} checks of a sentence that states one: "
            + ", ".join(f"{n} {s.lower()}" for s, n in size.items()) + ".\n")


def section_blocks(*, profile: str) -> dict[str, str]:
    """The blocks of this module for ``docs/results.md``, by name."""
    return {"table1_seeds": seeds_block(profile=profile), "gpu_table1": gpu_table1_block(),
            "gpu_imb": gpu_imb_block(), "gpu_claims_tally": ("The claims ledger on gpu (`python -m dartlib claims --profile gpu`, kept in "
                                 "`results/gpu/claims.txt`): " + claims_tally(profile="gpu")),
            "backbone_study": backbone_block(profile=profile)}
