"""Checks of the paper-number transcriptions in ``data/paper/``.

Two groups of tests:

* CSV-only tests (schema, vocabulary, duplicate keys, value ranges, loader, agreement between
  the paper's own tables) always run.
* Tests against the LaTeX source need ``../shared/paper/dart_paper.tex`` next to the repository
  and are skipped when it is absent.  They locate each table environment by its ``\\label`` (or,
  for the unlabeled "Full results" tables, by caption) and parse the tabular with the small
  helpers below, which are independent of however the CSV files were produced.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAPER_DIR = REPO / "data" / "paper"
TEX_PATH = Path(__file__).resolve().parents[2] / "shared" / "paper" / "dart_paper.tex"

SCHEMA = [
    "table", "experiment", "dataset", "shift", "shift_param", "corruption", "severity",
    "method", "refiner", "params", "seed", "n", "accuracy", "std",
]
COST_COLUMNS = [
    "table", "experiment", "dataset", "method", "refiner", "params_m", "trainable_params_m",
    "flops_g", "wall_clock_s",
]
KEY = ["dataset", "shift", "shift_param", "corruption", "severity", "method", "refiner", "params"]

CORRUPTIONS = [
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
    "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform",
    "pixelate", "jpeg_compression",
]
DATASETS = {"cifar10c", "cifar10.1", "cifar100c", "imagenet-c", "pacs", "officehome",
            "domainnet126", "cifar10"}
SHIFTS = {"lt", "lt-inverse", "online-imb", "dirichlet", "natural", "none"}
METHODS = {"noadapt", "bnadapt", "tent", "pl", "note", "lame", "delta", "ods", "sar", "memo", "roid"}
REFINERS = {"none", "dart", "dart-split", "dart-pbar-only", "dart-w-only", "dart-b-only",
            "dart-sampling-unif-lt", "dart-additive", "dart-condensed"}
DOMAINS = {
    "pacs": {"art", "cartoon", "photo", "sketch"},
    "officehome": {"art", "clipart", "product", "real"},
    "domainnet126": {"real", "clipart", "painting", "sketch"},
}

# Every results table of the paper that carries a \label (the cost table included).
RESULTS_LABELS = [
    "table: cifar10lt",
    "table: onlineimb",
    "table: ablation",
    "table: ablation_dirichlet",
    "table: dart_variant_pred_ref",
    "table: additoinal_cost",
    "table: dart-split on cifar10clt",
    "table: cifar-100c-imb",
    "tab: diff alpha",
    "table: condensed_tr_data",
    "table: mixed",
    "table: small_batch_size",
    "table: hyperparameter",
    "tab: diff epochs",
    "table: cifar10c-imb",
    "table: domainnet",
    "table: memo",
]
# The "Full results" tables have no \label: file stem -> a caption fragment unique to it.
UNLABELED = {
    "full_cifar10c_lt_rho1": r"on CIFAR-10C-LT ($\rho=1$)",
    "full_cifar10c_lt_rho10": r"on CIFAR-10C-LT ($\rho=10$)",
    "full_cifar10c_lt_rho100": r"on CIFAR-10C-LT ($\rho=100$)",
    "full_pacs": r"Average accuracy (\%) on PACS.",
    "full_officehome": r"Average accuracy (\%) on OfficeHome.",
    "full_cifar100c_imb_ir1": "on CIFAR-100C-imb (IR1)",
    "full_cifar100c_imb_ir200": "on CIFAR-100C-imb (IR200)",
    "full_cifar100c_imb_ir500": "on CIFAR-100C-imb (IR500)",
    "full_cifar100c_imb_ir50000": "on CIFAR-100C-imb (IR50000)",
    "full_imagenet_c_imb_ir1": "on ImageNet-C-imb (IR1)",
    "full_imagenet_c_imb_ir1000": "on ImageNet-C-imb (IR1000)",
    "full_imagenet_c_imb_ir5000": "on ImageNet-C-imb (IR5000)",
    "full_imagenet_c_imb_ir500000": "on ImageNet-C-imb (IR500000)",
}
# Table environments that are deliberately not transcribed (no numbers).
NOT_RESULTS = ["Notation and definitions"]

LABELED_FILES = {
    "table1_main": "table: cifar10lt",
    "table2_online_imb": "table: onlineimb",
    "table3_ablation_io": "table: ablation",
    "table4_ablation_sampling": "table: ablation_dirichlet",
    "table5_ablation_output": "table: dart_variant_pred_ref",
    "app_cost": "table: additoinal_cost",
    "app_dart_split_cifar10c_lt": "table: dart-split on cifar10clt",
    "app_dart_split_large_scale": "table: cifar-100c-imb",
    "app_alpha": "tab: diff alpha",
    "app_condensed": "table: condensed_tr_data",
    "app_mixed": "table: mixed",
    "app_batch_size": "table: small_batch_size",
    "app_hyperparameters": "table: hyperparameter",
    "app_epochs": "tab: diff epochs",
    "app_cifar10c_imb": "table: cifar10c-imb",
    "app_domainnet": "table: domainnet",
    "app_memo": "table: memo",
}
FILE_LABEL = dict(LABELED_FILES, **{stem: f"unlabeled: {stem}" for stem in UNLABELED})
RESULTS_FILES = sorted(s for s in FILE_LABEL if s != "app_cost")

# stem -> (data rows, leading label cells per row, value cells per row, value cells printed "-")
SHAPES = {
    "table1_main": (17, 1, 8, 0),
    "table2_online_imb": (4, 1, 8, 4),
    "table3_ablation_io": (5, 5, 3, 0),
    "table4_ablation_sampling": (3, 3, 7, 0),
    "table5_ablation_output": (3, 3, 3, 0),
    "app_cost": (5, 1, 3, 0),
    "app_dart_split_cifar10c_lt": (3, 1, 3, 0),
    "app_dart_split_large_scale": (9, 1, 8, 0),
    "app_alpha": (10, 2, 3, 0),
    "app_condensed": (3, 2, 3, 0),
    "app_mixed": (5, 1, 2, 0),
    "app_batch_size": (5, 1, 6, 0),
    "app_hyperparameters": (4, 2, 12, 0),
    "app_epochs": (5, 1, 3, 0),
    "app_cifar10c_imb": (5, 1, 5, 0),
    "app_domainnet": (2, 1, 13, 0),
    "app_memo": (4, 1, 3, 0),
    "full_cifar10c_lt_rho1": (17, 1, 15, 0),
    "full_cifar10c_lt_rho10": (17, 1, 15, 0),
    "full_cifar10c_lt_rho100": (17, 1, 15, 0),
    "full_pacs": (17, 1, 13, 0),
    "full_officehome": (17, 1, 13, 0),
    "full_cifar100c_imb_ir1": (9, 1, 15, 0),
    "full_cifar100c_imb_ir200": (9, 1, 15, 0),
    "full_cifar100c_imb_ir500": (9, 1, 15, 0),
    "full_cifar100c_imb_ir50000": (9, 1, 15, 0),
    "full_imagenet_c_imb_ir1": (9, 1, 15, 0),
    "full_imagenet_c_imb_ir1000": (9, 1, 15, 0),
    "full_imagenet_c_imb_ir5000": (9, 1, 15, 0),
    "full_imagenet_c_imb_ir500000": (9, 1, 15, 0),
}


# --------------------------------------------------------------------------------------------
# CSV helpers (plain csv module: values compared as the exact printed strings)
# --------------------------------------------------------------------------------------------
def read_rows(stem: str) -> tuple[list[str], list[dict]]:
    with (PAPER_DIR / f"{stem}.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def lookup(stem: str, **key) -> dict:
    _, rows = read_rows(stem)
    hits = [r for r in rows if all(r[k] == str(v) for k, v in key.items())]
    assert len(hits) == 1, f"{stem}: {len(hits)} rows match {key}"
    return hits[0]


# --------------------------------------------------------------------------------------------
# LaTeX helpers (independent parser of the paper source)
# --------------------------------------------------------------------------------------------
NUM = r"\d+(?:\.\d+)?"


@pytest.fixture(scope="module")
def tex() -> str:
    if not TEX_PATH.is_file():
        pytest.skip(f"paper source not found: {TEX_PATH} (it lives in ../shared, outside the repo)")
    return TEX_PATH.read_text(encoding="utf-8")


def table_envs(source: str) -> list[str]:
    envs, pos = [], 0
    while True:
        start = source.find("\\begin{table}", pos)
        if start < 0:
            return envs
        end = source.index("\\end{table}", start)
        envs.append(source[start:end])
        pos = end


def env_label(env: str) -> str | None:
    m = re.search(r"\\label\{([^}]*)\}", env)
    return m.group(1) if m else None


def find_env(source: str, stem: str) -> str:
    if stem in UNLABELED:
        hits = [e for e in table_envs(source) if env_label(e) is None and UNLABELED[stem] in e]
    else:
        hits = [e for e in table_envs(source) if env_label(e) == FILE_LABEL[stem]]
    assert len(hits) == 1, f"{stem}: {len(hits)} table environments match"
    return hits[0]


def data_rows(env: str) -> list[list[str]]:
    """Cells of the rows after the header (the header ends at the first \\midrule)."""
    m = re.search(r"\\begin\{tabular\}\{[^{}]*\}", env)
    body = env[m.end(): env.index("\\end{tabular}", m.end())]
    _, _, data = body.partition("\\midrule")
    rows = []
    for raw in data.split("\\\\"):
        text = re.sub(r"\\(?:toprule|midrule|bottomrule|hline)", " ", raw)
        text = text.replace("\\rowcolor{Gray}", " ").strip()
        if text:
            rows.append([c.strip() for c in text.split("&")])
    return rows


def norm_header(cell: str) -> str:
    s = re.sub(r"\\multirow\{[^}]*\}\{[^}]*\}", "", cell)
    s = re.sub(r"\\cite\{[^}]*\}", "", s)
    s = s.replace("~", " ").replace("{", "").replace("}", "").replace("(ours)", "")
    s = re.sub(r"\s*\+\s*", "+", s)
    return " ".join(s.split())


def find_row(rows: list[list[str]], header: str, nth: int = 0) -> list[str]:
    """The nth row whose (normalised) header is ``header``; blank/'~' headers continue a multirow."""
    current, hits = None, []
    for cells in rows:
        h = norm_header(cells[0])
        current = h or current
        if current == header:
            hits.append(cells)
    assert len(hits) > nth, f"row {header!r} #{nth} not found (have {len(hits)})"
    return hits[nth]


def parse_cell(cell: str) -> tuple[str, str] | None:
    """'85.2$\\pm$0.1' -> ('85.2', '0.1'); '85.3' -> ('85.3', ''); '-' -> None."""
    s = cell.replace("\\textbf", "").replace("{", "").replace("}", "")
    s = re.sub(r"\(\+[^)]*\)", "", s).strip()  # "(+1.93\%)" gain note in the DomainNet table
    if s == "-":
        return None
    m = re.fullmatch(rf"({NUM})\s*\$\\pm\$\s*({NUM})", s)
    if m:
        return m.group(1), m.group(2)
    if re.fullmatch(NUM, s):
        return s, ""
    raise ValueError(f"not a value cell: {cell!r}")


# --------------------------------------------------------------------------------------------
# CSV-only tests
# --------------------------------------------------------------------------------------------
def test_file_set_matches_expected_tables():
    on_disk = {p.stem for p in PAPER_DIR.glob("*.csv")}
    assert on_disk == set(FILE_LABEL)
    readme = (PAPER_DIR / "README.md").read_text(encoding="utf-8")
    for stem in FILE_LABEL:
        assert f"{stem}.csv" in readme, f"{stem}.csv not described in README.md"


@pytest.mark.parametrize("stem", RESULTS_FILES)
def test_schema_and_vocabulary(stem):
    header, rows = read_rows(stem)
    assert header == SCHEMA
    assert rows, f"{stem} is empty"
    for r in rows:
        assert r["table"] == FILE_LABEL[stem]
        assert r["experiment"] == stem
        assert r["dataset"] in DATASETS
        assert r["shift"] in SHIFTS
        assert r["method"] in METHODS
        assert r["refiner"] in REFINERS
        assert r["seed"] == "paper"
        assert r["n"] == ""
        if r["shift"] in ("natural", "none"):
            assert r["shift_param"] == ""
        else:
            assert float(r["shift_param"]) > 0
        if r["dataset"] in ("cifar10c", "cifar100c", "imagenet-c"):
            assert r["severity"] == "5"
            assert r["corruption"] in CORRUPTIONS or r["corruption"] in ("mean", "mixed")
        else:
            assert r["severity"] == ""
        if r["dataset"] in DOMAINS:
            if r["corruption"] != "mean":
                src, _, dst = r["corruption"].partition("->")
                assert {src, dst} <= DOMAINS[r["dataset"]] and src != dst, r["corruption"]
        if r["dataset"] == "cifar10.1":
            assert r["corruption"] == ""
        if r["params"]:
            assert re.fullmatch(r"[a-z_]+=[\w.]+(;[a-z_]+=[\w.]+)*", r["params"]), r["params"]
        acc = float(r["accuracy"])
        assert 0.0 <= acc <= 100.0
        assert re.fullmatch(NUM, r["accuracy"])
        if r["std"] != "":
            assert re.fullmatch(NUM, r["std"]) and 0.0 <= float(r["std"]) < 100.0


@pytest.mark.parametrize("stem", RESULTS_FILES)
def test_no_duplicate_keys(stem):
    _, rows = read_rows(stem)
    keys = Counter(tuple(r[k] for k in KEY) for r in rows)
    dups = [k for k, c in keys.items() if c > 1]
    assert not dups, f"{stem}: duplicate keys {dups[:3]}"


def test_cost_table_schema():
    header, rows = read_rows("app_cost")
    assert header == COST_COLUMNS
    assert len(rows) == 5
    for r in rows:
        assert r["table"] == "table: additoinal_cost" and r["experiment"] == "app_cost"
        assert r["method"] in METHODS and r["refiner"] in REFINERS
        for col in COST_COLUMNS[5:]:
            assert float(r[col]) >= 0


def _acc(stem, **key):
    return float(lookup(stem, **key)["accuracy"])


# Averages in the summary tables vs per-corruption / per-scenario values of the full tables.
MEAN_PAIRS = (
    [(f"full_cifar10c_lt_rho{r}", "table1_main", {"dataset": "cifar10c", "shift_param": r})
     for r in (1, 10, 100)]
    + [(f"full_cifar100c_imb_ir{i}", "app_dart_split_large_scale",
        {"dataset": "cifar100c", "shift_param": i}) for i in (1, 200, 500, 50000)]
    + [(f"full_imagenet_c_imb_ir{i}", "app_dart_split_large_scale",
        {"dataset": "imagenet-c", "shift_param": i}) for i in (1, 1000, 5000, 500000)]
)


@pytest.mark.parametrize("full,summary,where", MEAN_PAIRS)
def test_full_tables_average_to_summary(full, summary, where):
    _, rows = read_rows(full)
    by_method: dict[tuple, list[float]] = {}
    for r in rows:
        by_method.setdefault((r["method"], r["refiner"]), []).append(float(r["accuracy"]))
    for (method, refiner), vals in by_method.items():
        assert len(vals) == 15
        reported = _acc(summary, method=method, refiner=refiner, corruption="mean", **where)
        assert abs(sum(vals) / 15 - reported) <= 0.1 + 1e-9, (full, method, refiner)


@pytest.mark.parametrize("full,dataset", [("full_pacs", "pacs"), ("full_officehome", "officehome")])
def test_domain_tables_consistent(full, dataset):
    _, rows = read_rows(full)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["refiner"]), []).append(r)
    assert len(groups) == 17
    for (method, refiner), rs in groups.items():
        mean = [r for r in rs if r["corruption"] == "mean"]
        scen = [float(r["accuracy"]) for r in rs if r["corruption"] != "mean"]
        assert len(mean) == 1 and len(scen) == 12
        assert abs(sum(scen) / 12 - float(mean[0]["accuracy"])) <= 0.1 + 1e-9
        main = lookup("table1_main", dataset=dataset, method=method, refiner=refiner)
        assert (main["accuracy"], main["std"]) == (mean[0]["accuracy"], mean[0]["std"])


def test_shared_rows_agree_across_tables():
    lt = {"dataset": "cifar10c", "shift": "lt", "corruption": "mean"}
    for rho in (1, 10, 100):
        base = lookup("table1_main", method="bnadapt", refiner="none", shift_param=rho, **lt)
        dart = lookup("table1_main", method="bnadapt", refiner="dart", shift_param=rho, **lt)
        for stem in ("table3_ablation_io", "table4_ablation_sampling", "table5_ablation_output",
                     "app_dart_split_cifar10c_lt", "app_condensed"):
            for ref, row in (("none", base), ("dart", dart)):
                other = lookup(stem, method="bnadapt", refiner=ref, shift_param=rho, **lt)
                assert (other["accuracy"], other["std"]) == (row["accuracy"], row["std"]), stem
        used = lookup("app_hyperparameters", method="bnadapt", refiner="dart", shift_param=rho,
                      params="int_batch=64;hidden=1000", **lt)
        assert (used["accuracy"], used["std"]) == (dart["accuracy"], dart["std"])
        assert lookup("app_epochs", params="epochs=50", shift_param=rho)["accuracy"] == dart["accuracy"]
    t2 = read_rows("table2_online_imb")[1]
    for r in t2:
        if r["refiner"] == "dart":
            continue  # DART (not -split) appears only in Table 2
        other = lookup("app_dart_split_large_scale", dataset=r["dataset"], shift_param=r["shift_param"],
                       method=r["method"], refiner=r["refiner"])
        assert (other["accuracy"], other["std"]) == (r["accuracy"], r["std"])


def test_loader(monkeypatch, tmp_path):
    from dartlib.reporting import paper

    monkeypatch.chdir(tmp_path)  # paths must not depend on the working directory
    assert set(paper.TABLES) == set(FILE_LABEL)
    total = 0
    for name, meta in paper.TABLES.items():
        assert meta["label"] == FILE_LABEL[name]
        assert meta["file"] == f"{name}.csv" and meta["caption"]
        df = paper.load_table(name)
        if name == "app_cost":
            assert list(df.columns) == COST_COLUMNS
        else:
            assert list(df.columns) == SCHEMA
            assert df["accuracy"].between(0, 100).all()
            total += len(df)
    assert total == len(paper.load_all()) == 2782
    for exc in (KeyError, ValueError):
        with pytest.raises(exc) as info:
            paper.load_table("no_such_table")
        assert "table1_main" in str(info.value)


# --------------------------------------------------------------------------------------------
# Tests against the LaTeX source
# --------------------------------------------------------------------------------------------
def test_every_results_table_is_transcribed(tex):
    envs = table_envs(tex)
    # every tabular of the paper sits in a table environment
    assert tex.count("\\begin{tabular}") == len(envs)
    labels = [env_label(e) for e in envs]
    assert sorted(lb for lb in labels if lb) == sorted(RESULTS_LABELS)
    unlabeled = [e for e in envs if env_label(e) is None]
    assert len(unlabeled) == len(UNLABELED) + len(NOT_RESULTS)
    for env in unlabeled:
        matches = [s for s, frag in UNLABELED.items() if frag in env]
        skipped = [frag for frag in NOT_RESULTS if frag in env]
        assert len(matches) + len(skipped) == 1, env[:200]
    transcribed = set()
    for stem in FILE_LABEL:
        _, rows = read_rows(stem)
        transcribed |= {r["table"] for r in rows}
    assert transcribed == set(RESULTS_LABELS) | {f"unlabeled: {s}" for s in UNLABELED}


@pytest.mark.parametrize("stem", sorted(SHAPES))
def test_cell_counts(tex, stem):
    n_rows, n_label, n_vals, n_dash = SHAPES[stem]
    rows = data_rows(find_env(tex, stem))
    assert len(rows) == n_rows
    assert all(len(cells) == n_label + n_vals for cells in rows)
    _, csv_rows = read_rows(stem)
    if stem == "app_cost":
        assert len(csv_rows) == n_rows
        return
    parsed = [parse_cell(c) for cells in rows for c in cells[n_label:]]
    assert sum(p is None for p in parsed) == n_dash
    assert len(csv_rows) == n_rows * n_vals - n_dash == sum(p is not None for p in parsed)


@pytest.mark.parametrize("stem", RESULTS_FILES)
def test_all_values_match_in_row_major_order(tex, stem):
    """Every printed value, read left to right and top to bottom, equals the CSV in file order."""
    _, n_label, _, _ = SHAPES[stem]
    rows = data_rows(find_env(tex, stem))
    from_tex = [p for cells in rows for p in map(parse_cell, cells[n_label:]) if p is not None]
    _, csv_rows = read_rows(stem)
    assert [(r["accuracy"], r["std"]) for r in csv_rows] == from_tex


def header_cells(env: str) -> list[str]:
    """Cells of the last header row (the row just before the first \\midrule)."""
    m = re.search(r"\\begin\{tabular\}\{[^{}]*\}", env)
    head = env[m.end():].partition("\\midrule")[0]
    last = [r for r in head.split("\\\\") if r.strip()][-1]
    last = re.sub(r"\\(?:toprule|midrule|bottomrule|hline)", " ", last)
    return [c.strip() for c in last.split("&")]


SCENARIO_DOMAINS = {
    "full_pacs": {"a": "art", "c": "cartoon", "p": "photo", "s": "sketch"},
    "full_officehome": {"a": "art", "c": "clipart", "p": "product", "r": "real"},
    "app_domainnet": {"r": "real", "c": "clipart", "p": "painting", "s": "sketch"},
}
COLUMN_KEYED = sorted(UNLABELED) + ["app_domainnet"]


@pytest.mark.parametrize("stem", COLUMN_KEYED)
def test_columns_follow_latex_header(tex, stem):
    """Per-corruption / per-scenario files: the corruption column follows the LaTeX header."""
    head = header_cells(find_env(tex, stem))[1:]
    if stem in SCENARIO_DOMAINS:
        dom = SCENARIO_DOMAINS[stem]
        cols = ["mean" if h == "avg" else f"{dom[h[0]]}->{dom[h[2]]}" for h in head]
    else:
        cols = [h.replace("\\_", "_") for h in head]
        assert cols == CORRUPTIONS
    _, csv_rows = read_rows(stem)
    n_rows = SHAPES[stem][0]
    assert [r["corruption"] for r in csv_rows] == cols * n_rows


ROW_KEYED = [s for s in RESULTS_FILES if SHAPES[s][1] == 1 and s not in ("app_epochs", "app_memo")]


@pytest.mark.parametrize("stem", ROW_KEYED)
def test_rows_follow_latex_row_headers(tex, stem):
    """Files whose rows are 'X', 'X+DART' or 'X+DART-split': method/refiner follow the row header."""
    _, _, n_vals, _ = SHAPES[stem]
    expected = []
    for cells in data_rows(find_env(tex, stem)):
        h = norm_header(cells[0]).lower().replace(" rs", "")  # typo "(ours)rs" in one header
        base, _, ref = h.partition("+")
        ref = ref or "none"
        assert base in METHODS and ref in ("none", "dart", "dart-split"), h
        expected += [(base, ref)] * sum(parse_cell(c) is not None for c in cells[1:])
    _, csv_rows = read_rows(stem)
    assert [(r["method"], r["refiner"]) for r in csv_rows] == expected


def test_cost_table_values(tex):
    rows = data_rows(find_env(tex, "app_cost"))
    want = {}
    for cells in rows:
        m = re.fullmatch(rf"({NUM}) M \(({NUM}) M\)", cells[1])
        fl = re.fullmatch(rf"({NUM}) G", cells[2])
        wc = re.fullmatch(rf"({NUM}) sec", cells[3])
        want[norm_header(cells[0])] = (m.group(1), m.group(2), fl.group(1), wc.group(1))
    names = {"NoAdapt": ("noadapt", "none"), "BNAdapt": ("bnadapt", "none"),
             "BNAdapt+DART": ("bnadapt", "dart"), "TENT": ("tent", "none"),
             "TENT+DART": ("tent", "dart")}
    assert set(want) == set(names)
    for header, (method, refiner) in names.items():
        r = lookup("app_cost", method=method, refiner=refiner)
        assert (r["params_m"], r["trainable_params_m"], r["flops_g"], r["wall_clock_s"]) == want[header]
    # spot values, as printed
    assert want["TENT+DART"] == ("35.0", "0.013", "1.72", "4.81")
    assert want["BNAdapt+DART"] == ("17.6", "0", "0.86", "2.35")


def K(method, refiner="none", **kw):
    return dict(method=method, refiner=refiner, **kw)


C10 = {"dataset": "cifar10c", "shift": "lt", "corruption": "mean"}
# (file, row header, which row with that header, cell index after splitting on "&"
#  (0 = row header), CSV key, printed accuracy, printed std)
SPOT_CHECKS = [
    ("table1_main", "NoAdapt", 0, 4, K("noadapt", dataset="cifar10.1", shift_param=1), "87.7", "0.0"),
    ("table1_main", "BNAdapt+DART", 0, 3, K("bnadapt", "dart", shift_param=100, **C10), "85.1", "0.3"),
    ("table1_main", "TENT+DART", 0, 3, K("tent", "dart", shift_param=100, **C10), "88.2", "0.3"),
    ("table1_main", "DELTA+DART", 0, 7, K("delta", "dart", dataset="pacs"), "81.7", "0.4"),
    ("table1_main", "SAR", 0, 1, K("sar", shift_param=1, **C10), "86.8", "0.1"),
    ("table1_main", "ODS+DART", 0, 6, K("ods", "dart", dataset="cifar10.1", shift_param=100), "88.5", "1.2"),
    ("table1_main", "NOTE", 0, 8, K("note", dataset="officehome"), "53.7", "0.3"),
    ("table2_online_imb", "BNAdapt+DART-split", 0, 8,
     K("bnadapt", "dart-split", dataset="imagenet-c", shift_param=500000), "8.2", "0.5"),
    ("table2_online_imb", "BNAdapt+DART", 0, 4, K("bnadapt", "dart", dataset="cifar100c", shift_param=50000),
     "22.7", "0.6"),
    ("table2_online_imb", "NoAdapt", 0, 6, K("noadapt", dataset="imagenet-c", shift_param=1000), "18.0", "0.1"),
    ("table3_ablation_io", "BNAdapt+DART", 0, 5, K("bnadapt", "dart-pbar-only", shift_param=1, **C10),
     "81.8", "1.6"),
    ("table3_ablation_io", "BNAdapt+DART", 1, 7, K("bnadapt", "dart-w-only", shift_param=100, **C10),
     "83.0", "0.5"),
    ("table3_ablation_io", "BNAdapt+DART", 2, 5, K("bnadapt", "dart-b-only", shift_param=1, **C10),
     "85.4", "0.0"),
    ("table3_ablation_io", "BNAdapt+DART", 3, 6, K("bnadapt", "dart", shift_param=10, **C10), "84.7", "0.1"),
    ("table4_ablation_sampling", "BNAdapt+DART", 1, 7,
     K("bnadapt", "dart-sampling-unif-lt", shift="online-imb", shift_param=20), "58.9", "0.5"),
    ("table4_ablation_sampling", "BNAdapt", 0, 9, K("bnadapt", shift="online-imb", shift_param=5000),
     "20.3", "0.1"),
    ("table4_ablation_sampling", "BNAdapt+DART", 0, 8, K("bnadapt", "dart", shift="online-imb", shift_param=50),
     "78.2", "0.1"),
    ("table5_ablation_output", "BNAdapt+DART", 1, 3, K("bnadapt", "dart-additive", shift_param=1, **C10),
     "82.0", "2.2"),
    ("table5_ablation_output", "BNAdapt+DART", 1, 5, K("bnadapt", "dart-additive", shift_param=100, **C10),
     "82.3", "1.6"),
    ("app_dart_split_cifar10c_lt", "BNAdapt+DART-split", 0, 3,
     K("bnadapt", "dart-split", shift_param=100, **C10), "76.1", "0.4"),
    ("app_dart_split_large_scale", "ODS+DART-split", 0, 7,
     K("ods", "dart-split", dataset="imagenet-c", shift_param=5000), "17.1", "0.6"),
    ("app_dart_split_large_scale", "SAR", 0, 2, K("sar", dataset="cifar100c", shift_param=200), "26.7", "0.4"),
    ("app_dart_split_large_scale", "TENT+DART-split", 0, 4,
     K("tent", "dart-split", dataset="cifar100c", shift_param=50000), "47.7", "0.7"),
    ("app_alpha", "BNAdapt+DART", 0, 4, K("bnadapt", "dart", params="alpha=0", shift_param=100), "85.8", ""),
    ("app_alpha", "TENT+DART", 0, 2, K("tent", "dart", params="alpha=0", shift_param=1), "84.4", ""),
    ("app_alpha", "TENT+DART", 2, 2, K("tent", "dart", params="alpha=0.1", shift_param=1), "86.4", ""),
    ("app_alpha", "BNAdapt+DART", 4, 3, K("bnadapt", "dart", params="alpha=1", shift_param=10), "83.5", ""),
    ("app_condensed", "BNAdapt+DART", 1, 4, K("bnadapt", "dart-condensed", shift_param=100), "81.4", "0.4"),
    ("app_condensed", "BNAdapt", 0, 3, K("bnadapt", shift_param=10), "79.0", "0.1"),
    ("app_mixed", "ROID", 0, 2, K("roid", shift="dirichlet", shift_param=0.1), "12.9", "1.2"),
    ("app_mixed", "BNAdapt+DART", 0, 2, K("bnadapt", "dart", shift="dirichlet"), "81.5", "0.8"),
    ("app_mixed", "ROID+DART", 0, 1, K("roid", "dart", shift="none"), "80.4", "0.1"),
    ("app_batch_size", "TENT", 0, 1, K("tent", params="test_batch=4"), "19.7", "0.6"),
    ("app_batch_size", "TENT+DART", 0, 1, K("tent", "dart", params="test_batch=4"), "51.3", "2.3"),
    ("app_batch_size", "BNAdapt+DART", 0, 6, K("bnadapt", "dart", params="test_batch=200"), "85.2", "0.1"),
    ("app_hyperparameters", "BNAdapt+DART", 1, 10,
     K("bnadapt", "dart", params="int_batch=64;hidden=1000", shift_param=100), "85.1", "0.3"),
    ("app_hyperparameters", "BNAdapt+DART", 2, 13,
     K("bnadapt", "dart", params="int_batch=128;hidden=2000", shift_param=100), "83.3", "0.4"),
    ("app_hyperparameters", "BNAdapt+DART", 0, 4,
     K("bnadapt", "dart", params="int_batch=32;hidden=250", shift_param=100), "83.1", "1.2"),
    ("app_hyperparameters", "BNAdapt", 0, 12, K("bnadapt", params="hidden=2000", shift_param=10), "79.0", "0.1"),
    ("app_epochs", "1", 0, 3, K("bnadapt", "dart", params="epochs=1", shift_param=100), "75.7", ""),
    ("app_epochs", "50 (used)", 0, 3, K("bnadapt", "dart", params="epochs=50", shift_param=100), "85.1", ""),
    ("app_cifar10c_imb", "TENT+DART", 0, 5, K("tent", "dart", shift_param=5000), "71.5", "1.3"),
    ("app_cifar10c_imb", "BNAdapt", 0, 2, K("bnadapt", shift_param=5), "77.1", "0.3"),
    ("app_domainnet", "BNAdapt+DART", 0, 13, K("bnadapt", "dart", corruption="mean"), "58.53", ""),
    ("app_domainnet", "BNAdapt", 0, 3, K("bnadapt", corruption="real->sketch"), "46.38", ""),
    ("app_domainnet", "BNAdapt", 0, 13, K("bnadapt", corruption="mean"), "56.60", ""),
    ("app_memo", "MEMO (stored BN)", 0, 1, K("memo", params="bn=stored", shift_param=1), "67.6", "0.1"),
    ("app_memo", "MEMO (adapted BN)+DART", 0, 2, K("memo", "dart", params="bn=adapted", shift_param=10),
     "87.8", "0.1"),
    ("full_cifar10c_lt_rho1", "NOTE+DART", 0, 3, K("note", "dart", corruption="impulse_noise"), "63.0", "2.9"),
    # the source prints this row header as "ODS+DART (ours) (ours)rs"
    ("full_cifar10c_lt_rho10", "ODS+DART rs", 0, 1, K("ods", "dart", corruption="gaussian_noise"), "78.0", "1.3"),
    ("full_cifar10c_lt_rho10", "DELTA+DART", 0, 3, K("delta", "dart", corruption="impulse_noise"), "67.5", "4.9"),
    ("full_cifar10c_lt_rho100", "NOTE", 0, 9, K("note", corruption="frost"), "81.8", "6.3"),
    ("full_cifar10c_lt_rho100", "TENT+DART", 0, 15, K("tent", "dart", corruption="jpeg_compression"),
     "84.0", "0.7"),
    ("full_pacs", "LAME+DART", 0, 12, K("lame", "dart", corruption="sketch->photo"), "78.8", "3.4"),
    ("full_pacs", "TENT", 0, 13, K("tent", corruption="mean"), "76.8", "0.6"),
    ("full_officehome", "SAR+DART", 0, 1, K("sar", "dart", corruption="art->clipart"), "49.1", "0.4"),
    ("full_officehome", "DELTA", 0, 9, K("delta", corruption="product->real"), "74.7", "0.2"),
    ("full_cifar100c_imb_ir1", "SAR+DART-split", 0, 3, K("sar", "dart-split", corruption="impulse_noise"),
     "45.1", "1.3"),
    ("full_cifar100c_imb_ir200", "BNAdapt+DART-split", 0, 4,
     K("bnadapt", "dart-split", corruption="defocus_blur"), "44.7", "1.4"),
    ("full_cifar100c_imb_ir500", "ODS+DART-split", 0, 7, K("ods", "dart-split", corruption="zoom_blur"),
     "64.1", "1.8"),
    ("full_cifar100c_imb_ir50000", "TENT", 0, 13, K("tent", corruption="elastic_transform"), "6.8", "0.1"),
    ("full_imagenet_c_imb_ir1", "SAR+DART-split", 0, 15, K("sar", "dart-split", corruption="jpeg_compression"),
     "49.4", "0.1"),
    ("full_imagenet_c_imb_ir1000", "BNAdapt+DART-split", 0, 11,
     K("bnadapt", "dart-split", corruption="brightness"), "43.7", "0.7"),
    ("full_imagenet_c_imb_ir5000", "ODS+DART-split", 0, 10, K("ods", "dart-split", corruption="fog"),
     "33.5", "1.7"),
    ("full_imagenet_c_imb_ir500000", "TENT", 0, 12, K("tent", corruption="contrast"), "0.3", "0.0"),
]


def test_spot_checks_cover_every_table():
    assert len(SPOT_CHECKS) >= 40
    assert {s[0] for s in SPOT_CHECKS} == set(RESULTS_FILES)


@pytest.mark.parametrize(
    "stem,header,nth,k,key,acc,std",
    SPOT_CHECKS,
    ids=[f"{s[0]}:{s[1]}#{s[2]}[{s[3]}]" for s in SPOT_CHECKS],
)
def test_spot_check(tex, stem, header, nth, k, key, acc, std):
    row = find_row(data_rows(find_env(tex, stem)), header, nth)
    from_tex = parse_cell(row[k])
    assert from_tex == (acc, std), f"parser read {from_tex} from {row[k]!r}"
    got = lookup(stem, **key)
    assert (got["accuracy"], got["std"]) == from_tex
    assert math.isclose(float(got["accuracy"]), float(acc))
