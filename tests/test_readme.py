"""The README names the paper (title, authors, venue, link) as CITATION.cff does, states the licence
that LICENSE and pyproject.toml hold, and quotes the cpu claims tally that docs/claims.md shows."""

from __future__ import annotations

import json
import re
import tomllib

import yaml

from dartlib.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def test_the_readme_names_the_paper_as_the_citation_file_does():
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    paper = cff["preferred-citation"]
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert f"*{paper['title']}*" in " ".join(README.split())  # the title, in italics, across line breaks
    for author in paper["authors"]:
        assert f"{author['given-names']} " in README and author["family-names"] in README
    assert paper["url"] == "https://arxiv.org/abs/2411.15204" and f"<{paper['url']}>" in README
    assert paper["doi"] == "10.48550/arXiv.2411.15204" and "arXiv:2411.15204" in README


def test_the_licence_is_stated_once_everywhere():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    licence = pyproject["project"]["license"]["text"]
    assert licence == cff["license"] == "MIT"
    assert (REPO_ROOT / "LICENSE").read_text().splitlines()[0] == "MIT License"
    assert "## Licence\n\nMIT ([LICENSE](LICENSE))" in README


def tally(text: str) -> dict[str, int]:
    return {verdict: int(n) for n, verdict in re.findall(r"(\d+) (HOLDS|WITHIN NOISE|FAILS|NOT RUN)", text)}


def test_the_readme_quotes_the_cpu_claims_tally_of_the_ledger():
    page = (REPO_ROOT / "docs" / "claims.md").read_text()
    line = next(line for line in page.splitlines() if line.startswith("Checks over all claims"))
    cpu = {verdict: int(n) for verdict, n in re.findall(r"(HOLDS|WITHIN NOISE|FAILS|NOT RUN): (\d+)",
                                                       line.split("**cpu**")[1].split("**gpu**")[0])}
    paragraph = " ".join(README.split("**Claims, cpu profile.**")[1].split("\n\n")[0].split())
    quoted = tally(paragraph)
    assert quoted == cpu, "README.md's cpu tally differs from docs/claims.md: copy the numbers from its first lines"
    assert f"of {sum(cpu.values())} checks" in paragraph
    assert "[docs/claims.md](docs/claims.md)" in paragraph


def _ledger_tally(profile: str) -> dict[str, int]:
    """The tally of the claims ledger on ``profile``'s committed results, as `python -m dartlib
    claims --profile <profile>` prints it on its last line."""
    from dartlib.book import claims, claims_page

    table = claims.evaluate(profile, corrupted_dataset="cifar10c", folder=claims_page.PAGE_RESULTS[profile])
    return count_line_tally(claims_page.count_line(table=table))


def count_line_tally(line: str) -> dict[str, int]:
    """The counts of a line "HOLDS: a, WITHIN NOISE: b, FAILS: c, NOT RUN: d"."""
    return {verdict: int(n) for verdict, n in re.findall(r"(HOLDS|WITHIN NOISE|FAILS|NOT RUN): (\d+)", line)}


def test_every_ledger_tally_is_the_ledgers_own():
    """One set of ledger numbers everywhere: the README's cpu and gpu tallies, docs/results.md's gpu
    tally and results/gpu/claims.txt equal the ledger evaluated on the committed results now, every
    verdict named with its count."""
    cpu, gpu = _ledger_tally("cpu"), _ledger_tally("gpu")
    readme = " ".join(README.split())
    quoted_cpu = tally(readme.split("**Claims, cpu profile.**")[1].split("Every claim")[0])
    profiles_page = " ".join((REPO_ROOT / "docs" / "profiles.md").read_text().split())
    quoted_gpu = tally(profiles_page.split("- **gpu**:")[1].split("- **paper-c10**")[0])
    results = " ".join((REPO_ROOT / "docs" / "results.md").read_text().split())
    in_results = tally(results.split("The claims ledger on gpu")[1].split(". ")[0])
    claims_txt = next(line for line in (REPO_ROOT / "results" / "gpu" / "claims.txt").read_text().splitlines()[::-1]
                      if line.startswith("HOLDS: "))
    assert quoted_cpu == cpu, f"README.md's cpu tally {quoted_cpu}; the ledger: {cpu}"
    assert quoted_gpu == gpu, f"docs/profiles.md's gpu tally {quoted_gpu}; the ledger: {gpu}"
    assert in_results == gpu, f"docs/results.md's gpu tally {in_results}; the ledger: {gpu}"
    assert count_line_tally(claims_txt) == gpu, (
        "results/gpu/claims.txt is not the ledger's: python -m dartlib claims --profile gpu > results/gpu/claims.txt")
    assert f"of {sum(gpu.values())} checks" in profiles_page.split("- **gpu**:")[1]
    # the cpu book's notebook 99, as it ran on the committed results
    notebook = json.loads((REPO_ROOT / "results" / "cpu" / "notebooks" / "99_claims.ipynb").read_text())
    printed = ["".join(o.get("text", "")) for c in notebook["cells"] for o in c.get("outputs", [])]
    line = next(next(x for x in t.strip().splitlines()[::-1] if x.startswith("HOLDS: "))
                for t in printed if "claims on profile cpu" in t)
    assert count_line_tally(line) == cpu, (
        "results/cpu/notebooks/99_claims.ipynb is not the ledger's: python -m dartlib run --profile cpu --publish 99")


def test_the_two_commands_come_first_and_every_notebook_is_listed():
    before = README.split("## Two commands")[0]
    assert "make reproduce" in README.split("## ")[1] and "make test" in README.split("## ")[1]
    assert "**The paper.**" not in before and "![" not in before, "the set-up commands come before the paper and figure"
    listed = set(re.findall(r"^\| `(\d\d_\w+)` \|", README, flags=re.M))
    notebooks = {p.stem for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert sorted(notebooks - listed) == [], "notebooks missing from README.md's table"


def test_the_readmes_example_runs_as_written_on_a_small_model(tmp_path, monkeypatch):
    """The README's ten lines, with `model`, `(x, y)` and `x_test_batch` bound to a small BatchNorm
    CNN and 400 random images (float N x 3 x 32 x 32 in [0, 1]); DartConfig's settings shrunk so
    that it runs in seconds (the README shows the paper's defaults)."""
    import functools

    import torch
    from torch import nn

    from dartlib.dart.refiner import DartConfig

    block = README.split("## DART on your own model")[1].split("```python\n")[1].split("```")[0]
    assert len(block.strip().splitlines()) <= 10, block
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 10)).eval()
    x, y = torch.rand(400, 3, 32, 32), torch.arange(400) % 10
    scope = {"model": model, "x": x, "y": y, "x_test_batch": x[:64]}
    code = block.replace("from dartlib.dart.refiner import DartConfig\n", "")
    assert code != block  # the README imports DartConfig; here it is the small one
    scope["DartConfig"] = functools.partial(DartConfig, per_class=20, n_dir=4, epochs=1)
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["logits"].shape == (64, 10) and torch.isfinite(scope["logits"]).all()
    assert list((tmp_path / "cache" / "refiners").glob("*.pt"))  # fit_refiner's cache, in the data root
