"""LangGraph's ``interrupt()`` as an evalport interrupt, on LangGraph's real runtime with a
fake chat model, answered by ``ctx.resume`` or an interrupt policy, on both targets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("langgraph")

from adapterfakes import chat_model
from adapterkit import http_target, passed, plan, refund_result, trial
from evalport.client import EvalContext, LocalTarget, Target, answer_by_kind
from evalport.protocol import digest
from evalport.server.adapters import LangGraphAgent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt


@tool("refund")
def refund_plain(order_id: str) -> str:
    """Refund an order (the middleware asks a person first)."""
    return refund_result(order_id)


QUESTION = {"kind": "choice", "question": "Which size?", "options": ["S", "M", "L"]}


def shirt_graph() -> Any:
    def planner(users: Sequence[str], results: Sequence[tuple[str, str]]) -> str:
        return f"Ordering a shirt in size {users[-1]}."

    model = chat_model(planner)

    def ask(state: MessagesState) -> dict[str, Any]:
        size = interrupt(QUESTION)
        return {"messages": [HumanMessage(str(size))]}

    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_node("model", answer)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "model")
    return graph.compile(name="shirts")


@asynccontextmanager
async def local_target(agent: Any) -> AsyncIterator[Target]:
    yield LocalTarget(agent)


TARGETS = {"local": local_target, "http": asynccontextmanager(http_target)}


async def resumed_by_the_case(ctx: EvalContext) -> None:
    turn = await ctx.send("I want a shirt")
    assert turn.reply == "" and [i.kind for i in turn.run.pending_interrupts] == ["choice"]
    ctx.interrupted("choice", payload={"question": "Which size?"})
    turn = await ctx.resume("M")
    assert [t.index for t in ctx.turns] == [1] and turn.message == "I want a shirt"
    ctx.contains("size M")
    ctx.interrupted("choice", payload={"options": ["S", "M", "L"]}, answer="M", count=1)
    ctx.interrupted("choice", answer="L", count=0)
    ctx.succeeded()


async def answered_by_the_policy(ctx: EvalContext) -> None:
    ctx.interrupt_policy = answer_by_kind({"choice": "L"})
    turn = await ctx.send("I want a shirt")
    assert turn.run.pending_interrupts == []
    ctx.contains("size L")
    ctx.interrupted("choice", answer="L")


@pytest.mark.parametrize("target_kind", sorted(TARGETS))
async def test_interrupt_is_answered_by_resume_or_policy(target_kind: str) -> None:
    async with TARGETS[target_kind](LangGraphAgent(shirt_graph())) as target:
        passed(await trial(target, resumed_by_the_case))
        passed(await trial(target, answered_by_the_policy))


async def test_both_targets_give_the_same_run() -> None:
    runs = []
    for kind in sorted(TARGETS):
        async with TARGETS[kind](LangGraphAgent(shirt_graph())) as target:
            session = await target.open()
            suspended = (await session.send("I want a shirt")).run
            (asked,) = suspended.pending_interrupts
            done = (
                await session.decide({asked.id: {"decision": "answer", "answer": "S"}})  # type: ignore[dict-item]
            ).run
            await session.close()
            runs.append((suspended, done))
    (local_suspended, local_done), (http_suspended, http_done) = runs
    for suspended in (local_suspended, http_suspended):
        (asked,) = suspended.pending_interrupts
        assert (suspended.status, asked.kind) == ("in_progress", "choice")
        # the safe trace policy digests the payload's values like tool arguments
        assert asked.payload["question"] == digest("Which size?")
    for done in (local_done, http_done):
        (answered,) = done.interrupts
        assert answered.answer == digest("S") and answered.payload["kind"] == digest("choice")
        assert done.reply == "Ordering a shirt in size S." and done.pending_interrupts == []
    assert local_done.interrupts[0].payload == http_done.interrupts[0].payload
    assert len(local_done.steps) == len(http_done.steps)


def review_agent(mode: str) -> LangGraphAgent:
    agents = pytest.importorskip("langchain.agents")
    middleware = pytest.importorskip("langchain.agents.middleware")
    agent = agents.create_agent(
        chat_model(plan),
        tools=[refund_plain],
        middleware=[
            middleware.HumanInTheLoopMiddleware(interrupt_on={"refund": True}, interrupt_mode=mode)
        ],
        name="support",
    )
    return LangGraphAgent(agent, reviews="interrupts")


def reviewed_with(decision: dict[str, Any], mode: str) -> Any:
    return {"decisions": [decision]} if mode == "batched" else decision


@pytest.mark.parametrize("mode", ["batched", "per_call"])
async def test_middleware_reviews_take_edit_and_respond_as_interrupt_answers(mode: str) -> None:
    async def edited(ctx: EvalContext) -> None:
        turn = await ctx.send("Please refund order B7.")
        (asked,) = turn.run.pending_interrupts
        assert asked.kind == "tool_review"
        edit = {"type": "edit", "edited_action": {"name": "refund", "args": {"order_id": "C9"}}}
        await ctx.resume(reviewed_with(edit, mode))
        ctx.called_tool("refund", {"order_id": "C9"}, result=refund_result("C9"))
        ctx.not_called_tool("refund", {"order_id": "B7"})
        ctx.contains(refund_result("C9"))

    async def responded(ctx: EvalContext) -> None:
        await ctx.send("Please refund order B7.")
        answer = reviewed_with({"type": "respond", "message": "refund queued"}, mode)
        await ctx.resume(answer)
        ctx.called_tool("refund", {"order_id": "B7"}, result="refund queued", count=1)
        ctx.contains("refund -> refund queued")
        ctx.interrupted("tool_review", answer=answer)

    async def rejected(ctx: EvalContext) -> None:
        await ctx.send("Please refund order B7.")
        await ctx.resume(reviewed_with({"type": "reject", "message": "no"}, mode))
        ctx.tool_was_rejected("refund", {"order_id": "B7"})

    async with asynccontextmanager(http_target)(review_agent(mode)) as target:
        for case in (edited, responded, rejected):
            passed(await trial(target, case))


def test_reviews_is_checked() -> None:
    with pytest.raises(ValueError, match="reviews is 'approvals' or 'interrupts'"):
        LangGraphAgent(shirt_graph(), reviews="maybe")
