"""docs/results.md's generated tables are what the committed rows give (dartlib.book.results_page):
a number on the page that the rows and their per-image outcomes do not give fails here."""

from __future__ import annotations

import pytest

from dartlib.book import results_page


def test_the_results_page_shows_the_tables_the_committed_rows_give():
    text = results_page.RESULTS_PAGE.read_text()
    assert results_page.refreshed_page(text, results_page.generated_tables()) == text, (
        "docs/results.md: a generated table differs from the committed rows; regenerate it: "
        "python -m dartlib.book.results_page (then check that the prose around it still reads true)")


def test_the_readmes_figure_caption_is_what_the_committed_rows_give():
    text = results_page.README.read_text()
    assert results_page.refreshed_page(text, results_page.readme_blocks(), page="README.md") == text, (
        "README.md: the Figure 3 caption differs from the committed rows; regenerate it: python -m dartlib.book.results_page")
    caption = results_page.readme_blocks()["figure3_caption"]
    assert "g_phi 50 epochs at alpha 0.1" in caption and "(the paper: +0.0 / +5.7 / +18.1;" in caption


def test_the_other_pages_show_the_blocks_the_committed_rows_give():
    """docs/profiles.md's gpu tally, docs/deviations.md's JPEG bound, docs/using-dart.md's alpha advice and
    docs/gpu.md's H200 rates are what the committed rows and benchmark outputs give."""
    for path, blocks in results_page.other_pages().items():
        text = path.read_text()
        assert results_page.refreshed_page(text, blocks, page=path.name) == text, (
            f"{path.name}: a generated block differs from the committed rows; regenerate: python -m dartlib.book.results_page")


def test_a_table_edited_by_hand_is_found_and_rewritten():
    tables = {"gains": "| method | gain |\n| --- | --- |\n| BNAdapt+DART | -0.76 ± 0.08 |\n"}
    page = "Text.\n\n<!-- generated: gains -->\n{}<!-- end: gains -->\n\nMore text.\n"
    edited = page.format(tables["gains"].replace("-0.76", "-0.29"))  # a number typed in after a rerun
    assert results_page.refreshed_page(edited, tables) == page.format(tables["gains"])
    assert results_page.refreshed_page(page.format(tables["gains"]), tables) == page.format(tables["gains"])


def test_a_block_without_its_table_and_a_table_without_its_block_are_named():
    with pytest.raises(ValueError, match=r"without a table: \['old'\].*without a block.*\['gains'\]"):
        results_page.refreshed_page("<!-- generated: old -->\n| a |\n<!-- end: old -->\n", {"gains": "| b |\n"})
