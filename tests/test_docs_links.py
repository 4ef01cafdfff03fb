"""The README stays short, and every relative link of the documentation resolves.

* ``README.md`` is at most ``README_MAX_CHARS`` characters (what ``wc -m`` counts); the details live
  in ``docs/``.
* Every relative Markdown link or image (``[text](path)``, ``![alt](path)``, ``[text]: path``,
  ``<img src="path">``) in ``README.md``, ``ARCHITECTURE.md`` and ``docs/*.md`` names an existing
  file or folder of the repository, outside the generated folders; a ``#anchor`` into a Markdown
  file names one of its headings (GitHub's slugs). External links (http, https, mailto) are not
  followed. Links inside code blocks and code spans are not links.
* The README's embedded image is a PNG that decodes: signature, IHDR with a non-zero size, every
  chunk's CRC, and IDAT data that inflate to the size the header implies.
"""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_CHARS = 10_000
DOC_FILES = sorted([REPO / "README.md", REPO / "ARCHITECTURE.md", *(REPO / "docs").glob("*.md")])
# generated and never committed: a link there is broken in a fresh clone
GENERATED = ("build", "runs", ".venv")

# [text](target "title"), ![alt](target), <target>; one level of brackets or parentheses inside
INLINE_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"
                         r"\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
IMG_TAG = re.compile(r"<img\b[^>]*\bsrc\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)  # http:, https:, mailto:, ...
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _lines_outside_code(text: str, blank_spans: bool = True):
    """(line number, line) for each line outside fenced code blocks, code spans blanked unless
    ``blank_spans`` is false."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        match = re.match(r"(`{3,}|~{3,})", stripped)
        if match:
            if fence is None:
                fence = match.group(1)[0] * len(match.group(1))
                continue
            if stripped.startswith(fence):
                fence = None
                continue
        if fence is None:
            yield number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line) if blank_spans else line


def links(path: Path):
    """(line number, target, is_image) for every link, image and <img> of a Markdown file."""
    for number, line in _lines_outside_code(path.read_text(encoding="utf-8")):
        for match in INLINE_LINK.finditer(line):
            yield number, match.group(3), match.group(1) == "!"
        match = REFERENCE_DEF.match(line)
        if match:
            yield number, match.group(1), False
        for match in IMG_TAG.finditer(line):
            yield number, match.group(1), True


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links and code marks dropped, lowercase, punctuation other
    than '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in _lines_outside_code(path.read_text(encoding="utf-8"), blank_spans=False):
        match = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, repo: Path = REPO) -> list[str]:
    """One message per broken relative link of ``path``: 'file:line: broken link target (why)'."""
    problems = []
    where = path.relative_to(repo)
    for number, target, _ in links(path):
        if not target or EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        message = f"{where}:{number}: broken link {target!r}"
        try:
            inside = resolved.relative_to(repo)
        except ValueError:
            problems.append(f"{message} (outside the repository: {resolved})")
            continue
        if inside.parts and inside.parts[0] in GENERATED:
            problems.append(f"{message} (into the generated folder {inside.parts[0]}/)")
        elif not resolved.exists():
            problems.append(f"{message} (no such file or folder: {inside})")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{message} (no heading with anchor #{anchor} in {inside})")
    return problems


def png_problems(path: Path) -> list[str]:
    """Why ``path`` is not a PNG that decodes; empty when it is one."""
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return ["no PNG signature"]
    chunks, offset = [], 8
    while offset + 12 <= len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind, body = data[offset + 4:offset + 8], data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length] or b"\0\0\0\0")
        if len(body) != length or zlib.crc32(kind + body) != crc:
            return [f"chunk {kind!r} at byte {offset} is truncated or fails its CRC"]
        chunks.append((kind, body))
        offset += 12 + length
        if kind == b"IEND":
            break
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
        return ["the first chunk is not a 13-byte IHDR"]
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if width == 0 or height == 0:
        return [f"IHDR gives a size of {width} x {height}"]
    if chunks[-1][0] != b"IEND":
        return ["no IEND chunk"]
    try:
        pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    except zlib.error as error:
        return [f"the IDAT data do not inflate: {error}"]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(colour)
    if channels is None:
        return [f"unknown colour type {colour}"]
    if interlace == 0:
        expected = height * (1 + (width * channels * depth + 7) // 8)
        if len(pixels) != expected:
            return [f"the image data hold {len(pixels)} bytes, {expected} expected for {width} x {height}"]
    return []


def test_readme_is_short():
    characters = len((REPO / "README.md").read_text(encoding="utf-8"))
    assert characters <= README_MAX_CHARS, (
        f"README.md has {characters} characters, more than {README_MAX_CHARS}: move details into docs/")


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    problems = broken_links(path)
    assert not problems, "\n".join(problems)


def test_readme_embeds_a_png_that_decodes():
    readme = REPO / "README.md"
    images = [(number, target) for number, target, is_image in links(readme)
              if is_image and not EXTERNAL.match(target)]
    assert images, "README.md embeds no image"
    problems = []
    for number, target in images:
        image = (readme.parent / target.partition("#")[0]).resolve()
        if image.suffix.lower() != ".png":
            problems.append(f"README.md:{number}: image {target!r} is not a .png")
        elif not image.is_file():
            problems.append(f"README.md:{number}: image {target!r} does not exist")
        else:
            problems += [f"README.md:{number}: image {target!r}: {why}" for why in png_problems(image)]
    assert not problems, "\n".join(problems)


def test_the_checker_finds_broken_links(tmp_path):
    """A missing file, a missing anchor and a link into build/ are each reported with file and line."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some `code`: here\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#some-code-here) [web](https://example.org) `[not](a link)`\n"
        "[gone](docs/missing.md)\n"
        "![no anchor](docs/a.md#nowhere)\n"
        "```\n[in code](nowhere.md)\n```\n"
        '<img src="build/x.png">\n',
        encoding="utf-8")
    problems = broken_links(page, repo=tmp_path)
    assert len(problems) == 3, problems
    assert problems[0].startswith("README.md:2: broken link 'docs/missing.md'")
    assert problems[1].startswith("README.md:3: broken link 'docs/a.md#nowhere'")
    assert problems[2].startswith("README.md:7: broken link 'build/x.png'")


def test_png_checker_rejects_a_broken_png(tmp_path):
    good = REPO / "figures" / "cpu" / "fig3_accuracy_vs_rho.png"
    assert good.is_file(), f"{good} is committed: git checkout -- {good.relative_to(REPO)}"
    data = good.read_bytes()
    assert png_problems(good) == []
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.png").write_bytes(b"not an image")
    assert png_problems(tmp_path / "cut.png")
    assert png_problems(tmp_path / "text.png") == ["no PNG signature"]
