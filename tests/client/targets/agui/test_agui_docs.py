"""The AG-UI section of 'Evaluate an agent you already deploy' (``agui``), run as written
against a pydantic-ai agent served through its ``AGUIAdapter`` on real uvicorn."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

pytest.importorskip("ag_ui.core")
pytest.importorskip("pydantic_ai.ui.ag_ui")

from agui_agents import agui_app, support_agent
from evalport.protocol._cli import main as evalport
from support.docs import section_blocks
from support.servers import running_server

pytestmark = pytest.mark.e2e


def test_the_docs_example_runs_against_an_agui_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [code] = section_blocks("agui", "python")
    [command] = section_blocks("agui", "bash")
    path = code.splitlines()[0].removeprefix("# ")
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALPORT_TOKEN", raising=False)
    with running_server(agui_app(support_agent())) as base:
        argv = shlex.split(command.strip().replace("http://127.0.0.1:8765", base))
        assert argv[0] == "evalport"
        assert evalport(argv[1:]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"]["passed"] == 1, report["counts"]
