"""LangGraph: resumed nodes, rejections, step limits and a thread continued in another process."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest

pytest.importorskip("langgraph")

from adapterfakes import chat_model
from adapterkit import Call
from evalport.protocol.runtime import AgentSession, SessionInfo, session_factory
from evalport.server.adapters import LangGraphAgent
from langchain_core.callbacks import AsyncCallbackHandler
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


def counting_tally() -> Any:
    """A ``tally`` tool answering ``run #n`` on its n-th run."""
    runs = itertools.count(1)

    @tool
    def tally() -> str:
        """Count."""
        return f"run #{next(runs)}"

    return tally


def erase_then_tally(users: Sequence[str], results: Sequence[tuple[str, str]]) -> list[Call] | str:
    if results:
        return "done: " + "; ".join(f"{name}={text}" for name, text in results)
    return [Call("erase", {"item": "a"}), Call("tally", {})]


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "rejected"])
async def test_a_resumed_node_records_each_call_once_in_the_order_asked(approved: bool) -> None:
    tally = counting_tally()

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


class Ordering(AsyncCallbackHandler):
    """Runs before evalport's recorder (``run_inline``) and holds tool callbacks back to force
    one ordering of erase's interrupt and tally's first run. A sync tool's callbacks run in
    its worker thread, hence thread events, waited for off the event loop."""

    run_inline = True

    def __init__(self, ordering: str) -> None:
        self.ordering = ordering
        self.tally_ended = threading.Event()  # tally's first run ended ("before")
        self.resumed_ended = threading.Event()  # the resumed node's tally ended ("after")
        self.first_ended = threading.Event()  # tally's first run ended ("after")
        self.first_node: UUID | None = None  # the interrupted run of the tools node
        self.first: UUID | None = None
        self.first_result: Any = None
        self.timeouts: list[str] = []

    async def wait(self, event: threading.Event, what: str) -> None:
        if not await asyncio.to_thread(event.wait, 10):
            self.timeouts.append(what)

    async def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        name = serialized.get("name")
        node = kwargs.get("parent_run_id")
        if self.first_node is None:
            self.first_node = node
        if self.ordering == "before" and name == "erase" and not self.tally_ended.is_set():
            await self.wait(self.tally_ended, "tally's first run")
        if self.ordering == "after" and name == "tally" and node == self.first_node:
            # tally's first run starts only once the resumed node's tally has ended
            self.first = run_id
            await self.wait(self.resumed_ended, "the resumed node")

    async def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        if self.resumed_ended.is_set():  # the model answers once the stale run has ended
            await self.wait(self.first_ended, "the stale run")

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        name = getattr(output, "name", None)
        if name == "tally" and self.ordering == "before":
            self.tally_ended.set()
        if name == "tally" and self.ordering == "after":
            if run_id == self.first:
                self.first_result = output.content
                self.first_ended.set()
            else:
                self.resumed_ended.set()


@pytest.mark.parametrize("ordering", ["before", "after"])
async def test_a_tool_run_the_interrupted_node_left_behind_is_not_recorded(ordering: str) -> None:
    """tally ends before erase's interrupt stops the node ("before"), or its first run
    starts and ends only while the resumed node runs ("after"): either way evalport records
    the run the graph kept and sent the model."""
    tally = counting_tally()

    @tool
    def erase(item: str) -> str:
        """Erase an item (a person approves)."""
        interrupt({"tool": "erase", "args": {"item": item}})
        return f"erased {item}"

    order = Ordering(ordering)
    graph = tool_graph([tally, erase], erase_then_tally)
    session = await AgentSession.open(
        LangGraphAgent(graph, config={"callbacks": [order]}), SessionInfo("s")
    )
    run = await session.send("tidy up")
    (pending,) = run.pending_approvals
    run = await session.decide({pending.call_id: "approve"})
    assert run.status == "completed", run.errors
    assert not order.timeouts
    erased, tally_run = run.tools
    assert erased.result == "erased a"
    assert f"tally={tally_run.result}" in run.reply
    if ordering == "after":
        assert order.first_result is not None and order.first_result != tally_run.result
