"""The documentation's `client` section runs here, against the example agent served by uvicorn.

Each python block is executed as it is written; what it prints must match the comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from evalport.server import EvalAdapter
from support.docs import docs_text
from support.servers import running_server

ROOT = Path(__file__).parents[3]
TOKEN = "readme-client-token"


def section_blocks(name: str) -> list[str]:
    text = docs_text()
    start = text.index(f"<!-- section:{name} -->")
    end = text.index(f"<!-- /section:{name} -->")
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.DOTALL)


def printed_comments(code: str) -> list[str]:
    """The ``# ...`` comments of ``print`` lines: the output the README promises."""
    return [
        line.split("  # ", 1)[1].strip()
        for line in code.splitlines()
        if "print(" in line and "  # " in line
    ]


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent

        adapter = EvalAdapter(agent, token=TOKEN)
        with running_server(adapter.app()) as url:
            yield url
    finally:
        sys.path.remove(str(ROOT / "examples"))


@pytest.mark.parametrize("index", range(4))
def test_readme_client_block_runs_and_prints_what_it_says(
    index: int,
    agent_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocks = section_blocks("client")
    assert len(blocks) == 4
    code = blocks[index]
    monkeypatch.setenv("AGENT_URL", agent_url)
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_client"})
    lines = capsys.readouterr().out.splitlines()
    assert lines == printed_comments(code)
