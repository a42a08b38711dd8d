"""A turn's own slice of the run, beside the accumulated run (issue 19, item 10)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest
from evalport.client import HttpTarget, LocalTarget, Target, Trajectory
from evalport.client.assertions import CalledTool, EventNotSeen, MaxSteps, TurnWithin
from evalport.server import EvalAdapter
from fake_target import shop_agent

TOKEN = "own-slice-token-0123456789"


@pytest.fixture(params=["local", "asgi"])
async def target(request) -> AsyncIterator[Target]:
    if request.param == "local":
        async with LocalTarget(shop_agent) as local:
            yield local
        return
    adapter = EvalAdapter(shop_agent, token=TOKEN)
    http = HttpTarget(
        "http://adapter.test/agent",
        token=TOKEN,
        transport=httpx.ASGITransport(app=adapter.app("/agent")),
    )
    yield http
    await http.aclose()
    await adapter.aclose()


async def test_a_turn_holds_its_own_slice_beside_the_accumulated_run(target) -> None:
    session = await target.open()
    first = await session.send("hello")
    second = await session.send("refund A1 40")
    wire = msgspec.json.encode(second.run)
    own = second.own
    await session.close()

    # the accumulated run keeps everything; the slice only this turn
    assert second.run.usage.input == 100 and own.usage.input == 50
    assert [t.tool_call.name for t in second.run.tools] == ["lookup", "refund"]
    assert [t.tool_call.name for t in own.tools] == ["lookup", "refund"]
    assert first.own.tools == [] and first.own.usage.input == 50
    assert [e.name for e in second.run.events] == ["greeted"]
    assert own.events == [] and [e.name for e in first.own.events] == ["greeted"]
    assert own.steps == second.steps and own.steps and all(s.turn == 2 for s in own.steps)
    assert own.user_messages == ["refund A1 40"] and own.turns == 2
    assert own.reply == second.reply == "refunded 40 on A1"
    assert own.steps_of_turn(own.turns) == own.steps
    messages = Trajectory.of(own).messages()
    assert messages[0].role == "user" and messages[0].content == "refund A1 40"
    assert "hello" not in Trajectory.of(own).transcript()

    # run assertions read the slice: what the whole run has, this turn may not
    assert EventNotSeen("greeted").evaluate(own).passed
    assert not EventNotSeen("greeted").evaluate(second.run).passed
    assert not CalledTool("lookup").evaluate(first.own).passed
    assert CalledTool("lookup").evaluate(first.run).passed is False
    assert CalledTool("lookup").evaluate(own).passed
    assert MaxSteps(len(own.steps)).evaluate(own).passed
    assert not MaxSteps(len(own.steps)).evaluate(second.run).passed
    assert TurnWithin(10).evaluate(own).passed

    # computed on the client: the run on the wire is unchanged
    assert msgspec.json.encode(second.run) == wire
