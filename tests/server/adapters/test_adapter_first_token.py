"""Time to first token through each framework adapter: a scripted model writes its reply
in chunks with pauses between them, and an eval asserts that the first token came long
before the whole reply, over HTTP (a real uvicorn server, streamed turns) and in-process
(``LocalTarget``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")
pytest.importorskip("langgraph")

from adapterfakes import chat_model, streaming_scripted_model
from evalport.client import HttpTarget, LocalTarget, cases_from, eval_case, run_trial
from evalport.server import EvalAdapter
from evalport.server.adapters import LangGraphAgent, OpenAIAgentsAgent, PydanticAIAgent
from support.servers import running_server

REPLY = "Your parcel left the depot."
PAUSE = 0.25  # between two chunks: the whole reply takes four of them
FIRST_TOKEN_BUDGET = 0.5  # the first chunk comes at once; a wide margin for busy machines


async def pause() -> None:
    await asyncio.sleep(PAUSE)


def pydantic_ai_agent() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    async def write(messages: Any, info: Any) -> AsyncIterator[str]:
        for index, word in enumerate(REPLY.split(" ")):
            if index:
                await pause()
            yield word if index == 4 else word + " "

    return PydanticAIAgent(Agent(FunctionModel(stream_function=write)))


def openai_agents_agent() -> Any:
    from agents import Agent, RunConfig
    from agents.testing import assistant_message

    model = streaming_scripted_model([{"output": [assistant_message(REPLY)]}], pause=pause)
    agent = Agent(name="support", model=model)
    return OpenAIAgentsAgent(agent, run_config=RunConfig(tracing_disabled=True))


def langgraph_agent() -> Any:
    from langgraph.graph import START, MessagesState, StateGraph

    model = chat_model(lambda users, results: REPLY, pause)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    return LangGraphAgent(graph.compile())


FRAMEWORKS: dict[str, Callable[[], Any]] = {
    "pydantic-ai": pydantic_ai_agent,
    "openai-agents": openai_agents_agent,
    "langgraph": langgraph_agent,
}


@eval_case
async def first_token_case(ctx) -> None:
    turn = await ctx.send("Where is my parcel?")
    ctx.equals(REPLY)
    ctx.first_token_within(FIRST_TOKEN_BUDGET)
    assert turn.timing is not None and turn.timing.first_token is not None
    ctx.check("the reply went on after its first token", turn.timing.total >= 4 * PAUSE)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("where", ["http", "local"])
async def test_an_eval_asserts_time_to_first_token(framework: str, where: str) -> None:
    agent = FRAMEWORKS[framework]()
    case = cases_from(first_token_case)[0]
    if where == "local":
        async with LocalTarget(agent) as target:
            result = await run_trial(case, target)
    else:
        with running_server(EvalAdapter(agent, token=None).app()) as url:
            async with HttpTarget(url) as target:
                result = await run_trial(case, target)
                assert target.streamed_turns
    assert result.verdict == "passed", [(a.name, a.message) for a in result.assertions]
    (timing,) = result.timings
    assert timing.first_token is not None
    assert timing.first_token < FIRST_TOKEN_BUDGET <= 4 * PAUSE <= timing.total
