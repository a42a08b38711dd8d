"""The LangGraph adapter against a graph whose chat model is a LangChain fake (no network)."""

from __future__ import annotations

import json
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from adapterfakes import chat_model, chunks
from adapterkit import (
    ANSWER_STEP,
    APPROVE,
    CALL_STEP,
    REJECT,
    TRACK_ERROR,
    Listener,
    evaluate_all,
    http_target,
    lookup_result,
    passed,
    plan,
    refund_rejected,
    refund_result,
    trial,
)
from evalport.client import EvalContext
from evalport.protocol import ApprovalDecision
from evalport.protocol.runtime import AgentSession, SessionInfo
from evalport.server.adapters import LangGraphAgent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt


@tool
def lookup(order_id: str) -> dict[str, str]:
    """Find an order."""
    return lookup_result(order_id)


@tool
def track(order_id: str) -> str:
    """Track a parcel."""
    raise RuntimeError(TRACK_ERROR)


@tool
def refund(order_id: str) -> str:
    """Refund an order (a person approves)."""
    decision = interrupt({"tool": "refund", "args": {"order_id": order_id}})
    if not decision["approved"]:
        return f"refund declined: {decision['reason']}"
    return refund_result(order_id)


def support_graph(*, checkpointer: Any = None, sync: bool = False) -> Any:
    model = chat_model(plan).bind_tools([lookup, track, refund])

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def call_model_sync(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model_sync if sync else call_model)
    graph.add_node("tools", ToolNode([lookup, track, refund], handle_tool_errors=True))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name="support", checkpointer=checkpointer)


@pytest.mark.parametrize("sync", [False, True], ids=["async nodes", "sync nodes"])
async def test_http_evaluation_of_the_adapted_agent(sync: bool) -> None:
    await evaluate_all(lambda: LangGraphAgent(support_graph(sync=sync)))


async def test_sessions_are_threads_of_the_graphs_own_checkpointer() -> None:
    saver = InMemorySaver()
    graph = support_graph(checkpointer=saver)
    adapter = LangGraphAgent(graph, version="2")
    assert adapter.graph is graph and (adapter.agent_name, adapter.agent_version) == (
        "support",
        "2",
    )
    session = await AgentSession.open(adapter, SessionInfo("t-1"))
    run = await session.send("Where is order F6?")
    assert run.llm_profile is not None and (run.llm_profile.driver, run.llm_profile.model) == (
        "fake",
        "planned-1",
    )
    state = await graph.aget_state({"configurable": {"thread_id": "evalport-t-1"}})
    assert [type(m).__name__ for m in state.values["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert state.values["messages"][-1].text == run.reply
    await session.close()


async def test_an_interrupt_outside_a_tool_is_an_approval_or_a_question_by_its_value() -> None:
    def confirm(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"name": "send_email", "arguments": '{"to": "a@b.c"}', "reason": "mail"})
        return {"messages": [AIMessage(json.dumps(answer))]}

    def plain(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("continue?")
        return {"messages": [AIMessage(f"plain: {answer}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("confirm", confirm)
    graph.add_node("plain", plain)
    graph.add_edge(START, "confirm")
    graph.add_edge("confirm", "plain")
    session = await AgentSession.open(LangGraphAgent(graph.compile()), SessionInfo("s"))
    run = await session.send("mail them")
    (pending,) = run.pending_approvals
    assert (pending.tool, pending.arguments, pending.reason) == (
        "send_email",
        {"to": "a@b.c"},
        "mail",
    )
    run = await session.decide({pending.call_id: ("reject", "no spam")})
    # a plain value is a question (an evalport interrupt), not an approval
    assert run.pending_approvals == []
    (asked,) = run.pending_interrupts
    assert (asked.kind, asked.payload) == ("interrupt", "continue?")
    run = await session.decide({asked.id: ApprovalDecision(decision="answer", answer="yes")})
    assert run.status == "completed" and run.reply == "plain: yes"
    assert run.tools == [] and run.steps[-1].output_messages[0].content == "plain: yes"
    assert [(i.kind, i.payload, i.answer) for i in run.interrupts] == [
        ("interrupt", "continue?", "yes")
    ]
    decided = [e for e in run.events if e.name == "approval.decided"]
    assert [(e.name, e.data["tool"], e.data["approved"], e.data["reason"]) for e in decided] == [
        ("approval.decided", "send_email", False, "no spam"),
    ]


def test_only_a_compiled_graph_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"compiled graph"):
        LangGraphAgent(StateGraph(MessagesState))  # type: ignore[arg-type]


class ChatState(TypedDict):
    chat: Annotated[list[Any], add_messages]


async def test_config_is_merged_and_messages_key_names_the_conversation() -> None:
    def answer(state: ChatState, config: RunnableConfig) -> dict[str, Any]:
        configurable = config["configurable"]
        text = f"{configurable['shop']} {configurable['thread_id']} {len(state['chat'])}"
        return {"chat": [AIMessage(text)]}

    graph = StateGraph(ChatState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    adapter = LangGraphAgent(
        graph.compile(), messages_key="chat", config={"configurable": {"shop": "north"}}
    )
    session = await AgentSession.open(adapter, SessionInfo("k"))
    assert (await session.send("hi")).reply == "north evalport-k 1"
    assert (await session.send("again")).reply == "north evalport-k 3"


@tool("refund")
def refund_plain(order_id: str) -> str:
    """Refund an order (the middleware asks a person first)."""
    return refund_result(order_id)


async def refund_approved_once(ctx: EvalContext) -> None:
    await ctx.send("Please refund order B7.")
    ctx.tool_was_approved("refund", {"order_id": "B7"})
    ctx.called_tool("refund", {"order_id": "B7"}, result=refund_result("B7"))
    ctx.contains(refund_result("B7"))


@pytest.mark.parametrize("mode", ["batched", "per_call"])
async def test_langchain_human_in_the_loop_middleware_over_http(mode: str) -> None:
    agents = pytest.importorskip("langchain.agents")
    middleware = pytest.importorskip("langchain.agents.middleware")

    def make() -> LangGraphAgent:
        agent = agents.create_agent(
            chat_model(plan),
            tools=[lookup, refund_plain],
            middleware=[
                middleware.HumanInTheLoopMiddleware(
                    interrupt_on={"refund": {"allowed_decisions": ["approve", "reject"]}},
                    interrupt_mode=mode,
                )
            ],
            name="support",
        )
        return LangGraphAgent(agent)

    async for target in http_target(make()):
        approved = await trial(target, refund_approved_once, approval_policy=APPROVE)
        passed(approved)
        rejected = await trial(target, refund_rejected, approval_policy=REJECT)
        passed(rejected)
        (refund_call,) = rejected.run["tools"]
        assert refund_call["tool_call"]["id"].startswith("call-")  # the model's own call id
        assert refund_call["approval"]["state"] == "rejected"


async def test_the_reply_streams_through_the_messages_stream_mode_as_it_is_written() -> None:
    listener = Listener()
    # the model goes on after its first chunk once the host has it
    model = chat_model(
        lambda users, results: "Your parcel left the depot.", listener.first_delta_told
    )

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    session = await AgentSession.open(LangGraphAgent(graph.compile()), SessionInfo("s"))
    run = await session.start("where is it?", listen=listener)
    assert run.status == "completed", run.errors
    listener.assert_streamed(run, ["Your ", "parcel ", "left ", "the ", "depot."])
    assert [step.type for step in run.steps] == ["final_response"]


async def test_a_streamed_tool_turn_records_its_tool_calls_as_before() -> None:
    session = await AgentSession.open(LangGraphAgent(support_graph()), SessionInfo("s"))
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
    assert all(tool.tool_call.id.startswith("call-") for tool in run.tools)  # the model's ids
    assert [step.type for step in run.steps] == ["tool_execution", "final_response"]
    usages = [step.usage for step in run.steps]
    assert [(u.input, u.output, u.cache_read, u.reasoning) for u in usages] == [
        tuple(CALL_STEP.values()),
        tuple(ANSWER_STEP.values()),
    ]
