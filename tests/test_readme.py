"""The README names the paper (title, authors, venue, link) as CITATION.cff does, states the licence
that LICENSE and pyproject.toml hold, and quotes the cpu claims tally that docs/claims.md shows."""

from __future__ import annotations

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
