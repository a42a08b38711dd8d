"""The pydantic-ai adapter against pydantic-ai's own FunctionModel, streaming (no model
requests)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from adapterfakes import chunks, function_model, streaming_function_model
from adapterkit import (
    ANSWER_STEP,
    CALL_STEP,
    TRACK_ERROR,
    Call,
    Listener,
    evaluate_all,
    lookup_result,
    plan,
    refund_result,
)
from evalport.protocol.runtime import AgentSession, SessionInfo, TurnTimedOut, session_factory
from evalport.server.adapters import PydanticAIAgent
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext, ToolFailed, models
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits


@pytest.fixture(autouse=True)
def no_model_requests() -> Iterator[None]:
    allowed = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = False
    yield
    models.ALLOW_MODEL_REQUESTS = allowed


def support_agent() -> Agent[None, str]:
    agent = Agent(function_model(plan), name="support")

    @agent.tool_plain
    def lookup(order_id: str) -> dict[str, str]:
        """Find an order."""
        return lookup_result(order_id)

    @agent.tool_plain
    def track(order_id: str) -> str:
        """Track a parcel."""
        raise ToolFailed(TRACK_ERROR)

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order (a person approves)."""
        return refund_result(order_id)

    return agent


async def test_http_evaluation_of_the_adapted_agent() -> None:
    await evaluate_all(lambda: PydanticAIAgent(support_agent()))


async def test_each_session_keeps_its_own_history_and_records_the_model() -> None:
    adapter = PydanticAIAgent(support_agent(), name="support-bot", version="3")
    assert (adapter.agent_name, adapter.agent_version) == ("support-bot", "3")
    first = await AgentSession.open(adapter, SessionInfo("one"))
    second = await AgentSession.open(adapter, SessionInfo("two"))
    await first.send("Where is order C3?")
    run = await second.send("Please refund it.")
    assert [p.arguments for p in run.pending_approvals] == [{"order_id": "?"}]
    assert run.llm_profile is not None and run.llm_profile.model == "planned"
    await second.close()
    run = await first.send("Please refund it.")
    assert [p.arguments for p in run.pending_approvals] == [{"order_id": "C3"}]
    await first.close()


class Answer(BaseModel):
    order_id: str
    status: str


async def test_structured_output_is_the_reply_as_json_and_output_tools_are_no_tool_calls() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        (output_tool,) = info.output_tools
        args = {"order_id": "D4", "status": "shipped"}
        return ModelResponse(parts=[ToolCallPart(output_tool.name, args)])

    agent = Agent(streaming_function_model(answer), output_type=Answer)
    session = await AgentSession.open(PydanticAIAgent(agent), SessionInfo("s"))
    run = await session.send("status of D4?")
    assert json.loads(run.reply) == {"order_id": "D4", "status": "shipped"}
    assert run.tools == [] and [step.type for step in run.steps] == ["final_response"]
    assert run.steps[0].requested_tool_calls == []


async def test_a_tool_that_raises_fails_the_turn_and_is_recorded_failed() -> None:
    def call_broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("broken", {"n": 1})])

    agent = Agent(streaming_function_model(call_broken))

    @agent.tool_plain
    def broken(n: int) -> int:
        raise ValueError("disk on fire")

    session = await AgentSession.open(PydanticAIAgent(agent), SessionInfo("s"))
    run = await session.send("go")
    assert run.status == "failed" and "disk on fire" in run.errors
    (tool,) = run.tools
    assert (tool.tool_call.name, tool.tool_call.arguments, tool.error) == (
        "broken",
        {"n": 1},
        "disk on fire",
    )


async def test_external_deferred_calls_fail_the_turn_with_a_clear_error() -> None:
    from pydantic_ai.exceptions import CallDeferred

    def call_remote(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("remote", {})])

    agent = Agent(streaming_function_model(call_remote))

    @agent.tool_plain
    def remote() -> str:
        raise CallDeferred

    session = await AgentSession.open(PydanticAIAgent(agent), SessionInfo("s"))
    run = await session.send("go")
    assert run.status == "failed"
    assert "deferred remote for external execution" in run.errors


def test_only_a_pydantic_ai_agent_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"serves a pydantic_ai\.Agent"):
        PydanticAIAgent(Call("x", {}))  # type: ignore[arg-type]


async def test_deps_are_made_once_per_session() -> None:
    def whoami(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse(parts=[TextPart(str(messages[-1].parts[-1].content))])
        return ModelResponse(parts=[ToolCallPart("whoami_tool", {})])

    agent = Agent(streaming_function_model(whoami), deps_type=dict)

    @agent.tool
    def whoami_tool(ctx: RunContext[dict[str, str]]) -> str:
        return ctx.deps["session"]

    made: list[str] = []

    def deps(info: SessionInfo) -> dict[str, str]:
        made.append(info.session_id)
        return {"session": info.session_id}

    adapter = PydanticAIAgent(agent, deps=deps)
    session = await AgentSession.open(adapter, SessionInfo("s-9"))
    assert (await session.send("who am I?")).reply == "s-9"
    assert (await session.send("and now?")).reply == "s-9"
    assert made == ["s-9"]


async def test_a_turn_timeout_cancels_the_run_and_the_session_goes_on() -> None:
    async def slow_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = messages[-1].parts[-1]
        if isinstance(prompt, UserPromptPart) and prompt.content == "take your time":
            await asyncio.sleep(30)
        return ModelResponse(parts=[TextPart(f"seen {len(messages)} message(s)")])

    session = await AgentSession.open(
        PydanticAIAgent(Agent(streaming_function_model(slow_once))), SessionInfo("s")
    )
    with pytest.raises(TurnTimedOut) as timed_out:
        await session.send("take your time", timeout=0.2)
    assert timed_out.value.run.status == "failed"
    run = await session.send("quick")
    # the cancelled run left nothing in the session's history
    assert (run.status, run.reply) == ("completed", "seen 1 message(s)")
    await session.close()


def _remembers(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    users = [
        part.content
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    names = [text.split("my name is ", 1)[1] for text in users if "my name is " in text]
    known = f"you are {names[-1]}" if names else "I don't know your name"
    return ModelResponse(parts=[TextPart(f"{known} ({len(users)} messages)")])


async def test_a_session_continues_in_another_process_from_its_saved_history() -> None:
    def make() -> Any:
        return session_factory(PydanticAIAgent(Agent(streaming_function_model(_remembers))))

    first = await AgentSession.from_factory(make(), SessionInfo("s"))
    assert (await first.send("my name is Ada")).reply == "you are Ada (1 messages)"
    moved = await AgentSession.restore(make(), SessionInfo("s"), first.snapshot())
    run = await moved.send("who am I?")
    assert run.reply == "you are Ada (2 messages)"
    again = await AgentSession.restore(make(), SessionInfo("s"), run)
    assert (await again.send("and now?")).reply == "you are Ada (3 messages)"


async def test_the_request_limit_stops_the_turn_with_the_steps_limit_reason() -> None:
    def forever(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("lookup", {"order_id": "A1"})])

    agent = Agent(streaming_function_model(forever))

    @agent.tool_plain
    def lookup(order_id: str) -> dict[str, str]:
        """Find an order."""
        return lookup_result(order_id)

    adapter = PydanticAIAgent(agent, usage_limits=UsageLimits(request_limit=3))
    session = await AgentSession.open(adapter, SessionInfo("s"))
    run = await session.send("loop")
    assert run.status == "stopped", run.errors
    assert run.stop_signal is not None and run.stop_signal.reason == "steps_limit"
    assert len(run.tools) == 3


async def test_a_saved_state_that_cannot_be_read_back_fails_the_next_turn_saying_so() -> None:
    def make() -> Any:
        return session_factory(PydanticAIAgent(Agent(streaming_function_model(_remembers))))

    first = await AgentSession.from_factory(make(), SessionInfo("s"))
    await first.send("my name is Ada")
    stored = first.snapshot()
    (state,) = [event for event in stored.events if event.name == "framework.state"]
    state.data["messages"] = [{"hash": "sha256:00", "bytes": 3}]  # not pydantic-ai's form
    moved = await AgentSession.restore(make(), SessionInfo("s"), stored)
    run = await moved.send("who am I?")
    assert run.status == "failed"
    assert "saved pydantic-ai state could not be read back" in run.errors


async def test_the_reply_streams_through_function_models_stream_function_as_it_is_written() -> None:
    listener = Listener()

    async def write(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Your parcel "
        await listener.first_delta_told()  # the host has the first chunk: the model goes on
        yield "left the "
        yield "depot."

    session = await AgentSession.open(
        PydanticAIAgent(Agent(FunctionModel(stream_function=write))), SessionInfo("s")
    )
    run = await session.start("where is it?", listen=listener)
    assert run.status == "completed", run.errors
    listener.assert_streamed(run, ["Your parcel ", "left the ", "depot."])
    assert [step.type for step in run.steps] == ["final_response"]


async def test_a_streamed_tool_turn_records_its_tool_calls_as_before() -> None:
    session = await AgentSession.open(PydanticAIAgent(support_agent()), SessionInfo("s"))
    listener = Listener()
    run = await session.start("Where is order A1?", listen=listener)
    assert run.status == "completed", run.errors
    listener.assert_streamed(run, chunks(run.reply))
    assert run.reply.startswith("Order A1: lookup -> ")
    assert [(tool.tool_call.name, tool.result) for tool in run.tools] == [
        ("lookup", lookup_result("A1")),
        ("track", None),
    ]
    assert TRACK_ERROR in (run.tools[1].error or "")
    assert [step.type for step in run.steps] == ["tool_execution", "final_response"]
    usages = [step.usage for step in run.steps]
    assert [(u.input, u.output, u.cache_read, u.reasoning) for u in usages] == [
        tuple(CALL_STEP.values()),
        tuple(ANSWER_STEP.values()),
    ]


async def test_a_model_that_cannot_stream_still_answers_whole() -> None:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.messages import TextPart as ResponseText
    from pydantic_ai.models.function import FunctionModel

    def answer(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[ResponseText("Order A1 has shipped.")])

    agent = Agent(FunctionModel(answer))  # no stream_function: pydantic-ai cannot stream it
    session = await AgentSession.open(PydanticAIAgent(agent), SessionInfo("s"))
    listener = Listener()
    run = await session.start("Where is order A1?", listen=listener)
    assert run.status == "completed" and run.reply == "Order A1 has shipped."
    assert listener.deltas() == ["Order A1 has shipped."]  # the whole reply, as one delta
