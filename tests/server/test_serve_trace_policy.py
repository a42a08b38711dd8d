"""`evalport serve --trace-policy`: every run leaves the service as the policy says."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from support.servers import free_port, running_process

AGENT = """
from evalport.protocol import ToolCall
from evalport.protocol.runtime import tool


@tool
def lookup(card: str) -> str:
    return "found " + card


async def agent(message, history, ctx):
    ctx.model_step(tool_calls=[ToolCall(id="c1", name="lookup", arguments={"card": "4111-1111"})])
    lookup("4111-1111")
    return "done"
"""


@pytest.mark.parametrize(("policy", "kept"), [(None, True), ("safe", False), ("verbatim", True)])
def test_serve_applies_its_trace_policy_to_every_run(
    tmp_path: Path, policy: str | None, kept: bool
) -> None:
    (tmp_path / "card_agent.py").write_text(AGENT)
    port = free_port()
    args = [sys.executable, "-m", "evalport.protocol._cli", "serve", "card_agent:agent"]
    args += ["--port", str(port), "--insecure-no-auth"]
    args += ["--trace-policy", policy] if policy else []
    base = f"http://127.0.0.1:{port}"
    with (
        running_process(
            args, health_url=f"{base}/health", env={"EVALPORT_TOKEN": ""}, cwd=str(tmp_path)
        ),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        session = http.post("/evals/sessions", json={}).json()["sessionId"]
        turn = http.post(f"/evals/sessions/{session}/turns", json={"message": "card?"})
        attached = http.get(f"/evals/sessions/{session}")
    for response in (turn, attached):
        assert response.status_code == 200, response.text
        assert ("4111-1111" in response.text) is kept
        assert response.json()["run"]["reply"] == "done"
