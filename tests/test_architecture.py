"""ARCHITECTURE.md holds what the modules point at, and its claims name tests that exist.

A module's docstring or comment says ``see ARCHITECTURE.md, "<title>"`` (the title may
wrap over lines). The pointer names a heading whose text, backticks dropped, is the
title, or starts with it followed by a parenthesised or colon-led subtitle
("The run's log (`_runlog.py`)", "Replicas: live agents, ...").
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POINTER = re.compile(r'ARCHITECTURE\.md,?\s*(?:says\s*\(\s*)?"([^"]+)"')
CODE = re.compile(r"`([^`]+)`")


def _headings() -> list[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    return [
        line.lstrip("#").strip().replace("`", "")
        for line in text.splitlines()
        if line.startswith("#")
    ]


def pointers() -> dict[str, set[str]]:
    """Each title a module of ``protocol/``, ``server/`` or ``client/`` points at, with
    the modules that point at it."""
    found: dict[str, set[str]] = {}
    for package in ("protocol", "server", "client"):
        for path in sorted((ROOT / package).rglob("*.py")):
            # A title wrapped over lines: join them (a comment's ``#`` included).
            flat = re.sub(r"\s*\n\s*(?:#\s*)?", " ", path.read_text())
            for match in POINTER.finditer(flat):
                found.setdefault(match.group(1), set()).add(str(path.relative_to(ROOT)))
    return found


def _names_a_heading(title: str, headings: list[str]) -> bool:
    return any(h == title or h.startswith((f"{title} (", f"{title}: ")) for h in headings)


def test_the_sources_point_at_architecture() -> None:
    assert len(pointers()) > 50  # the pattern still reads the pointers as they are written


def test_every_pointer_names_a_heading() -> None:
    headings = _headings()
    missing = {
        title: sorted(paths)
        for title, paths in sorted(pointers().items())
        if not _names_a_heading(title, headings)
    }
    assert not missing, f"ARCHITECTURE.md has no heading for: {missing}"


def test_every_claim_names_a_test_that_exists() -> None:
    # Each claim names test files (`tests/...py`), each followed by test functions in it.
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Claims and the tests that hold them", 1)[1].split("\n## ", 1)[0]
    claims = re.split(r"\n(?=\d+\. )", section.strip())[1:]
    assert len(claims) == 5, claims
    for claim in claims:
        source, tests = None, 0
        for code in CODE.findall(claim):
            if re.fullmatch(r"tests/[\w/]+\.py", code):
                source = (ROOT / code).read_text()
                tests += 1
            elif re.fullmatch(r"test_\w+", code):
                assert source is not None, f"{code} follows no test file: {claim}"
                assert re.search(rf"def {code}\(", source), f"no test {code}: {claim}"
                tests += 1
        assert tests, f"this claim names no test: {claim}"
