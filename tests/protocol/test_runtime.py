"""The agent interface, the turn context and the turn runtime (protocol/runtime: _agent,
_context, _session)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from typing import Any

import pytest
from evalport.protocol import (
    ApprovalDecision,
    ImagePart,
    Message,
    ToolCall,
    Usage,
    decode_run,
    encode,
)
from evalport.protocol.runtime import (
    AgentSession,
    ApprovalRejected,
    DecisionError,
    NotSuspended,
    SessionBusy,
    SessionClosed,
    SessionInfo,
    SessionSuspended,
    TurnContext,
    TurnTimedOut,
    agent_identity,
    as_factory,
    current_context,
    session_factory,
    tool,
)


def info(session_id: str = "s-1", **extra: Any) -> SessionInfo:
    return SessionInfo(session_id=session_id, **extra)


def is_uuid(text: str) -> bool:
    return str(uuid.UUID(text)) == text


@tool
def lookup(order_id: str, verbose: bool = False) -> dict[str, Any]:
    if order_id == "missing":
        raise KeyError(order_id)
    return {"id": order_id, "status": "shipped"}


@tool(name="refund_order", approval=lambda order_id, amount: amount > 100)
async def refund(order_id: str, amount: int) -> str:
    return f"refunded {amount} on {order_id}"


# -- the three shapes -----------------------------------------------------------------------


async def test_turn_function_receives_history_and_keeps_state_in_ctx() -> None:
    seen: list[list[Message]] = []

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        seen.append(history)
        ctx.state["count"] = ctx.state.get("count", 0) + 1
        return f"{message}:{ctx.state['count']}"

    session = await AgentSession.open(agent, info())
    await session.send("a")
    run = await session.send("b")
    assert run.reply == "b:2"
    assert run.turns == 2
    assert run.user_messages == ["a", "b"]
    assert [m.content for m in seen[1]] == ["a", "a:1"]
    assert [m.role for m in seen[1]] == ["user", "assistant"]


async def test_session_factory_is_called_once_per_session_with_its_info() -> None:
    made: list[SessionInfo] = []

    class Support:
        def __init__(self, session: SessionInfo) -> None:
            made.append(session)
            self.turns = 0

        def turn(self, message: str, ctx: TurnContext) -> str:
            self.turns += 1
            return f"{self.turns} {threading.current_thread() is threading.main_thread()}"

    first = await AgentSession.open(Support, info("s-1", case_id="c", metadata={"k": 1}))
    second = await AgentSession.open(Support, info("s-2"))
    assert (await first.send("x")).reply == "1 False"  # sync code runs off the loop thread
    assert (await first.send("x")).reply == "2 False"
    assert (await second.send("x")).reply == "1 False"
    assert [m.case_id for m in made] == ["c", None]
    assert made[0].metadata == {"k": 1}


async def test_handler_instance_is_shared_and_async_factories_are_awaited() -> None:
    class Echo:
        async def turn(self, message: str, ctx: TurnContext) -> str:
            return message.upper()

    @as_factory
    async def factory(session: SessionInfo, *, extra: int = 0) -> Echo:
        return Echo()

    assert (await (await AgentSession.open(Echo(), info())).send("hi")).reply == "HI"
    assert (await (await AgentSession.open(factory, info())).send("yo")).reply == "YO"


def test_unrecognisable_agents_are_refused_at_adaptation() -> None:
    with pytest.raises(TypeError, match="not an agent"):
        session_factory(42)
    with pytest.raises(TypeError, match="as_factory or as_turn_function"):
        session_factory(lambda a, b, c, d: "x")


def test_agent_identity_prefers_arguments_then_attributes() -> None:
    class Named:
        name = "support"
        version = "2.1"

        def turn(self, message: str, ctx: TurnContext) -> str:
            return ""

    assert agent_identity(Named()) == agent_identity(Named(), "support", "2.1")
    assert agent_identity(Named(), name="x").name == "x"
    assert agent_identity(lookup).name == "lookup"
    assert agent_identity(lookup).version == "0"


# -- recording --------------------------------------------------------------------------------


async def test_tools_steps_usage_and_events_are_recorded_in_sync() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        ctx.llm_profile(driver="openai", model="gpt-x", max_tokens=512)
        ctx.model_step(
            content=None,
            tool_calls=[ToolCall(id="call-1", name="lookup", arguments={"order_id": "A1"})],
            usage=Usage(input=30, output=7),
        )
        with ctx.tool_execution("lookup", {"order_id": "A1"}, call_id="call-1") as execution:
            execution.result = {"status": "shipped"}
        ctx.model_step(content="It shipped.", finish_reason="stop", usage=Usage(input=50, output=4))
        ctx.event("answered", {"order": "A1"})
        return "It shipped."

    session = await AgentSession.open(agent, info())
    run = await session.send("where is A1?")
    assert [step.type for step in run.steps] == ["tool_execution", "final_response"]
    assert [step.index for step in run.steps] == [0, 1]
    first = run.steps[0]
    assert [call.id for call in first.requested_tool_calls] == ["call-1"]
    assert first.tool_executions[0].tool_call_id == "call-1"
    assert first.tool_executions[0].result == {"status": "shipped"}
    assert len(run.tools) == 1
    assert run.tools[0].id == first.tool_executions[0].id
    assert run.tools[0].tool_call.name == "lookup"
    assert all(is_uuid(step.id) for step in run.steps)
    assert is_uuid(run.tools[0].id)
    assert run.usage == Usage(input=80, output=11)
    assert run.llm_profile is not None and run.llm_profile.max_tokens == 512
    assert run.events[0].name == "answered" and run.events[0].turn == 1
    assert run.steps[1].output_messages[0].content == "It shipped."
    assert run.stop_signal is not None and run.stop_signal.reason == "completed"
    assert run.status == "completed"
    # The wire form decodes back to the same run.
    assert decode_run(encode({"run": run})) == run


async def test_tool_decorator_records_arguments_results_errors_and_adds_calls() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        lookup("A1")
        with contextlib.suppress(KeyError):
            lookup("missing", verbose=True)
        return "done"

    run = await (await AgentSession.open(agent, info())).send("go")
    first, failed = run.steps[0].tool_executions
    assert first.arguments == {"order_id": "A1", "verbose": False}
    assert first.result == {"id": "A1", "status": "shipped"}
    assert failed.has_error and failed.error == "'missing'"
    assert failed.result is None
    assert run.steps[0].errors[0].error_class == "ToolError"
    assert run.steps[0].errors[0].type == "KeyError"
    calls = run.steps[0].requested_tool_calls
    assert [c.id for c in calls] == [e.tool_call_id for e in run.steps[0].tool_executions]
    assert [t.tool_call.name for t in run.tools] == ["lookup", "lookup"]
    assert run.steps[-1].type == "final_response"
    assert run.status == "completed"  # a tool error the agent handled is not a failed turn


def test_tool_decorator_is_transparent_outside_a_turn() -> None:
    assert current_context() is None
    assert lookup("A2") == {"id": "A2", "status": "shipped"}


async def test_turns_accumulate_and_steps_carry_their_turn() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        lookup(message)
        return message

    session = await AgentSession.open(agent, info())
    await session.send("A1")
    run = await session.send("A2")
    assert [s.turn for s in run.steps] == [1, 1, 2, 2]
    assert [s.index for s in run.steps] == [0, 1, 2, 3]
    assert [t.turn for t in run.tools] == [1, 2]
    assert run.steps_of_turn(2)[0].tool_executions[0].arguments["order_id"] == "A2"


async def test_stop_signal_makes_the_turn_stopped() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        ctx.stop("steps_limit", "too many steps", context={"limit": 3})
        return "partial"

    run = await (await AgentSession.open(agent, info())).send("x")
    assert run.status == "stopped"
    assert run.stop_signal is not None
    assert (run.stop_signal.reason, run.stop_signal.context) == ("steps_limit", {"limit": 3})
    assert run.steps[-1].stop_signal == run.stop_signal


async def test_agent_exception_is_a_failed_turn_not_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        if message == "boom":
            raise RuntimeError("database is down")
        return "fine"

    session = await AgentSession.open(agent, info())
    run = await session.send("boom")
    assert run.status == "failed"
    detail = run.error_details[0]
    assert (detail.message, detail.type, detail.error_class) == (
        "database is down",
        "RuntimeError",
        "AgentError",
    )
    assert detail.error_id is not None and detail.error_id in caplog.text
    assert run.errors == "RuntimeError: database is down"
    assert "Traceback" not in encode(run).decode()
    assert run.steps[-1].type == "error" and run.steps[-1].has_errors
    assert (await session.send("again")).status == "completed"  # the session goes on


async def test_a_reply_that_is_not_text_fails_the_turn() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> Any:
        return 42

    run = await (await AgentSession.open(agent, info())).send("x")
    assert run.status == "failed"
    assert "expected str" in run.errors


# -- one turn at a time, timeouts, cancellation -------------------------------------------------


async def test_second_turn_while_busy_is_refused() -> None:
    gate = asyncio.Event()

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        await gate.wait()
        return "ok"

    session = await AgentSession.open(agent, info())
    first = asyncio.create_task(session.send("1"))
    await asyncio.sleep(0)
    assert session.busy
    with pytest.raises(SessionBusy):
        await session.send("2")
    gate.set()
    assert (await first).turns == 1
    assert not session.busy


async def test_cancelling_the_caller_does_not_cancel_the_turn() -> None:
    gate = asyncio.Event()

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        await gate.wait()
        return "finished"

    session = await AgentSession.open(agent, info())
    caller = asyncio.create_task(session.send("1"))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert session.run.reply == "finished"
    assert session.run.status == "completed"
    assert not session.busy  # released by the turn itself, not by its (gone) caller
    assert (await session.send("2")).turns == 2


async def test_timeout_records_a_failed_turn_and_frees_the_session() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        if message == "slow":
            lookup("A1")
            await asyncio.sleep(10)
        return "quick"

    session = await AgentSession.open(agent, info())
    with pytest.raises(TurnTimedOut) as caught:
        await session.send("slow", timeout=0.05)
    run = caught.value.run
    assert run.status == "failed"
    assert run.stop_signal is not None and run.stop_signal.reason == "time_limit"
    assert run.error_details[0].type == "TurnTimeout"
    assert len(run.tools) == 1  # what happened before the timeout is kept
    assert not session.busy
    assert (await session.send("fast", timeout=1)).reply == "quick"


async def test_a_caller_cancelled_while_the_turn_times_out_does_not_cut_it_short() -> None:
    cancels: list[str] = []

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        if message != "slow":
            return "quick"
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancels.append("cancelled")
            try:
                await asyncio.sleep(0.15)  # a slow clean-up, within the grace
                cancels.append("cleaned up")
            except asyncio.CancelledError:
                cancels.append("clean-up cancelled")
            raise
        return "late"

    session = await AgentSession.open(agent, info())
    caller = asyncio.create_task(session.send("slow", timeout=0.05))
    await asyncio.sleep(0.1)  # timed out; the agent is cleaning up
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    with pytest.raises(TurnTimedOut) as caught:
        await session.wait(timeout=0)  # what the cancelled call would have raised
    assert caught.value.timeout == 0.05
    assert cancels == ["cancelled", "cleaned up"]  # cancelled once, never mid-clean-up
    run = caught.value.run
    assert run.status == "failed" and run.error_details[0].type == "TurnTimeout"
    assert "0.05 s" in run.error_details[0].message
    assert (await session.send("again", timeout=1)).turns == 2  # usable


async def test_close_cancels_the_turn_and_refuses_more() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        await asyncio.sleep(10)
        return ""

    session = await AgentSession.open(agent, info())
    caller = asyncio.create_task(session.send("x"))
    await asyncio.sleep(0.01)
    await session.close()
    await caller
    with pytest.raises(SessionClosed):
        await session.send("y")


# -- approvals --------------------------------------------------------------------------------


async def refund_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    amount = int(message)
    try:
        return await refund("A1", amount)
    except ApprovalRejected as rejected:
        return f"I cannot refund that: {rejected.reason}"


async def test_gated_tool_suspends_and_a_rejection_reaches_the_agent() -> None:
    session = await AgentSession.open(refund_agent, info())
    run = await session.send("500")
    assert run.status == "in_progress" and session.suspended
    (pending,) = run.pending_approvals
    assert (pending.tool, pending.arguments, pending.turn) == (
        "refund_order",
        {"order_id": "A1", "amount": 500},
        1,
    )
    assert run.tools == []  # requested, not executed, until decided
    assert [call.id for step in run.steps for call in step.requested_tool_calls] == [
        pending.call_id
    ]
    with pytest.raises(SessionSuspended):
        await session.send("again")
    run = await session.decide(
        {pending.call_id: ApprovalDecision(decision="reject", reason="above the limit")}
    )
    assert run.status == "completed"
    assert run.reply == "I cannot refund that: above the limit"
    assert run.pending_approvals == []
    execution = run.steps[0].tool_executions[0]
    assert execution.tool_call_id == pending.call_id
    assert execution.approval is not None
    assert (execution.approval.state, execution.approval.reason) == ("rejected", "above the limit")
    assert execution.has_error and execution.result is None


async def test_approved_tool_runs_and_small_amounts_need_no_approval() -> None:
    session = await AgentSession.open(refund_agent, info())
    run = await session.send("50")
    assert run.status == "completed" and run.reply == "refunded 50 on A1"
    assert run.tools[0].approval is None
    run = await session.send("150")
    run = await session.decide({run.pending_approvals[0].call_id: "approve"})
    assert run.reply == "refunded 150 on A1"
    assert run.tools[1].approval is not None and run.tools[1].approval.state == "approved"
    assert run.tools[1].result == "refunded 150 on A1"


async def test_decisions_must_match_the_pending_ids_exactly() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        results = await asyncio.gather(refund("A1", 200), refund("A2", 300))
        return " / ".join(results)

    session = await AgentSession.open(agent, info())
    with pytest.raises(NotSuspended):
        await session.decide({})
    run = await session.send("go")
    ids = [p.call_id for p in run.pending_approvals]
    assert len(ids) == 2  # both requests of the same pass join one suspension
    with pytest.raises(DecisionError) as missing:
        await session.decide({ids[0]: "approve"})
    assert missing.value.missing == [ids[1]]
    with pytest.raises(DecisionError) as unknown:
        await session.decide({ids[0]: "approve", ids[1]: "approve", "nope": "reject"})
    assert unknown.value.unknown == ["nope"]
    assert session.suspended  # nothing was resumed
    run = await session.decide({ids[0]: "approve", ids[1]: "approve"})
    assert run.reply == "refunded 200 on A1 / refunded 300 on A2"


async def test_sync_agent_can_use_gated_sync_tools() -> None:
    @tool(approval=True)
    def cancel_order(order_id: str) -> str:
        return f"cancelled {order_id}"

    def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        try:
            return cancel_order(message)
        except ApprovalRejected:
            return "not cancelled"

    session = await AgentSession.open(agent, info())
    run = await session.send("A9")
    run = await session.decide({run.pending_approvals[0].call_id: "approve"})
    assert run.reply == "cancelled A9"


async def test_timeout_does_not_count_time_suspended() -> None:
    session = await AgentSession.open(refund_agent, info())
    run = await session.send("500", timeout=0.5)
    await asyncio.sleep(0.6)
    run = await session.decide({run.pending_approvals[0].call_id: "approve"}, timeout=0.5)
    assert run.status == "completed"


async def test_an_idle_session_keeps_its_run_encoded_and_decodes_it_on_demand() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        lookup(message)
        return message

    session = await AgentSession.open(agent, info())
    returned = await session.send("A1")
    envelope = session.run_envelope
    assert decode_run(envelope) == returned  # the bytes are the protocol's {"run": ...}
    assert session.run_envelope is envelope  # idle: served as is, no re-encoding
    assert session.run == returned and session.snapshot() == returned
    assert session.snapshot() is not session.run
    run = await session.send("A2")  # the next turn continues the decoded run
    assert [t.tool_call.arguments["order_id"] for t in run.tools] == ["A1", "A2"]


async def test_a_hot_session_keeps_its_run_as_objects_and_measures_it_exactly() -> None:
    """``hot=True``: no decode or encode between turns (the same object goes on) until the
    host parks it; ``run_size`` is the envelope's length at every point, parts, events,
    failures and approvals included, without encoding the settled turns again."""

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        ctx.event("heard", {"message": message, "parts": len(ctx.parts)})
        if message == "boom":
            raise ValueError("down")
        if message == "big":
            await refund("A1", 500)
        lookup(message)
        return "é" * len(history)

    session = await AgentSession.open(agent, info(), hot=True)
    assert session.run_size == len(session.run_envelope)
    image = ImagePart(data=b"\x89PNG" + bytes(range(30)), media_type="image/png")
    for message in ["A1", "boom", "A2", "big", "parts", "A3"]:
        if message == "big":
            waiting = session.start(message)
            run = await waiting
            assert session.suspended and session.run_size == len(session.run_envelope)
            [pending] = run.pending_approvals
            run = await session.decide({pending.call_id: ApprovalDecision(decision="approve")})
        else:
            run = await session.send(message, parts=[image] if message == "parts" else ())
        assert session.run is run  # hot: the turn's own object, not decoded again
        assert session.run_size == len(session.run_envelope)
    session.park()
    parked = session.run_envelope
    assert session.run_envelope is parked and session.run_size == len(parked)
    assert decode_run(parked) == run
    run = await session.send("A4")  # decoded once, then hot again
    assert session.run is run and run.turns == 7
    assert session.run_size == len(session.run_envelope)


async def test_incremental_tools_and_usage_match_a_full_rebuild() -> None:
    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        ctx.model_step(usage=Usage(input=10, output=2))
        lookup(message)
        if message == "gated":
            with contextlib.suppress(ApprovalRejected):
                await refund("A1", 500)
        ctx.model_step(content="ok", usage=Usage(input=5, output=1, reasoning=3))
        return "ok"

    session = await AgentSession.open(agent, info())
    await session.send("A1")
    run = await session.send("gated")
    run = await session.decide({run.pending_approvals[0].call_id: "reject"})
    run = await session.send("A2")
    rebuilt = session.snapshot()
    rebuilt.sync_tools()
    rebuilt.sync_usage()
    assert run.tools == rebuilt.tools and len(run.tools) == 4
    assert run.usage == rebuilt.usage == Usage(input=45, output=9, reasoning=9)
