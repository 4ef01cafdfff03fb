"""What a person sees, checked in a real browser (Debian's chromium driven by Playwright): the
results book of the smoke and cpu profiles at a desktop's width (1280 px) and a phone's (390 px),
and JupyterLab running notebook 01.

Screenshots are kept in ``build/test-artifacts/``. Without chromium (``apt-get install
chromium``; ``make setup`` installs it as root) or Playwright, these tests skip and say so.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

from dartlib.paths import NOTEBOOKS_DIR, REPO_ROOT
from dartlib.book.site import build_book
from dartlib.runner import lab_command

ARTEFACTS = REPO_ROOT / "build" / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WIDTHS = {"desktop": 1280, "phone": 390}  # the window widths every page of the book is checked at
LAB_NOTEBOOK = "01_toy_gaussian.ipynb"

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed (make setup)")
if not Path(CHROMIUM).is_file():
    pytest.skip("Debian's chromium is not installed: apt-get install chromium (make setup does it as root)",
                allow_module_level=True)


build_root: dict[str, Path] = {}  # profile -> its built site, for the file:// checks


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=["cpu", "smoke"])
def book(request, tmp_path_factory):
    """A profile's book built afresh and served on a loopback port; yields (profile, base URL)."""
    profile = request.param
    index = build_book(profile=profile, out=tmp_path_factory.mktemp(f"book-{profile}"))
    build_root[profile] = index.parent
    handler = functools.partial(_QuietHandler, directory=str(index.parent))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield profile, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # the browser closing a connection early (BrokenPipe) is not the book's fault


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


# Every element that reaches past the window's edge must sit in a box that scrolls sideways (and
# that box within the window); a text or table box whose content is wider than itself must scroll.
WIDER_THAN_THE_WINDOW = """() => {
  const vw = document.documentElement.clientWidth;
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (typeof el.className === "string" && el.className.trim() ? "." + el.className.trim().split(/\\s+/).slice(0, 2).join(".") : "");
  const scrollBox = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === "auto" || o === "scroll") return a;
    }
    return null;
  };
  const problems = [];
  for (const el of document.body.querySelectorAll("*")) {
    const st = getComputedStyle(el);
    if (st.display === "none" || st.visibility === "hidden") continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || r.right <= 0 || r.left >= vw) continue;
    if (r.right > vw + 1 || r.left < -1) {
      const box = scrollBox(el);
      if (!box || box.getBoundingClientRect().right > vw + 1)
        problems.push(`${name(el)} spans ${Math.round(r.left)}..${Math.round(r.right)} px of a ${vw} px window`);
    }
    if (el.matches("pre, table, div.cell_output, div.output, div.highlight, .scroll-box") &&
        el.scrollWidth > el.clientWidth + 1 && !["auto", "scroll"].includes(st.overflowX) && !scrollBox(el))
      problems.push(`${name(el)} is ${el.scrollWidth} px wide in a ${el.clientWidth} px box that does not scroll (clipped)`);
  }
  if (document.scrollingElement.scrollWidth > window.innerWidth)
    problems.push(`the page scrolls sideways (${document.scrollingElement.scrollWidth} px in a ${window.innerWidth} px window)`);
  return problems;
}"""

# Headings whole: every heading of the text, and every entry of the page's contents on the right,
# shows all its text inside its column (neither cut at the column's edge nor wider than its box).
CLIPPED_HEADINGS = """() => {
  const problems = [];
  const visible = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const check = (el, column, where) => {
    if (!visible(el) || !column) return;
    const r = el.getBoundingClientRect(), c = column.getBoundingClientRect();
    const text = el.textContent.trim().slice(0, 60);
    if (el.scrollWidth > el.clientWidth + 1)
      problems.push(`${where} "${text}" is ${el.scrollWidth} px wide in a ${el.clientWidth} px box (clipped)`);
    else if (r.right > c.right + 1 || r.left < c.left - 1)
      problems.push(`${where} "${text}" spans ${Math.round(r.left)}..${Math.round(r.right)} px, its column ` +
                    `${Math.round(c.left)}..${Math.round(c.right)} px (clipped)`);
  };
  const article = document.querySelector("article.bd-article");
  for (const h of document.querySelectorAll("article.bd-article :is(h1, h2, h3)")) check(h, article, "heading");
  const toc = document.querySelector(".bd-sidebar-secondary");
  if (toc && getComputedStyle(toc).display !== "none")
    for (const a of toc.querySelectorAll(".page-toc a")) check(a, toc, "contents entry");
  return problems;
}"""


def _crawl(browser, base: str, *, width: int = WIDTHS["desktop"]) -> dict[str, dict]:
    """Every page reachable from index.html by internal links, at a window ``width`` px wide: its
    console errors, images that did not decode, internal links, element ids, the elements wider
    than the window outside a scroll box and the headings not shown whole."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    seen: dict[str, dict] = {}
    queue = [urljoin(base, "index.html")]
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        errors.clear()
        response = page.goto(url, wait_until="load")
        page.wait_for_load_state("networkidle")  # MathJax typesets after the load event
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => ({src: e.getAttribute('src'), ok: e.complete && e.naturalWidth > 0}))")
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
        ids = page.eval_on_selector_all("[id]", "els => els.map(e => e.id)")
        links = [urljoin(url, h) for h in hrefs if not urlparse(h).scheme or urljoin(url, h).startswith(base)]
        overflow = page.evaluate(WIDER_THAN_THE_WINDOW) + page.evaluate(CLIPPED_HEADINGS)
        if page.locator("article").count() and "???" in page.inner_text("article"):
            overflow.append("MathJax shows a LaTeX reference as ???")
        seen[url] = {"status": response.status if response else None, "errors": list(errors), "overflow": overflow,
                     "broken_images": [i["src"] for i in images if not i["ok"]], "images": len(images),
                     "links": links, "ids": set(ids)}
        queue += [urldefrag(link)[0] for link in links if urldefrag(link)[0].endswith(".html")]
    page.close()
    return seen


@pytest.mark.parametrize("screen", list(WIDTHS))
def test_book_pages_load_images_decode_and_links_resolve(browser, book, screen):
    """Every page at a desktop's and at a phone's width: loads without console errors, its images
    decode, its links resolve, nothing but a wide table or code block (in its own scroll box)
    reaches past the window, and its headings show whole."""
    profile, base = book
    pages = _crawl(browser, base, width=WIDTHS[screen])
    names = {urlparse(u).path.lstrip("/") for u in pages}
    assert {"index.html", "gallery.html", "tables.html", "deviations.html", "notebooks.html"} <= names
    assert len([n for n in names if n.startswith("notebooks/")]) >= (16 if profile == "smoke" else 1)
    problems = []
    for url, info in pages.items():
        if info["status"] != 200:
            problems.append(f"{url}: HTTP {info['status']}")
        problems += [f"{url}: console error: {e}" for e in info["errors"]]
        problems += [f"{url}: image does not decode: {src}" for src in info["broken_images"]]
        problems += [f"{url}: {what}" for what in info["overflow"]]
        for link in info["links"]:
            target, fragment = urldefrag(link)
            if target.endswith(".html") and target not in pages:
                problems.append(f"{url}: link to a missing page {link}")
            elif not target.endswith(".html") and urllib.request.urlopen(target, timeout=10).status != 200:
                problems.append(f"{url}: link to a missing file {link}")
            elif fragment and target in pages and fragment not in pages[target]["ids"]:
                problems.append(f"{url}: link to a missing anchor {link}")
    assert not problems, "\n".join(problems)
    gallery = pages[urljoin(base, "gallery.html")]
    assert gallery["images"] == len(list((REPO_ROOT / "figures" / profile).glob("*.png")))


@pytest.mark.parametrize("screen", list(WIDTHS))
def test_book_screenshots_show_the_overview_gallery_and_a_notebook(browser, book, screen):
    """Screenshots of the main pages at both widths (build/test-artifacts/book-<profile>-<screen>-*.png)."""
    profile, base = book
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": WIDTHS[screen], "height": 900})
    page.goto(urljoin(base, "index.html"))
    page.wait_for_load_state("networkidle")
    assert "Of the paper's" in page.inner_text("article").replace("’", "'")
    # the answer (the counts and the headline claims) ends within one screen: a phone's is 844 px high
    answer_ends = page.evaluate("document.getElementById('every-claim').getBoundingClientRect().top")
    assert answer_ends <= 844, f"the answer ends at {answer_ends:.0f} px at {WIDTHS[screen]} px wide"
    for name in ("index", "index.html#every-claim", "claims", "gallery", "tables",
                 "tables.html#table-1-per-corruption-appendix-tables-19-to-21",
                 "notebooks/06_table1_main.html#the-rendered-table"):
        page.goto(urljoin(base, name if ".html" in name else f"{name}.html"))
        page.wait_for_load_state("networkidle")
        shot = name.replace(".html", "").replace("#", "-").replace("/", "-")
        page.screenshot(path=str(ARTEFACTS / f"book-{profile}-{screen}-{shot}.png"), full_page=False)
    page.close()


def test_the_diagnosis_table_scrolls_inside_its_box_at_every_width(browser, book):
    """The overview's widest table (notebook 15's diagnosis, where the profile has its rows) is never
    cut: at 1280 and at 390 px it lies inside its scroll box, which scrolls when the table is wider."""
    profile, base = book
    if not (REPO_ROOT / "results" / profile / "diagnosis.csv").is_file():
        pytest.skip(f"the {profile} profile has no diagnosis rows")
    for width in WIDTHS.values():
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(urljoin(base, "index.html"))
        box = page.evaluate("""(() => { const t = document.querySelector('table.wide'), d = t.closest('.scroll-box');
            return {table: t.scrollWidth, box: d.clientWidth, scrolls: getComputedStyle(d).overflowX,
                    page: document.documentElement.scrollWidth}; })()""")
        assert box["page"] <= width, (width, box)
        assert box["table"] <= box["box"] or box["scrolls"] == "auto", (width, box)
        page.close()


def test_gallery_figures_link_to_their_full_size_image(browser, book):
    """Each gallery figure is a link to its PNG at full size (the file's own pixel width)."""
    profile, base = book
    page = browser.new_page(viewport={"width": WIDTHS["phone"], "height": 900})
    page.goto(urljoin(base, "gallery.html"))
    figures = page.eval_on_selector_all(
        "article figure img", "els => els.map(e => ({href: e.closest('a') && e.closest('a').getAttribute('href'), "
        "shown: e.getBoundingClientRect().width, src: e.getAttribute('src')}))")
    assert len(figures) == len(list((REPO_ROOT / "figures" / profile).glob("*.png")))
    problems = []
    for figure in figures:
        if not figure["href"]:
            problems.append(f"{figure['src']}: no link to its full-size image")
            continue
        name = figure["href"].rsplit("/", 1)[-1]
        full = page.evaluate("""async url => { const i = new Image(); i.src = url; await i.decode();
                                return i.naturalWidth; }""", urljoin(page.url, figure["href"]))
        png = (REPO_ROOT / "figures" / profile / name).read_bytes()
        if full != int.from_bytes(png[16:20], "big"):
            problems.append(f"{figure['src']}: its link shows {full} px, the figure is {int.from_bytes(png[16:20], 'big')} px")
        if figure["shown"] > WIDTHS["phone"]:
            problems.append(f"{figure['src']}: shown {figure['shown']} px wide on a phone")
    page.close()
    assert not problems, "\n".join(problems)


def test_tables_say_what_their_columns_are_and_are_titled_by_content(browser, book):
    """No column of a results table is headed by a bare number (Table 1's read rho = 1, 10, 100;
    online imbalance's IR), and no table is titled by its file name."""
    profile, base = book
    page = browser.new_page(viewport={"width": WIDTHS["desktop"], "height": 900})
    page.goto(urljoin(base, "tables.html"))
    headers = page.eval_on_selector_all("article table thead th", "els => els.map(e => e.textContent.trim())")
    titles = page.eval_on_selector_all("article h2", "els => els.map(e => e.textContent.replace('#', '').trim())")
    page.close()
    bare = sorted({h for h in headers if re.fullmatch(r"[\d.]+|LT [\d.]+|imb [\d.]+", h)})
    assert not bare, f"columns headed by a bare number: {bare}"
    stems = {p.stem for p in (REPO_ROOT / "results" / profile / "tables").glob("*.md")}
    assert not [t for t in titles if t in stems or re.fullmatch(r"\w+_\w+", t)], titles
    if (REPO_ROOT / "results" / profile / "table1.csv").is_file():
        assert {"rho = 1", "rho = 10", "rho = 100"} <= set(headers)
    if (REPO_ROOT / "results" / profile / "tables" / "online_imbalance.md").is_file():
        assert "IR 5000" in headers


def test_served_search_shows_the_matching_passage(browser, book):
    """Served over HTTP, each search result's excerpt is the passage holding the search word,
    not the theme's own text (its colour-mode menu: "System Settings Light Dark")."""
    profile, base = book
    page = browser.new_page(viewport={"width": WIDTHS["desktop"], "height": 900})
    for word in ("claims", "Dirichlet"):  # "claims": pages whose title matches (Sphinx took the theme's header)
        page.goto(urljoin(base, f"search.html?q={word}"))
        page.wait_for_selector("#search-results li p.context", timeout=30_000)
        page.wait_for_load_state("networkidle")
        excerpts = page.eval_on_selector_all("#search-results li p.context", "els => els.map(e => e.textContent)")
        assert excerpts, word
        assert not [e for e in excerpts if "System Settings" in e or "Light Dark" in " ".join(e.split())], excerpts
        with_word = [e for e in excerpts if word.lower() in e.lower()]
        assert len(with_word) >= len(excerpts) / 2, (word, excerpts)
    page.close()


def test_a_book_without_results_says_what_to_run(browser, book):
    """A profile whose results are not on this checkout (the smoke profile on a fresh clone, before
    `make reproduce`) says so at the top of its overview, naming the command; one with results does
    not."""
    from dartlib.book.site import book_sources, has_results

    profile, base = book
    page = browser.new_page(viewport={"width": WIDTHS["desktop"], "height": 900})
    page.goto(urljoin(base, "index.html"))
    warnings = page.eval_on_selector_all("article .admonition.warning", "els => els.map(e => e.textContent)")
    page.close()
    if has_results(book_sources(profile=profile)):
        assert not warnings
    else:
        assert warnings and "make reproduce" in warnings[0], warnings


def test_the_wider_than_the_window_check_finds_a_wide_element(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content('<div style="width:2000px">wide</div><div style="overflow-x:auto"><table style="width:3000px">'
                     '<tr><td>scrolls</td></tr></table></div><pre style="overflow:hidden;width:200px">' + "x" * 400
                     + "</pre>")
    problems = page.evaluate(WIDER_THAN_THE_WINDOW)
    page.close()
    assert any(p.startswith("div spans") for p in problems)
    assert any("clipped" in p for p in problems)
    assert not any(p.startswith("table") for p in problems)  # inside its scroll box


def test_book_navigation_lists_the_notebooks_with_contents_neighbours_and_downloads(browser, book):
    """The book theme: every notebook in the left navigation, the page's contents on the right,
    previous/next at the foot, a .ipynb download, notebook 06's Table 1 as an HTML table, and a
    search page that works opened from a file (listing pages, saying how to serve for excerpts)."""
    profile, base = book
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(urljoin(base, "notebooks/06_table1_main.html"))
    nav = page.eval_on_selector_all(".bd-sidebar-primary nav a", "els => els.map(e => e.getAttribute('href'))")
    executed = sorted(p.stem for p in (NOTEBOOKS_DIR if profile == "smoke" else
                                       REPO_ROOT / "results" / profile / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    listed = {"06_table1_main" if h == "#" else h.rsplit("/", 1)[-1].removesuffix(".html") for h in nav if h}  # "#": this page
    assert set(executed) <= listed, sorted(set(executed) - listed)
    assert page.locator(".bd-sidebar-secondary .page-toc a").count() >= 3
    assert page.locator(".prev-next-area a.left-prev").count() == 1
    assert page.locator(".prev-next-area a.right-next").count() == 1
    download = page.locator("a[href$='06_table1_main.ipynb']").first.get_attribute("href")
    body = urllib.request.urlopen(urljoin(page.url, download), timeout=10).read()
    assert json.loads(body)["cells"], "the .ipynb download is the notebook"
    rows = page.eval_on_selector_all("#the-rendered-table div.cell_output table tr",
                                     "rows => rows.map(r => r.cells.length)")
    assert len(rows) >= 4 and set(rows) == {4}, rows  # method + three rho columns, one row per method
    assert "| method |" not in page.inner_text("#the-rendered-table")
    page.close()
    # opened from a file, search still lists pages
    index = build_root[profile] / "search.html"
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(index.as_uri() + "?q=BNAdapt")
    page.wait_for_selector("#search-results li", timeout=30_000)
    assert page.locator("#search-results li").count() >= 3
    assert "Serve the book" in page.inner_text("body")
    page.close()


def _expected_lab_output() -> list[tuple[int, str]]:
    """(cell index, first line) of each checked output (``# NBVAL_CHECK_OUTPUT``) that the committed
    notebook 01 stores: what JupyterLab must show in that cell after running it."""
    nb = json.loads((NOTEBOOKS_DIR / LAB_NOTEBOOK).read_text())
    lines = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and "".join(cell["source"]).startswith("# NBVAL_CHECK_OUTPUT"):
            text = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream")
            lines.append((index, text.splitlines()[0]))
    return lines


# Time limits that hold on a busy 2-core machine (`make test` runs beside this test): JupyterLab's
# kernel starts in seconds when idle and notebook 01 runs in about 20 s, under load several times that.
KERNEL_START_S = 300
RUN_ALL_S = 900


def _kernel_state(base: str, token: str, notebook: str) -> str | None:
    """The execution state ("starting", "busy", "idle") JupyterLab's server reports for the kernel
    of ``notebook``'s session, or None while it has none: the kernel itself, not one of the page's
    indicators."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as answer:
        sessions = json.loads(answer.read())
    states = [s["kernel"].get("execution_state") for s in sessions if s.get("path", "").endswith(notebook)]
    return states[0] if states else None


def _wait_kernel_idle(base: str, token: str, notebook: str, *, timeout_s: float, page=None) -> None:
    """Until the kernel of ``notebook`` is idle; with ``page``, answering the dialog a first start may
    show (which kernel to use: the notebook's own, python3) whenever it appears."""
    deadline, state = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        state = _kernel_state(base, token, notebook)
        if state == "idle":
            return
        select = page.get_by_role("button", name="Select", exact=True) if page is not None else None
        if select is not None and select.count() and select.first.is_visible():
            select.first.click()
        time.sleep(1)
    pytest.fail(f"the kernel of {notebook} was not idle within {timeout_s} s (last state {state!r})")


@pytest.fixture()
def lab(tmp_path):
    """JupyterLab as ``make lab`` starts it, headless on a free port with a token. Its settings
    live in a temporary folder: no autosave (the committed notebook is never written) and every
    cell rendered (no windowing), so the whole notebook is in the page."""
    settings = tmp_path / "lab-settings"
    for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                           "docmanager-extension/plugin": {"autosave": False},
                           "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(lab_command(port=port, token=token, open_browser=False), cwd=REPO_ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + KERNEL_START_S
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            assert server.poll() is None, (tmp_path / "lab.log").read_text()
            time.sleep(0.5)
    else:
        server.terminate()
        pytest.fail(f"JupyterLab did not answer within {KERNEL_START_S} s: {(tmp_path / 'lab.log').read_text()[-2000:]}")
    yield base, token
    server.terminate()
    server.wait(timeout=30)
    log.close()


def _menu(page, menu: str, item: str) -> None:
    page.get_by_role("menuitem", name=menu, exact=True).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def test_jupyterlab_runs_notebook_01_and_shows_its_output(browser, lab):
    """Open notebook 01, clear its stored outputs, run every cell in the kernel and find the first
    line of each checked output the committed notebook stores."""
    base, token = lab
    expected = _expected_lab_output()
    assert len(expected) >= 3
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/lab/tree/notebooks/{LAB_NOTEBOOK}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=KERNEL_START_S * 1000)
    _wait_kernel_idle(base, token, LAB_NOTEBOOK, timeout_s=KERNEL_START_S, page=page)
    _menu(page, "Edit", "Clear Outputs of All Cells")
    cells = page.locator(".jp-Notebook .jp-Cell")
    for index, line in expected:  # cleared: no stored line left in its cell
        sync_api.expect(cells.nth(index).locator(".jp-OutputArea")).not_to_contain_text(line, timeout=30_000)
    _menu(page, "Run", "Run All Cells")
    for index, line in expected:  # each checked cell shows the first line of its stored output
        sync_api.expect(cells.nth(index).locator(".jp-OutputArea")).to_contain_text(line, timeout=RUN_ALL_S * 1000)
    last_prompt = page.locator(".jp-CodeCell .jp-InputPrompt").last  # and every cell ran: the last one numbered
    sync_api.expect(last_prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=RUN_ALL_S * 1000)
    _wait_kernel_idle(base, token, LAB_NOTEBOOK, timeout_s=RUN_ALL_S)
    shown = "\n".join(page.locator(".jp-OutputArea").all_inner_texts())
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    cells.nth(expected[0][0]).scroll_into_view_if_needed()
    page.screenshot(path=str(ARTEFACTS / "jupyterlab-notebook-01.png"), full_page=False)
    page.close()
    assert "Traceback" not in shown, "a cell of notebook 01 failed in JupyterLab"
    missing = [line for _, line in expected if line not in shown]
    assert not missing, f"JupyterLab does not show the stored output lines {missing}"
