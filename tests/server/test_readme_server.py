"""The documentation's `server` section runs here: the agent example, the streaming
example and both mount examples."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.protocol import decode_run
from evalport.protocol.runtime import AgentSession, SessionInfo
from support.docs import docs_text

ROOT = Path(__file__).parents[2]
TOKEN = "readme-token"


def section_blocks(name: str, language: str) -> list[str]:
    text = docs_text()
    start = text.index(f"<!-- section:{name} -->")
    end = text.index(f"<!-- /section:{name} -->")
    return re.findall(rf"```{language}\n(.*?)```", text[start:end], flags=re.DOTALL)


@pytest.fixture
def readme_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


def run_block(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "readme_block"}
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace


async def test_the_agent_interface_example_records_what_it_says() -> None:
    agent_block = section_blocks("server", "python")[0]
    namespace = run_block(agent_block)
    session = await AgentSession.open(namespace["agent"], SessionInfo(session_id="s"))
    run = await session.send("Where is my order A1049?")
    assert run.reply == "Order A1049 has shipped."
    first, final = run.steps
    assert first.requested_tool_calls[0].id == "call_1"
    executions = {e.name: e for e in first.tool_executions}
    assert executions["lookup_order"].tool_call_id == "call_1"
    assert executions["lookup_order"].result == {"order_id": "A1049", "status": "shipped"}
    assert executions["notify"].result == "queued"
    assert [t.tool_call.name for t in run.tools] == ["lookup_order", "notify"]
    assert final.type == "final_response" and final.usage.output == 12
    assert run.usage.input == 882
    assert run.llm_profile is not None and run.llm_profile.model == "gpt-4o-mini"
    assert run.events[0].data == {"order_id": "A1049"}


def test_the_streaming_example_streams_its_chunks(capsys: pytest.CaptureFixture[str]) -> None:
    block = section_blocks("server", "python")[1]
    assert "yield" in block and "LocalTarget" in block
    run_block(block)
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["Looking up A1049: it has shipped.", "True"]


async def drive_mounted(app: Any, *, health_needs_token: bool) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as client:
        assert (await client.get("/")).status_code == 200  # the host's own route
        health = await client.get("/agent/health")
        assert health.status_code == (401 if health_needs_token else 200)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/agent/health", headers=auth)).json()["agent"][
            "name"
        ] == "support-agent"
        created = await client.post("/agent/evals/sessions", json={}, headers=auth)
        assert created.status_code == 201
        assert created.headers["location"].startswith("/agent/evals/sessions/")
        session_id = created.json()["sessionId"]
        turn = await client.post(
            f"/agent/evals/sessions/{session_id}/turns",
            json={"message": "Where is order A1049?"},
            headers=auth,
        )
        assert decode_run(turn.content).reply == "Order A1049 is shipped with DHL."
        denied = await client.post(
            f"/agent/evals/sessions/{session_id}/turns", json={"message": "x"}
        )
        assert denied.status_code == 401
        assert denied.headers["content-type"] == "application/problem+json"
        assert denied.headers["www-authenticate"].startswith("Bearer")


async def test_mounting_in_starlette(readme_env: None) -> None:
    starlette_block = section_blocks("server", "python")[2]
    assert "from starlette" in starlette_block
    namespace = run_block(starlette_block)
    await drive_mounted(namespace["app"], health_needs_token=True)
    await namespace["adapter"].aclose()


async def test_mounting_in_fastapi(readme_env: None) -> None:
    fastapi_block = section_blocks("server", "python")[3]
    assert "from fastapi" in fastapi_block
    namespace = run_block(fastapi_block)
    await drive_mounted(namespace["app"], health_needs_token=False)
    await namespace["adapter"].aclose()


def test_the_serve_block_names_the_example_and_a_token_variable() -> None:
    (serve,) = section_blocks("server", "bash")
    assert "evalport serve examples/support_agent.py:agent" in serve
    assert "EVALPORT_TOKEN" in serve


async def test_the_approvals_section_runs() -> None:
    gate, wire = section_blocks("approvals", "python")[:2]
    namespace = run_block(gate)
    exec(compile(wire, "README.md", "exec"), namespace)
    assert await namespace["refund_rejected"]() == "I cannot refund A1: over the limit"
    session = await AgentSession.open(namespace["agent"], SessionInfo(session_id="s"))
    assert (await session.send("A1 50")).reply == "Refunded 50 on A1."
    await namespace["adapter"].aclose()
