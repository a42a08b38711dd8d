"""The OpenAI Agents SDK adapter against the SDK's own ScriptedModel (no network)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")

from adapterfakes import chunks, scripted_model, streaming_scripted_model
from adapterkit import (
    ANSWER_STEP,
    CALL_STEP,
    TRACK_ERROR,
    Listener,
    evaluate_all,
    lookup_result,
    plan,
    refund_result,
)
from agents import Agent, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from evalport.protocol.runtime import AgentSession, SessionInfo, session_factory
from evalport.server.adapters import OpenAIAgentsAgent

NO_TRACING = RunConfig(tracing_disabled=True)


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
    model = model or scripted_model(plan)
    return Agent(name="support", model=model, tools=[lookup, track, refund])


async def test_http_evaluation_of_the_adapted_agent() -> None:
    await evaluate_all(lambda: OpenAIAgentsAgent(support_agent(), run_config=NO_TRACING))


async def test_history_context_and_the_error_formatter_the_model_sees() -> None:
    seen: list[str] = []

    def formatter(args: Any) -> str:
        seen.append(args.kind)
        return f"sorry: {args.tool_name} failed"

    model = scripted_model(plan, calls=6)
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


def _front_and_billing() -> tuple[Agent[Any], Agent[Any]]:
    billing = Agent(
        name="billing",
        model=ScriptedModel(
            [
                {"output": [assistant_message("billing here")]},
                {"output": [assistant_message("billing again")]},
            ]
        ),
    )
    front = Agent(
        name="front",
        model=ScriptedModel(
            [
                {"output": [function_call("transfer_to_billing", {}, call_id="h1")]},
                {"output": [assistant_message("front again")]},
            ]
        ),
        handoffs=[billing],
    )
    return front, billing


async def test_a_handoff_is_an_event_and_an_execution_of_the_transfer_call() -> None:
    front, _ = _front_and_billing()
    session = await AgentSession.open(
        OpenAIAgentsAgent(front, run_config=NO_TRACING), SessionInfo("s")
    )
    run = await session.send("I have a billing question")
    assert run.reply == "billing here"
    assert [(e.name, e.data) for e in run.events if e.name == "handoff"] == [
        ("handoff", {"from": "front", "to": "billing"})
    ]
    (transfer,) = run.tools
    assert (transfer.tool_call.id, transfer.tool_call.name) == ("h1", "transfer_to_billing")
    assert transfer.result == {"assistant": "billing"} and transfer.error is None
    assert run.steps[0].tool_executions[0].tool_call_id == "h1"


async def test_the_agent_handed_off_to_answers_the_next_turns() -> None:
    front, _ = _front_and_billing()
    session = await AgentSession.open(
        OpenAIAgentsAgent(front, run_config=NO_TRACING), SessionInfo("s")
    )
    await session.send("I have a billing question")
    run = await session.send("and another one")
    assert run.reply == "billing again"


async def test_a_restored_session_continues_with_the_agent_handed_off_to() -> None:
    front, _ = _front_and_billing()
    adapter = OpenAIAgentsAgent(front, run_config=NO_TRACING)
    factory = session_factory(adapter)
    first = await AgentSession.from_factory(factory, SessionInfo("s"))
    await first.send("I have a billing question")
    moved = await AgentSession.restore(factory, SessionInfo("s"), first.snapshot())
    run = await moved.send("and another one")
    assert run.reply == "billing again" and run.status == "completed"
    assert run.turns == 2


async def test_a_current_agent_that_cannot_be_found_fails_the_turn_by_name() -> None:
    front, _ = _front_and_billing()
    first = await AgentSession.open(
        OpenAIAgentsAgent(front, run_config=NO_TRACING), SessionInfo("s")
    )
    await first.send("I have a billing question")
    alone = Agent(name="front", model=ScriptedModel([]))
    factory = session_factory(OpenAIAgentsAgent(alone, run_config=NO_TRACING))
    moved = await AgentSession.restore(factory, SessionInfo("s"), first.snapshot())
    run = await moved.send("and another one")
    assert run.status == "failed" and "'billing'" in run.errors and "agents=" in run.errors


async def test_max_turns_stops_the_turn_with_the_steps_limit_reason() -> None:
    model = ScriptedModel(
        [
            {"output": [function_call("lookup", {"order_id": "A1"}, call_id=f"c{n}")]}
            for n in range(3)
        ]
    )
    agent = Agent(name="looper", model=model, tools=[lookup])
    session = await AgentSession.open(
        OpenAIAgentsAgent(agent, run_config=NO_TRACING, max_turns=2), SessionInfo("s")
    )
    run = await session.send("loop")
    assert run.status == "stopped", run.errors
    assert run.stop_signal is not None and run.stop_signal.reason == "steps_limit"
    assert [tool.tool_call.id for tool in run.tools] == ["c0", "c1"]


def test_only_an_agents_sdk_agent_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"serves an agents\.Agent"):
        OpenAIAgentsAgent(object())  # type: ignore[arg-type]


async def test_a_tool_error_that_escapes_fails_the_turn_and_the_execution() -> None:
    @function_tool(failure_error_function=None)
    def fragile(order_id: str) -> str:
        """Breaks loudly."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([{"output": [function_call("fragile", {"order_id": "Z"}, call_id="f1")]}])
    agent = Agent(name="fragile", model=model, tools=[fragile])
    session = await AgentSession.open(
        OpenAIAgentsAgent(agent, run_config=NO_TRACING), SessionInfo("s")
    )
    run = await session.send("go")
    assert run.status == "failed" and run.errors == "RuntimeError: disk on fire"
    (tool,) = run.tools
    assert (tool.tool_call.id, tool.tool_call.arguments) == ("f1", {"order_id": "Z"})
    assert tool.error == "disk on fire"
    assert {(e.type, e.message) for e in run.steps[0].errors} == {("RuntimeError", "disk on fire")}


async def test_a_tool_error_the_model_sees_is_recorded_with_the_tools_own_type() -> None:
    @function_tool
    def close_account(account: str) -> str:
        """Close an account."""
        raise PermissionError("only owners may close accounts")

    model = ScriptedModel(
        [
            {"output": [function_call("close_account", {"account": "X"}, call_id="k1")]},
            {"output": [assistant_message("could not close it")]},
        ]
    )
    agent = Agent(name="closer", model=model, tools=[close_account])
    session = await AgentSession.open(
        OpenAIAgentsAgent(agent, run_config=NO_TRACING), SessionInfo("s")
    )
    run = await session.send("close X")
    assert run.status == "completed"
    (execution,) = run.steps[0].tool_executions
    assert execution.has_error and execution.error == "only owners may close accounts"
    assert [(e.type, e.message) for e in run.steps[0].errors] == [
        ("PermissionError", "only owners may close accounts")
    ]


async def test_an_agent_behind_a_handoff_object_is_found_among_the_agents_given() -> None:
    from agents import handoff

    front, billing = _front_and_billing()
    front = front.clone(handoffs=[handoff(billing)])
    first = await AgentSession.open(
        OpenAIAgentsAgent(front, run_config=NO_TRACING), SessionInfo("s")
    )
    assert (await first.send("I have a billing question")).tools[0].result == {
        "assistant": "billing"
    }
    factory = session_factory(OpenAIAgentsAgent(front, agents=[billing], run_config=NO_TRACING))
    moved = await AgentSession.restore(factory, SessionInfo("s"), first.snapshot())
    assert (await moved.send("and another one")).reply == "billing again"


async def test_the_reply_streams_through_run_streamed_as_it_is_written() -> None:
    listener = Listener()
    reply = [{"output": [assistant_message("Your parcel left the depot.")]}]
    # the model goes on after its first chunk once the host has it
    model = streaming_scripted_model(reply, pause=listener.first_delta_told)
    agent = Agent(name="support", model=model)
    session = await AgentSession.open(
        OpenAIAgentsAgent(agent, run_config=NO_TRACING), SessionInfo("s")
    )
    run = await session.start("where is it?", listen=listener)
    assert run.status == "completed", run.errors
    listener.assert_streamed(run, ["Your ", "parcel ", "left ", "the ", "depot."])
    assert [step.type for step in run.steps] == ["final_response"]


async def test_a_streamed_tool_turn_records_its_tool_calls_as_before() -> None:
    adapter = OpenAIAgentsAgent(support_agent(), run_config=NO_TRACING)
    session = await AgentSession.open(adapter, SessionInfo("s"))
    listener = Listener()
    run = await session.start("Where is order A1?", listen=listener)
    assert run.status == "completed", run.errors
    listener.assert_streamed(run, chunks(run.reply))
    assert run.reply.startswith("Order A1: lookup -> ")
    assert [(tool.tool_call.name, tool.result) for tool in run.tools] == [
        ("lookup", lookup_result("A1")),
        ("track", None),
    ]
    assert run.tools[1].error == TRACK_ERROR
    assert [step.type for step in run.steps] == ["tool_execution", "final_response"]
    usages = [step.usage for step in run.steps]
    assert [(u.input, u.output, u.cache_read, u.reasoning) for u in usages] == [
        tuple(CALL_STEP.values()),
        tuple(ANSWER_STEP.values()),
    ]
