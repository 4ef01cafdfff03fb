"""No measured number typed by hand into the README or docs/ (dartlib.book.prose_numbers): the
checker on small fixture pages, then on every committed page."""

from __future__ import annotations

import pytest

from dartlib.book import prose_numbers


def _numbers(text: str) -> list[str]:
    return [f.number for f in prose_numbers.findings(text=text)]


def test_a_hand_typed_accuracy_gain_se_count_and_timing_are_found():
    page = ("BNAdapt reaches 71.44 on the stream.\n\nDART gains +5.9 ± 0.4 there.\n\n"
            "The suite: 1,424 passed in 36 s; 319 of the 10,000 images differ.\n")
    assert _numbers(page) == ["71.44", "+5.9", "0.4", "1,424", "36", "319"]


def test_generated_blocks_code_settings_versions_and_references_are_not_findings():
    page = ("<!-- generated: gains -->\n| method | gain |\n| --- | --- |\n| BNAdapt+DART | -1.20 ± 0.10 |\n"
            "<!-- end: gains -->\n\n"
            "g_phi trains 50 epochs at alpha 0.1, severity 5, batch 200, a ResNet-26 of width 16, on 15 corruptions,\n"
            "rho = 1 / 10 / 100 and IR 20, 50, 5000; seeds 0-2; the 2-epoch refiner; images of 32 x 32.\n\n"
            "Python 3.11, torch 2.3 and release 1.2.0 (2024-11-23, in 2024); Table 1, Figure 3, Appendix A.2, "
            "Eq. 2, notebooks 04, 07 and 08.\n\n"
            "```\n$ make test\n1,424 passed in 36.2 s\n```\n\nRun `pytest -k 71.44`; see [the page](../results/0.5/x.md).\n")
    assert prose_numbers.findings(text=page) == []


def test_names_published_sizes_and_code_across_a_line_break_are_not_findings():
    page = ("CIFAR-10.1 (about 6 MB; CIFAR-10-C.tar, 2.9 GB) and a width-64 ResNet-26, severity-5 cells; every\n"
            "batch of 64 holds 3 to 4 classes; `python -m dartlib validate-alpha --epochs 50\n--alphas 0.1,1,10`.\n")
    assert prose_numbers.findings(text=page) == []


def test_a_number_after_a_list_of_settings_is_still_found():
    # "rho = 1 / 10" is a setting; the accuracy after the colon is not
    assert _numbers("At rho = 1 / 10: 70.24 and 70.63.\n") == ["70.24", "70.63"]
    assert _numbers("HOLDS: 12, FAILS: 3 of the checks.\n") == ["12", "3"]
    assert _numbers("The tracked tree is 120.8 MB; the data set 2.9 GB.\n") == ["120.8"]  # a measured size


def test_the_finding_names_its_line():
    found = prose_numbers.findings(text="Settings: alpha 0.1.\n\nA gain of 5.92 points.\n")
    assert [(f.line, f.number) for f in found] == [(3, "5.92")]


def test_a_page_generated_whole_is_not_read(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Settings only: alpha 0.1.\n")
    for name in ("claims.md", "results.md"):
        (tmp_path / "docs" / name).write_text("Ours 70.24.\n")
    found = prose_numbers.page_findings(root=tmp_path)
    assert {page: len(f) for page, f in found.items()} == {"README.md": 0, "docs/results.md": 1}


@pytest.mark.parametrize("page", [str(p.relative_to(prose_numbers.REPO_ROOT)) for p in prose_numbers.pages()])
def test_no_committed_page_has_a_hand_typed_measured_number(page):
    found = prose_numbers.findings(text=(prose_numbers.REPO_ROOT / page).read_text())
    assert not found, (f"{page}: measured numbers typed by hand (generate them: dartlib.book.results_page, or say it "
                       "in words): " + "; ".join(f"line {f.line}: {f.number}" for f in found[:20]))
