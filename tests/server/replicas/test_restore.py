"""Rebuilding a session from its stored run gives the agent exactly what it had in memory."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from evalport.protocol import AgentRun, Message, ToolCall, Usage
from evalport.protocol.runtime import (
    AgentSession,
    SessionInfo,
    TurnContext,
    TurnTimedOut,
    session_factory,
    tool,
)
from evalport.protocol.runtime._agent import history_of


@tool
def lookup(order_id: str) -> str:
    return "shipped"


async def busy_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    """Tool steps, model steps, failures, stop signals and timeouts, by message.

    Earlier turns' replies are read from their final response steps, so the reply is the
    final model step's content, as it is for a real agent.
    """
    if message == "boom":
        raise ValueError("down")
    if message == "slow":
        await asyncio.sleep(5)
    ctx.model_step(tool_calls=[ToolCall(id="c1", name="lookup", arguments={"order_id": message})])
    lookup(message)
    if message == "stop":
        ctx.stop("steps_limit", "enough")
    reply = f"reply to {message} after {len(history)}"
    ctx.model_step(content=reply, usage=Usage(input=3, output=2))
    return reply


async def test_history_of_the_stored_run_equals_the_live_history() -> None:
    info = SessionInfo(session_id="s1")
    live = await AgentSession.open(busy_agent, info)
    for message in ["one", "boom", "two", "stop", "three"]:
        await live.send(message)
    with pytest.raises(TurnTimedOut):
        await live.send("slow", timeout=0.05)
    await live.send("four")
    stored = msgspec.json.decode(msgspec.json.encode(live.run), type=AgentRun)
    assert history_of(stored) == live._history
    roles = [m.role for m in history_of(stored)]
    assert roles[:5] == ["user", "assistant", "user", "user", "assistant"]  # "boom" failed


async def test_a_restored_session_continues_the_run_and_calls_the_hook() -> None:
    calls: list[tuple[list[Message], int]] = []

    class Handler:
        def __init__(self, info: SessionInfo) -> None:
            self.count = 0

        async def restore(self, history: list[Message], run: AgentRun) -> None:
            calls.append((history, run.turns))
            self.count = len([m for m in history if m.role == "user"])

        def turn(self, message: str, ctx: TurnContext) -> str:  # sync: runs in a thread
            self.count += 1
            return f"{message} {self.count} {len(ctx.history)}"

    factory = session_factory(Handler)
    info = SessionInfo(session_id="s2")
    first = await AgentSession.from_factory(factory, info)
    await first.send("a")
    await first.send("b")
    stored = msgspec.json.decode(msgspec.json.encode(first.run), type=AgentRun)
    moved = await AgentSession.restore(factory, info, stored)
    run = await moved.send("c")
    assert run.reply == "c 3 4"
    assert run.turns == 3 and run.user_messages == ["a", "b", "c"]
    assert [step.turn for step in run.steps] == [1, 2, 3]
    [(history, turns)] = calls
    assert [m.content for m in history] == ["a", "a 1 0", "b", "b 2 2"] and turns == 2


async def test_agents_without_the_hook_are_restored_too() -> None:
    async def plain(message: str, history: list[Message], ctx: TurnContext) -> str:
        return " / ".join(str(m.content) for m in history)

    factory = session_factory(plain)
    info = SessionInfo(session_id="s3")
    first = await AgentSession.from_factory(factory, info)
    await first.send("x")
    moved = await AgentSession.restore(factory, info, first.snapshot())
    assert (await moved.send("y")).reply == "x / "
