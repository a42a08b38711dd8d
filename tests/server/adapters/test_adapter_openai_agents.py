"""The OpenAI Agents SDK adapter against the SDK's own ScriptedModel (no network)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("agents")

from adapterkit import (
    TRACK_ERROR,
    evaluate_all,
    lookup_result,
    plan,
    refund_result,
    usage_of,
)
from agents import Agent, RunConfig, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from evalport.protocol import AgentSession, SessionInfo
from evalport.server.adapters import OpenAIAgentsAgent
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

NO_TRACING = RunConfig(tracing_disabled=True)


def responder() -> Any:
    ids = itertools.count(1)

    def respond(call: ModelCall) -> ModelStep:
        items = (
            [{"role": "user", "content": call.input}] if isinstance(call.input, str) else call.input
        )
        names: dict[str, str] = {}
        users: list[str] = []
        results: list[tuple[str, str]] = []
        for item in items:
            if item.get("role") == "user":
                users.append(str(item["content"]))
                results = []
            elif item.get("type") == "function_call":
                names[item["call_id"]] = item["name"]
            elif item.get("type") == "function_call_output":
                results.append((names[item["call_id"]], str(item["output"])))
        action = plan(users, results)
        usage = usage_of(action)
        step_usage = Usage(
            requests=1,
            input_tokens=usage.input,
            output_tokens=usage.output,
            total_tokens=usage.input + usage.output,
            input_tokens_details=InputTokensDetails(
                cached_tokens=usage.cache_read, cache_write_tokens=0
            ),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=usage.reasoning),
        )
        if isinstance(action, str):
            return ModelStep(output=[assistant_message(action)], usage=step_usage)
        output = [function_call(c.name, c.arguments, call_id=f"call-{next(ids)}") for c in action]
        return ModelStep(output=output, usage=step_usage)

    return respond


@function_tool
def lookup(order_id: str) -> dict[str, str]:
    """Find an order."""
    return lookup_result(order_id)


@function_tool
def track(order_id: str) -> str:
    """Track a parcel."""
    raise RuntimeError(TRACK_ERROR)


@function_tool(needs_approval=True)
def refund(order_id: str) -> str:
    """Refund an order (a person approves)."""
    return refund_result(order_id)


def support_agent(model: ScriptedModel | None = None) -> Agent[Any]:
    model = model or ScriptedModel([ModelStep.respond(responder())] * 12)
    return Agent(name="support", model=model, tools=[lookup, track, refund])


async def test_http_evaluation_of_the_adapted_agent() -> None:
    await evaluate_all(lambda: OpenAIAgentsAgent(support_agent(), run_config=NO_TRACING))


async def test_history_context_and_the_error_formatter_the_model_sees() -> None:
    seen: list[str] = []

    def formatter(args: Any) -> str:
        seen.append(args.kind)
        return f"sorry: {args.tool_name} failed"

    model = ScriptedModel([ModelStep.respond(responder())] * 6)
    contexts: list[str] = []
    adapter = OpenAIAgentsAgent(
        support_agent(model),
        run_config=RunConfig(tracing_disabled=True, tool_error_formatter=formatter),
        context=lambda info: contexts.append(info.session_id) or {"user": info.session_id},
        max_turns=5,
    )
    assert adapter.agent_name == "support"
    session = await AgentSession.open(adapter, SessionInfo("s-1"))
    run = await session.send("Where is order E5?")
    assert run.reply == (
        "Order E5: lookup -> {'order_id': 'E5', 'status': 'shipped'}; track -> sorry: track failed"
    )
    assert seen == ["tool_exception"] and contexts == ["s-1"]
    track_run = next(tool for tool in run.tools if tool.tool_call.name == "track")
    assert track_run.error == TRACK_ERROR
    run = await session.send("Please refund it.")
    assert [p.arguments for p in run.pending_approvals] == [{"order_id": "E5"}]
    # the second turn's model call got the first turn's items before the new message
    first_item = model.calls[-1].input[0]
    assert (first_item["role"], first_item["content"]) == ("user", "Where is order E5?")
    await session.close()


async def test_a_handoff_is_an_event() -> None:
    billing = Agent(
        name="billing",
        model=ScriptedModel([{"output": [assistant_message("billing here")]}]),
    )
    front = Agent(
        name="front",
        model=ScriptedModel([{"output": [function_call("transfer_to_billing", {}, call_id="h1")]}]),
        handoffs=[billing],
    )
    session = await AgentSession.open(
        OpenAIAgentsAgent(front, run_config=NO_TRACING), SessionInfo("s")
    )
    run = await session.send("I have a billing question")
    assert run.reply == "billing here"
    assert [(e.name, e.data) for e in run.events] == [
        ("handoff", {"from": "front", "to": "billing"})
    ]


def test_only_an_agents_sdk_agent_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"serves an agents\.Agent"):
        OpenAIAgentsAgent(object())  # type: ignore[arg-type]
