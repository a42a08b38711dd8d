"""The documentation as tests read it: the site's pages in ``docs/`` and the README.

Code examples live in Markdown pages. A topic's examples sit between the markers
``<!-- section:NAME -->`` and ``<!-- /section:NAME -->``; the test of that topic reads
the section wherever it is (:func:`section`), so moving a section from the README to a
page, or from one page to another, changes no test.

- :func:`pages` lists the README and every page under ``docs/``, the README first.
- :func:`docs_text` is all of them, one after the other: ``text.index("<!-- section:X -->")``
  finds a section in it whatever page holds it.
- :func:`blocks` reads the fenced code blocks of a text: ``(language, code)`` pairs.
- :func:`section_blocks` is the blocks of one section in one language.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DOCS", "ROOT", "blocks", "docs_text", "pages", "section", "section_blocks"]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def pages() -> list[Path]:
    """README.md, then every Markdown page of the site, in path order."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def docs_text() -> str:
    """Every page's text, one after the other."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


def section(name: str) -> str:
    """The text between a section's markers; the section must be on exactly one page."""
    opening, closing = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    found = [text for text in map(_read, pages()) if opening in text]
    assert len(found) == 1, f"section {name!r} is on {len(found)} pages, expected one"
    text = found[0]
    start = text.index(opening) + len(opening)
    return text[start : text.index(closing, start)]


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of ``text``: ``(language, code)``, in order."""
    return [(match.group(1), match.group(2)) for match in FENCE.finditer(text)]


def section_blocks(name: str, language: str) -> list[str]:
    """The code of one section's blocks in ``language``, in order."""
    return [code for lang, code in blocks(section(name)) if lang == language]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")
