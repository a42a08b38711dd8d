"""The documentation's protocol section: its code runs, and what it states matches the package."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from support.docs import docs_text

README = Path(__file__).resolve().parents[2] / "README.md"
SPEC = Path(__file__).resolve().parents[2] / "openapi.yaml"


def _section() -> str:
    text = docs_text()
    match = re.search(r"<!-- section:protocol -->(.*?)<!-- /section:protocol -->", text, re.S)
    assert match is not None, "the README has no protocol section"
    return match.group(1)


def test_code_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", _section(), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md#protocol", "exec"), {})


def test_route_table_matches_the_spec() -> None:
    rows = re.findall(r"^\| `(GET|POST|DELETE) ([^`]+)` \|", _section(), re.M)
    spec = yaml.safe_load(SPEC.read_text())
    documented = {
        (method.upper(), path.replace("{sessionId}", "{id}"))
        for path, item in spec["paths"].items()
        for method in item
        if method != "parameters"
    }
    assert set(rows) == documented
