"""A scripted LangGraph graph (a model node and a ``ToolNode``), served over AG-UI by
``ag-ui-langgraph`` as its docs serve one (a FastAPI app and
``add_langgraph_fastapi_endpoint``).

The chat model is a LangChain ``BaseChatModel`` that streams: "order" asks for
``lookup``, "what did I ask" answers with the earlier user messages, anything else is
greeted; after a tool's result it answers from that result. Each response reports
:data:`USAGE`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool

PATH = "/agent"
USAGE = {"input_tokens": 40, "output_tokens": 8, "total_tokens": 48}


@tool
def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"status": "shipped"}


class ScriptedChat(BaseChatModel):
    """The scripted model (see the module docstring)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(self, tools: Sequence[Any], **options: Any) -> Any:
        return self

    def _respond(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            status = json.loads(str(last.content)).get("status")
            return AIMessage(content=f"Order A1 is {status}.")
        asked = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        prompt = asked[-1] if asked else ""
        if "order" in prompt:
            call = {
                "name": "lookup",
                "args": {"order_id": "A1"},
                "id": f"call-{uuid.uuid4().hex[:8]}",
            }
            return AIMessage(content="", tool_calls=[call])
        if "what did I ask" in prompt:
            return AIMessage(content="You asked: " + " | ".join(asked[:-1]))
        return AIMessage(content="Hello there, how can I help?")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        message = self._respond(messages)
        message.usage_metadata = dict(USAGE)  # type: ignore[assignment]
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = self._respond(messages)
        if message.tool_calls:
            chunks = [
                AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        {
                            "name": call["name"],
                            "args": json.dumps(call["args"]),
                            "id": call["id"],
                            "index": index,
                        }
                        for index, call in enumerate(message.tool_calls)
                    ],
                )
            ]
        else:
            words = str(message.content).split(" ")
            chunks = [
                AIMessageChunk(content=word if i == len(words) - 1 else word + " ")
                for i, word in enumerate(words)
            ]
        chunks[-1].usage_metadata = dict(USAGE)  # type: ignore[assignment]
        for chunk in chunks:
            if run_manager is not None:
                await run_manager.on_llm_new_token(
                    str(chunk.content), chunk=ChatGenerationChunk(message=chunk)
                )
            yield ChatGenerationChunk(message=chunk)


def support_graph() -> Any:
    """A fresh compiled graph (its own checkpointer)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    model = ScriptedChat().bind_tools([lookup])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver(), name="support")


def agui_app() -> Any:
    """The graph's AG-UI endpoint at :data:`PATH`, as ag-ui-langgraph's docs write it."""
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="support", graph=support_graph()), PATH)
    return app


def confirming_graph() -> Any:
    """A graph whose one node asks the user through LangGraph's ``interrupt()`` before it
    answers (an interrupt that is no tool approval)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.types import interrupt

    def confirm(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"message": "Ship to the address on file?", "reason": "input_required"})
        return {"messages": [AIMessage(content=f"Shipping: {answer}.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("confirm", confirm)
    graph.add_edge(START, "confirm")
    return graph.compile(checkpointer=InMemorySaver(), name="confirming")


def confirming_app() -> Any:
    """:func:`confirming_graph` over AG-UI, its interrupts as ``RUN_FINISHED`` outcomes."""
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    agent = LangGraphAgent(name="confirming", graph=confirming_graph(), emit_interrupt_outcome=True)
    add_langgraph_fastapi_endpoint(app, agent, PATH)
    return app
