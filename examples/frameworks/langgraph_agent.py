"""A LangGraph support agent, served for evaluation with ``LangGraphAgent``.

The graph is the classic tool loop: a chat model node, a ``ToolNode`` and
``tools_condition`` between them. Serve it with a real chat model (needs
``langchain-openai`` and ``OPENAI_API_KEY``)::

    EVALPORT_TOKEN=dev-token python examples/frameworks/langgraph_agent.py

The refund tool calls ``interrupt()``: the graph pauses, the turn suspends until the
evaluation's approval policy answers over the protocol, and ``interrupt()`` returns the
decision (``{"approved": bool, "reason": str | None}``) to the tool.
"""

from __future__ import annotations

import os
from typing import Any

import shop
from evalport.server import EvalAdapter, ProtocolApp
from evalport.server.adapters import LangGraphAgent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt


@tool
def order_status(order_id: str) -> dict[str, Any]:
    """Where an order is."""
    return shop.order_status(order_id)


@tool
def refund_order(order_id: str, amount: float) -> str:
    """Refund part or all of an order (a person approves first)."""
    decision = interrupt({"tool": "refund_order", "args": {"order_id": order_id, "amount": amount}})
    if not decision["approved"]:
        return f"refund rejected: {decision['reason'] or 'no reason given'}"
    return shop.refund_order(order_id, amount)


def build_graph(model: BaseChatModel) -> Any:
    """The compiled graph around any LangChain chat model that supports tool calling."""
    tools = [order_status, refund_order]
    bound = model.bind_tools(tools)

    async def assistant(state: MessagesState) -> dict[str, Any]:
        messages = [SystemMessage(shop.INSTRUCTIONS), *state["messages"]]
        return {"messages": [await bound.ainvoke(messages)]}

    graph = StateGraph(MessagesState)
    graph.add_node("assistant", assistant)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    graph.add_edge(START, "assistant")
    graph.add_conditional_edges("assistant", tools_condition)
    graph.add_edge("tools", "assistant")
    return graph.compile(name="shop-support")


def create_app(model: BaseChatModel) -> ProtocolApp:
    graph = build_graph(model)
    return EvalAdapter(LangGraphAgent(graph), token=os.environ["EVALPORT_TOKEN"]).app()


if __name__ == "__main__":
    import uvicorn
    from langchain_openai import ChatOpenAI  # pip install langchain-openai

    uvicorn.run(create_app(ChatOpenAI(model="gpt-4o-mini")), port=8000)
