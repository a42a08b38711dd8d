"""Interrupts in the runtime: ``ctx.interrupt`` suspends a turn through the same machinery
as approval requests, and ``AgentSession.decide`` answers it."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    ApprovalsRequest,
    Message,
    RunEnvelope,
    TracePolicy,
    encode,
)
from evalport.protocol.runtime import (
    AgentSession,
    DecisionError,
    NotSuspended,
    SessionInfo,
    SessionSuspended,
    TurnContext,
    TurnTimedOut,
)
from instructor_rules import violations


def assert_instructor_decodes(run: AgentRun) -> None:
    """What Instructor's client reads still holds, verbatim and redacted."""
    for body in (
        encode(RunEnvelope(run=run)),
        encode(RunEnvelope(run=TracePolicy.safe().apply(run))),
    ):
        assert violations(body) == []


def answer(value: object) -> ApprovalDecision:
    return ApprovalDecision(decision="answer", answer=value)


async def asking(message: str, history: list[Message], ctx: TurnContext) -> str:
    if message == "mixed":
        colour, approval = await asyncio.gather(
            ctx.interrupt("choice", ["red", "blue"]), ctx.request_approval("paint", {"wall": 1})
        )
        return f"{colour} approved={approval.approved}"
    if message == "blank":
        await ctx.interrupt("")
    if message == "slow":
        await ctx.interrupt("clarification", "which wall?")
        await asyncio.sleep(5)
    try:
        text = await ctx.interrupt("clarification", {"question": "which order?"})
    except asyncio.CancelledError:
        ctx.state["cancelled"] = True
        raise
    return f"order {text}"


async def open_session() -> AgentSession:
    return await AgentSession.open(asking, SessionInfo("s-int"))


async def test_an_interrupt_suspends_and_the_answer_is_returned_and_recorded() -> None:
    session = await open_session()
    run = await session.send("refund")
    assert session.suspended and run.status == "in_progress"
    (asked,) = run.pending_interrupts
    assert (asked.kind, asked.payload, asked.turn) == (
        "clarification",
        {"question": "which order?"},
        1,
    )
    assert_instructor_decodes(run)  # a suspended run still reads as Instructor expects
    with pytest.raises(SessionSuspended):
        await session.send("another")
    run = await session.decide({asked.id: answer("A1")})
    assert (run.status, run.reply, run.pending_interrupts) == ("completed", "order A1", [])
    (answered,) = run.interrupts
    assert (answered.id, answered.kind, answered.answer) == (asked.id, "clarification", "A1")
    assert answered.requested_at == asked.requested_at and answered.answered_at
    assert_instructor_decodes(run)
    with pytest.raises(NotSuspended):
        await session.decide({asked.id: answer("again")})
    await session.close()


async def test_an_approval_and_an_interrupt_share_one_suspension() -> None:
    session = await open_session()
    run = await session.send("mixed")
    (asked,) = run.pending_interrupts
    (pending,) = run.pending_approvals
    with pytest.raises(DecisionError) as error:
        await session.decide({asked.id: "approve", pending.call_id: answer(1), "x": "approve"})
    assert error.value.unknown == ["x"]
    assert sorted(error.value.mismatched) == sorted([asked.id, pending.call_id])
    with pytest.raises(DecisionError) as error:
        await session.decide({asked.id: answer("red")})
    assert error.value.missing == [pending.call_id]
    assert session.suspended  # nothing resumed
    run = await session.decide({asked.id: answer("blue"), pending.call_id: "approve"})
    assert run.reply == "blue approved=True" and run.pending_approvals == []
    await session.close()


async def test_a_timeout_or_a_close_drops_the_pending_interrupt() -> None:
    session = await open_session()
    run = await session.send("slow", timeout=1)
    (asked,) = run.pending_interrupts
    with pytest.raises(TurnTimedOut) as timed_out:
        await session.decide({asked.id: answer("the red one")}, timeout=0.05)
    assert timed_out.value.run.status == "failed" and timed_out.value.run.pending_interrupts == []
    assert not session.suspended
    run = await session.send("plain")
    assert run.pending_interrupts
    await session.close()
    assert session.state["cancelled"] is True  # the waiting agent was woken, not left hanging


async def test_an_interrupt_needs_a_kind() -> None:
    session = await open_session()
    run = await session.send("blank")
    assert run.status == "failed" and "needs a kind" in run.errors
    await session.close()


def test_an_approval_decision_leaves_answer_out_of_the_wire() -> None:
    # a 1.0 server decodes approvals strictly: a decision it knows must not carry `answer`
    body = msgspec.json.decode(
        encode(ApprovalsRequest(decisions={"c1": ApprovalDecision(decision="approve")}))
    )
    assert body == {"decisions": {"c1": {"decision": "approve", "reason": None}}}
    sent = msgspec.json.decode(encode(ApprovalsRequest(decisions={"i1": answer(None)})))
    assert sent == {"decisions": {"i1": {"decision": "answer", "reason": None, "answer": None}}}
