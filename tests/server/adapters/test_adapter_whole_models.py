"""A framework agent whose model cannot stream keeps working: the turn is answered whole,
and the reply reaches a streamed request as one text delta (each adapter, with such a
model of its framework)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")
pytest.importorskip("langgraph")

from evalport.protocol import TextDelta
from evalport.protocol.runtime import AgentSession, SessionInfo
from evalport.server.adapters import LangGraphAgent, OpenAIAgentsAgent, PydanticAIAgent

REPLY = "Your parcel left the depot."


def openai_agents_agent() -> Any:
    """An Agents SDK ``Model`` that answers whole and raises on ``stream_response``, as
    scripted and custom models often do."""
    from agents import Agent, RunConfig
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.testing import assistant_message
    from agents.usage import Usage

    class WholeModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[assistant_message(REPLY)], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("this model does not stream")

    agent = Agent(name="support", model=WholeModel())
    return OpenAIAgentsAgent(agent, run_config=RunConfig(tracing_disabled=True))


def pydantic_ai_agent() -> Any:
    """A ``FunctionModel`` without a ``stream_function``."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    def answer(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(REPLY)])

    return PydanticAIAgent(Agent(FunctionModel(answer)))


def pydantic_ai_raising_agent() -> Any:
    """A model whose streaming raises ``NotImplementedError`` (it claims to stream)."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    def answer(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(REPLY)])

    async def cannot(messages: Any, info: Any) -> Any:
        raise NotImplementedError("this model does not stream")
        yield  # an async generator

    return PydanticAIAgent(Agent(FunctionModel(answer, stream_function=cannot)))


def langgraph_agent() -> Any:
    """A chat model whose ``_astream`` raises: it answers only through ``_generate``."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.graph import START, MessagesState, StateGraph

    class WholeChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "whole-fake"

        def _generate(self, messages: Any, stop: Any = None, *args: Any, **kw: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(REPLY))])

        async def _astream(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("this model does not stream")
            yield  # an async generator

    model = WholeChatModel()

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    return LangGraphAgent(graph.compile())


@pytest.mark.parametrize(
    "make",
    [openai_agents_agent, pydantic_ai_agent, pydantic_ai_raising_agent, langgraph_agent],
    ids=lambda f: f.__name__,
)
async def test_a_model_that_cannot_stream_answers_whole_as_one_delta(make: Any) -> None:
    session = await AgentSession.open(make(), SessionInfo("whole"))
    for number in (1, 2):  # the second turn too: the fallback is not a one-off
        events: list[Any] = []
        run = await session.start("Where is my parcel?", listen=events.append)
        assert run.status == "completed", run.error_details
        assert run.reply == REPLY
        deltas = [event.text for event in events if isinstance(event, TextDelta)]
        assert deltas == [REPLY], number
    await session.close()
