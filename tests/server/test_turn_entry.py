"""One entry for a turn (ARCHITECTURE.md, "The path of a turn through the server"): every
turn request, plain or streamed, traced or not, goes through `TurnRunner.turn` once, and a
repeat of a key in either form never runs the agent twice."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter
from evalport.server._turns import TurnRunner

STREAM = {"Accept": "text/event-stream"}


def test_the_runner_has_one_turn_entry() -> None:
    public = {name for name in vars(TurnRunner) if not name.startswith("_")}
    assert public == {"turn", "decide", "answer", "attached"}  # decide: approvals only


@pytest.mark.parametrize("traced", [False, True])
async def test_plain_and_streamed_turns_take_the_one_entry(traced: bool) -> None:
    options: dict[str, Any] = {}
    if traced:
        from opentelemetry.sdk.trace import TracerProvider

        options["tracing"] = TracerProvider()
    adapter = EvalAdapter(lambda message: f"re: {message}", token=None, **options)
    runner = adapter.sessions.turns
    entered: list[bool] = []
    original = runner.turn

    async def spy(*args: Any, stream: bool = False) -> Any:
        entered.append(stream)
        return await original(*args, stream=stream)

    runner.turn = spy  # type: ignore[method-assign]
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        session = (await http.post("/evals/sessions", json={})).json()["sessionId"]
        path = f"/evals/sessions/{session}/turns"
        plain = await http.post(path, json={"message": "a"})
        streamed = await http.post(path, json={"message": "b"}, headers=STREAM)
    assert plain.status_code == streamed.status_code == 200
    assert "event: result" in streamed.text
    assert entered == [False, True]


async def test_a_key_repeated_in_either_form_runs_the_agent_once() -> None:
    ran: list[str] = []
    started = asyncio.Event()

    async def slow(message: str, history: list[Any], ctx: TurnContext) -> str:
        ran.append(message)
        started.set()
        await asyncio.sleep(0.3)
        return f"slow {message}"

    adapter = EvalAdapter(slow, token=None)
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        session = (await http.post("/evals/sessions", json={})).json()["sessionId"]
        path = f"/evals/sessions/{session}/turns"
        key = {"Idempotency-Key": "once"}
        first = asyncio.create_task(
            http.post(path, json={"message": "pay"}, headers={**STREAM, **key})
        )
        await started.wait()  # the streamed turn runs; a plain repeat waits for it
        plain = await http.post(path, json={"message": "pay"}, headers=key)
        joined = await http.post(path, json={"message": "pay"}, headers={**STREAM, **key})
        later = await http.post(path, json={"message": "pay"}, headers=key)
    assert ran == ["pay"]
    assert plain.status_code == later.status_code == 200
    assert plain.content == later.content
    assert plain.text in (await first).text and plain.text in joined.text
