"""LangGraph's ``interrupt()`` as an evalport interrupt, on LangGraph's real runtime with a
fake chat model, answered by ``ctx.resume`` or an interrupt policy, on both targets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("langgraph")

from adapterfakes import chat_model
from adapterkit import http_target, passed, trial
from evalport.client import EvalContext, LocalTarget, Target, answer_by_kind
from evalport.protocol import digest
from evalport.server.adapters import LangGraphAgent
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt

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
