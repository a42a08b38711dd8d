"""Framework agents that tests serve with ``evalport serve FILE:NAME`` (real subprocesses).

One conversation for every framework, on its own offline test double (``adapterfakes``):
``my name is X`` is remembered, ``what is my name?`` answers from the history the model
was sent (``you are X (N messages)``: N counts the user messages it saw), and ``refund
order X`` calls the gated ``refund`` tool. The Agents SDK agent is a triage agent that
hands a refund off to ``billing``, whose answers start with ``billing:``.

- ``*_raw``: the framework's own object, unwrapped (``evalport serve`` wraps it itself);
- ``pydantic_ai_agent``, ``openai_agents_agent``: wrapped in their adapters;
- ``langgraph_agent``: an async factory, made inside the server's loop.

Imports of the frameworks happen when a name is built, so one file serves them all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from adapterfakes import chat_model, function_model, scripted_model
from adapterkit import Call

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

_ORDER = re.compile(r"\b([A-Z]\d+)\b")


def conversation(users: Sequence[str], results: Sequence[tuple[str, str]]) -> list[Call] | str:
    results = [(name, text) for name, text in results if not name.startswith("transfer_to_")]
    if results:
        return "; ".join(f"{name} -> {text}" for name, text in results)
    last = users[-1].lower() if users else ""
    if "refund" in last:
        orders = _ORDER.findall(users[-1])
        return [Call("refund", {"order_id": orders[-1] if orders else "?"})]
    names = [text.split("my name is ", 1)[1] for text in users if "my name is " in text]
    known = f"you are {names[-1]}" if names else "I don't know your name"
    return f"{known} ({len(users)} messages)"


def refunded(order_id: str) -> str:
    return f"refunded {order_id}"


def build_pydantic_ai() -> Any:
    from pydantic_ai import Agent

    agent = Agent(function_model(conversation), name="pydantic-support")

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order (a person approves)."""
        return refunded(order_id)

    return agent


def build_openai_agents() -> Any:
    from agents import Agent, function_tool

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order (a person approves)."""
        return refunded(order_id)

    def billing_plan(users: Sequence[str], results: Sequence[tuple[str, str]]) -> Any:
        action = conversation(users, results)
        return f"billing: {action}" if isinstance(action, str) else action

    def triage_plan(users: Sequence[str], results: Sequence[tuple[str, str]]) -> Any:
        if users and "refund" in users[-1].lower() and not results:
            return [Call("transfer_to_billing", {})]
        return conversation(users, results)

    billing = Agent(name="billing", model=scripted_model(billing_plan, 100), tools=[refund])
    return Agent(name="triage", model=scripted_model(triage_plan, 100), handoffs=[billing])


def build_langgraph() -> Any:
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.types import interrupt

    @tool
    def refund(order_id: str) -> str:
        """Refund an order (a person approves)."""
        decision = interrupt({"tool": "refund", "args": {"order_id": order_id}})
        return refunded(order_id) if decision["approved"] else "not refunded"

    model = chat_model(conversation).bind_tools([refund])

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([refund], handle_tool_errors=True))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name="langgraph-support")


def __getattr__(name: str) -> Any:
    if name == "pydantic_ai_raw":
        return build_pydantic_ai()
    if name == "openai_agents_raw":
        return build_openai_agents()
    if name == "langgraph_raw":
        return build_langgraph()
    if name == "pydantic_ai_agent":
        from evalport.server.adapters import PydanticAIAgent

        return PydanticAIAgent(build_pydantic_ai())
    if name == "openai_agents_agent":
        from evalport.server.adapters import OpenAIAgentsAgent

        return OpenAIAgentsAgent(build_openai_agents())
    raise AttributeError(name)


async def langgraph_agent() -> Any:
    """An async factory: ``evalport serve`` awaits it inside its loop at start-up."""
    import asyncio

    from evalport.server.adapters import LangGraphAgent

    asyncio.get_running_loop()  # raises outside a running loop, as async resources do
    return LangGraphAgent(build_langgraph())
