"""The results book's generated pages (the site itself is checked in a browser, test_browser.py)."""

from __future__ import annotations

import struct
import zlib

import pandas as pd
import pytest

from dartlib.paths import REPO_ROOT
from dartlib.profiles import load_profile
from dartlib.registry import UnknownNameError
from dartlib.reporting import book


def test_every_committed_figure_has_a_caption_naming_what_it_reproduces():
    names = {p.stem for p in (REPO_ROOT / "figures").glob("*/*.png")}
    assert names, "no committed figures found"
    assert sorted(names - set(book.FIGURE_CAPTIONS)) == []


def test_markdown_table_rounds_and_marks_missing_cells():
    frame = pd.DataFrame({"a": [1.234, float("nan")], "b": ["x", "y"]}, index=pd.Index(["r1", "r2"], name="method"))
    assert book.markdown_table(frame).splitlines() == [
        "| method | a | b |", "| --- | --- | --- |", "| r1 | 1.2 | x |", "| r2 | – | y |"]


def test_repository_links_become_code_spans_and_web_links_stay():
    text = "[scale-out](scale-out.md), [paper](https://example.org/paper), [csv](../results/cpu/a.csv), [x](#here)"
    assert book._unlinked(text) == ("scale-out (`scale-out.md`), [paper](https://example.org/paper), "
                                    "csv (`results/cpu/a.csv`), [x](#here)")


def test_favicon_is_a_png_that_decodes():
    data = book.favicon_png(size=16)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (16, 16)
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    assert len(zlib.decompress(data[idat + 4:idat + 4 + length])) == 16 * (1 + 3 * 16)


def test_the_cpu_pages_state_the_profile_the_ledger_and_the_tables():
    sources = book.book_sources(profile="cpu")
    overview = book.overview_page(sources=sources, settings={"corrupted_dataset": "cifar10c"})
    assert "cpu" in overview and "CIFAR-10" in overview
    assert overview.count('<tr style="background:') == len(book.claims_ledger.evaluate(
        "cpu", corrupted_dataset="cifar10c"))
    tables = book.tables_page(sources=sources, settings=load_profile("cpu"))
    assert "| SAR+DART | 71.6 (86.7; -15.1) |" in tables  # rendered from results/cpu/table1.csv
    for heading in ("## Table 1", "## Table 1 per corruption (Appendix, Tables 19 to 21)", "### rho = 100",
                    "## Cost (Appendix, additional cost)"):
        assert heading in tables
    deviations = book.deviations_page(sources=sources)
    assert "| method | setting | paper | reference code | ours | why |" in deviations
    assert "](" not in deviations.replace("](http", "")  # no repository link left to break


def test_an_unknown_profile_lists_the_valid_names(tmp_path):
    with pytest.raises(UnknownNameError, match="smoke, cpu"):
        book.write_book_source(profile="cpuu", out=tmp_path / "src")
