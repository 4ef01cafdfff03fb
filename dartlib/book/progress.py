"""A Sphinx extension that shows the results book's progress: a bar over the pages Sphinx reads
(the executed notebooks are most of the time), then one over the pages it writes. Loaded by the
book's ``conf.py`` when ``python -m dartlib book`` shows progress; ``TQDM_DISABLE=1`` hides the bars."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm

_bars: dict[str, tqdm] = {}


def _close(name: str) -> None:
    bar = _bars.pop(name, None)
    if bar is not None:
        bar.close()


def _reading(app, env, docnames) -> None:
    _close("read")
    _bars["read"] = tqdm(total=len(docnames), desc="book: reading pages", unit="page", file=sys.stderr,
                         dynamic_ncols=True)


def _read(app, doctree) -> None:
    if "read" in _bars:
        _bars["read"].update(1)
        _bars["read"].set_postfix_str(app.env.docname, refresh=False)


def _writing(app, builder) -> None:
    _close("read")
    total = len(app.env.found_docs) + 2  # the pages, the index of terms and the search page
    _bars["write"] = tqdm(total=total, desc="book: writing HTML", unit="page", file=sys.stderr, dynamic_ncols=True)


def _page(app, pagename, templatename, context, doctree) -> None:
    if "write" in _bars:
        _bars["write"].update(1)


def _finished(app, exception) -> None:
    _close("read")
    _close("write")


def setup(app) -> dict:
    app.connect("env-before-read-docs", _reading)
    app.connect("doctree-read", _read)
    app.connect("write-started", _writing)
    app.connect("html-page-context", _page)
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": False, "parallel_write_safe": False}
