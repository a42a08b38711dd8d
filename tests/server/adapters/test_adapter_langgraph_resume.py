"""LangGraph: resumed nodes, rejections, step limits and a thread continued in another process."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langgraph")

from adapterfakes import chat_model
from adapterkit import Call
from evalport.protocol.runtime import AgentSession, SessionInfo, session_factory
from evalport.server.adapters import LangGraphAgent
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt


def tool_graph(tools: list[Any], plan: Any) -> Any:
    model = chat_model(plan).bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name="resumes")


def erase_then_tally(users: Sequence[str], results: Sequence[tuple[str, str]]) -> list[Call] | str:
    if results:
        return "done: " + "; ".join(f"{name}={text}" for name, text in results)
    return [Call("erase", {"item": "a"}), Call("tally", {})]


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "rejected"])
async def test_a_resumed_node_records_each_call_once_in_the_order_asked(approved: bool) -> None:
    runs = itertools.count(1)

    @tool
    def tally() -> str:
        """Count."""
        return f"run #{next(runs)}"

    @tool
    def erase(item: str) -> str:
        """Erase an item (a person approves)."""
        decision = interrupt({"tool": "erase", "args": {"item": item}})
        # the tool's own text on rejection: evalport must not record it as a result
        return f"erased {item}" if decision["approved"] else f"kept {item}, as asked"

    session = await AgentSession.open(
        LangGraphAgent(tool_graph([tally, erase], erase_then_tally)), SessionInfo("s")
    )
    run = await session.send("tidy up")
    (pending,) = run.pending_approvals
    decision = "approve" if approved else ("reject", "keep it")
    run = await session.decide({pending.call_id: decision})
    assert run.status == "completed", run.errors
    asked = [call.id for call in run.steps[0].requested_tool_calls]
    assert [tool.tool_call.id for tool in run.tools] == asked
    erased, tally_run = run.tools
    # the node ran again on resume: recorded once, with the run the graph kept (which the
    # model was sent); how many times tally ran depends on when the interrupt cut it short
    assert f"tally={tally_run.result}" in run.reply
    assert erased.approval is not None
    if approved:
        assert erased.approval.state == "approved" and erased.result == "erased a"
    else:
        assert erased.approval.state == "rejected" and "kept a, as asked" in run.reply
        assert erased.result is None and erased.error == "rejected by approver: keep it"
        (execution,) = [e for e in run.steps[0].tool_executions if e.tool_call_id == asked[0]]
        assert execution.has_error and execution.result is None


async def test_the_recursion_limit_stops_the_turn_with_the_steps_limit_reason() -> None:
    @tool
    def again() -> str:
        """Once more."""
        return "more"

    def forever(users: Sequence[str], results: Sequence[tuple[str, str]]) -> list[Call]:
        return [Call("again", {})]

    adapter = LangGraphAgent(tool_graph([again], forever), config={"recursion_limit": 5})
    session = await AgentSession.open(adapter, SessionInfo("s"))
    run = await session.send("loop")
    assert run.status == "stopped", run.errors
    assert run.stop_signal is not None and run.stop_signal.reason == "steps_limit"
    assert "recursion" in run.stop_signal.message.lower()


def remembers(users: Sequence[str], results: Sequence[tuple[str, str]]) -> str:
    names = [text.split("my name is ", 1)[1] for text in users if "my name is " in text]
    known = f"you are {names[-1]}" if names else "I don't know your name"
    return f"{known} ({len(users)} messages)"


async def test_a_thread_continues_in_another_process_from_the_saved_checkpoint() -> None:
    def make() -> Any:
        # each adapter has its own in-memory checkpointer, as each replica would
        return session_factory(LangGraphAgent(tool_graph([], remembers)))

    on_a, on_b = make(), make()
    first = await AgentSession.from_factory(on_a, SessionInfo("s"))
    assert (await first.send("my name is Ada")).reply == "you are Ada (1 messages)"
    moved = await AgentSession.restore(on_b, SessionInfo("s"), first.snapshot())
    run = await moved.send("who am I?")
    assert run.reply == "you are Ada (2 messages)"
    # back on A, whose checkpointer still holds the thread as it was after turn 1
    back = await AgentSession.restore(on_a, SessionInfo("s"), run)
    assert (await back.send("and now?")).reply == "you are Ada (3 messages)"
