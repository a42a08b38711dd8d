"""The agent shapes, decided from the signature in one place (``session_factory``): each
shape answers a turn in process, over the adapter and under ``run --local``; anything
else is one line naming what was found and the shapes accepted, exit 2, in every entry
point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.protocol._cli import main as cli_main
from evalport.protocol.runtime import (
    AgentSession,
    SessionInfo,
    TurnContext,
    as_factory,
    session_factory,
    tool,
)
from evalport.server import EvalAdapter


async def one(message):
    return f"one: {message}"


def two(message, history):
    return f"two: {message} after {len(history)}"


async def three(message, history, ctx):
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    return f"three: {message} #{ctx.state['seen']}"


class Handler:
    def __init__(self, info: SessionInfo) -> None:
        self.session = info.session_id

    async def turn(self, message: str, ctx: TurnContext) -> str:
        return f"handler: {message}"


def factory(info: SessionInfo) -> Handler:  # annotated: a factory, not a message
    return Handler(info)


@as_factory
def marked(anything):
    return Handler(anything)


class Shared:
    def turn(self, message: str, ctx: TurnContext) -> str:
        return f"shared: {message}"


SHAPES = [
    (one, ["one: hi", "one: again"]),
    (two, ["two: hi after 0", "two: again after 2"]),
    (three, ["three: hi #1", "three: again #2"]),
    (Handler, ["handler: hi", "handler: again"]),
    (factory, ["handler: hi", "handler: again"]),
    (marked, ["handler: hi", "handler: again"]),
    (Shared(), ["shared: hi", "shared: again"]),
]


@pytest.mark.parametrize(("agent", "replies"), SHAPES, ids=lambda v: getattr(v, "__name__", ""))
async def test_each_shape_answers_in_process(agent: Any, replies: list[str]) -> None:
    session = await AgentSession.open(agent, SessionInfo("s-1"))
    assert [(await session.send(text)).reply for text in ("hi", "again")] == replies


@pytest.mark.parametrize(("agent", "replies"), SHAPES[:3], ids=["one", "two", "three"])
async def test_each_turn_function_shape_answers_over_the_adapter(
    agent: Any, replies: list[str]
) -> None:
    adapter = EvalAdapter(agent, token=None)
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
        session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
        for text, reply in zip(("hi", "again"), replies, strict=True):
            answer = await client.post(f"/evals/sessions/{session}/turns", json={"message": text})
            assert answer.status_code == 200, answer.text
            assert answer.json()["run"]["reply"] == reply
    await adapter.aclose()


@tool
def lookup(order_id: str) -> str:
    return order_id


def four(a, b, c, d):
    return ""


class NoInfo:
    def __init__(self) -> None:
        pass


@pytest.mark.parametrize(
    ("agent", "found"),
    [
        (lookup, "is the @tool 'lookup', not an agent"),
        (four, "(4 arguments)"),
        (NoInfo, "(0 arguments)"),
        (42, "is not an agent"),
    ],
    ids=["tool", "four", "class-without-info", "number"],
)
def test_anything_else_is_refused_naming_what_was_found_and_the_shapes(
    agent: Any, found: str
) -> None:
    with pytest.raises(TypeError) as raised:
        session_factory(agent)
    text = str(raised.value)
    assert found in text
    assert "async def agent(message)" in text and "SessionInfo" in text
    with pytest.raises(TypeError, match="accepted: "):
        EvalAdapter(agent, token=None)


AGENTS = """
from evalport.protocol.runtime import tool


async def agent(message):
    return "echo: " + message


@tool
def lookup(order_id: str) -> str:
    return order_id


def four(a, b, c, d):
    return ""
"""

CASE = """
from evalport.client import eval_case


@eval_case
async def echoes(ctx):
    await ctx.send("hi")
    ctx.contains("echo: hi")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "shaped_agents.py").write_text(AGENTS)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "echo_eval.py").write_text(CASE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_one_argument_agent_runs_under_local(project: Path) -> None:
    out = project / "run"
    assert cli_main(["run", "evals", "--local", "shaped_agents.py:agent", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["cases"][0]["verdict"] == "passed"


@pytest.mark.parametrize("name", ["lookup", "four"])
@pytest.mark.parametrize("command", ["run", "serve"])
def test_an_unfit_agent_is_one_line_and_exit_2_in_every_command(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    name: str,
) -> None:
    monkeypatch.setenv("EVALPORT_TOKEN", "t" * 24)
    argv = (
        ["run", "evals", "--local", f"shaped_agents.py:{name}"]
        if command == "run"
        else ["serve", f"shaped_agents.py:{name}", "--port", "1"]
    )
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"shaped_agents.py:{name}" in err[0] and "accepted: " in err[0]
    assert "Traceback" not in err[0]
