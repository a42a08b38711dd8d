"""``/health`` lists the tools an agent declares (an optional field): ``@tool`` functions
of its class or module, a framework agent's tools; an agent that declares none sends no
list. A case naming a tool the agent does not declare is flagged (a typo in a safety
check, ``not_called_tool("refund_ordr")``, never passes unnoticed)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import msgspec
import pytest
from evalport.client import HttpTarget, LocalTarget, cases_from, eval_case, run_trial
from evalport.protocol import Health
from evalport.protocol.runtime import declared_tools
from evalport.server import EvalAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from support_agent import agent as support

SUPPORT_TOOLS = {"search_orders", "order_status", "refund_order"}


async def bare(message: str) -> str:
    return "hello"


async def health_of(agent: object) -> dict:
    app = EvalAdapter(agent, token=None).app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as c:
        response = await c.get("/health")
    msgspec.json.decode(response.content, type=Health)  # the wire type agrees
    return response.json()


async def test_health_lists_the_tools_a_class_declares_with_tool() -> None:
    body = await health_of(support)
    assert set(body["tools"]) >= SUPPORT_TOOLS


async def test_an_agent_that_declares_no_tools_sends_no_list() -> None:
    assert declared_tools(bare) is None
    assert "tools" not in await health_of(bare)


def test_framework_agents_declare_their_tools() -> None:
    pytest.importorskip("agents")
    pytest.importorskip("pydantic_ai")
    from agents import Agent, function_tool
    from evalport.server.adapters import OpenAIAgentsAgent, PydanticAIAgent
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.models.test import TestModel

    @function_tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return order_id

    assert declared_tools(OpenAIAgentsAgent(Agent(name="a", tools=[lookup]))) == ["lookup"]
    typed = PydanticAgent(TestModel())

    @typed.tool_plain
    def refund(order_id: str) -> str:
        return order_id

    assert declared_tools(PydanticAIAgent(typed)) == ["refund"]


@eval_case
async def typo(ctx) -> None:
    await ctx.send("Where is my order A1049?")
    ctx.not_called_tool("refund_ordr")


@pytest.mark.parametrize("where", ["local", "http"])
async def test_a_case_naming_an_undeclared_tool_is_flagged(where: str) -> None:
    case = cases_from(typo)[0]
    if where == "local":
        async with LocalTarget(support) as target:
            result = await run_trial(case, target)
    else:
        app = EvalAdapter(support, token=None).app()
        transport = httpx.ASGITransport(app=app)
        async with HttpTarget("http://agent", transport=transport) as target:
            await target.check()
            result = await run_trial(case, target)
    (checked,) = result.assertions
    assert checked.context.get("undeclared_tool") == "refund_ordr"
    assert "'refund_ordr' is not among the tools the agent declares" in checked.message
    assert any("refund_ordr" in line for line in result.logs)
