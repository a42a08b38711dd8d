"""Time to first token through each framework adapter, proved by cause: a scripted model
writes the first chunk of its reply and then waits at a gate that only the client's clock
opens, when it has recorded the first token. The rest of the reply is written after that,
so the reply cannot be whole before the client saw its first token; an eval then asserts
that the first token came by the moment the agent was let go on, and that the turn ended
after it. Over HTTP (a real uvicorn server, streamed turns) and in-process
(``LocalTarget``). No duration is assumed anywhere: the test passes beside busy CPUs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")
pytest.importorskip("langgraph")

from adapterfakes import chat_model, streaming_scripted_model
from evalport.client import HttpTarget, LocalTarget, cases_from, eval_case, run_trial
from evalport.client._core._turns import TurnClock
from evalport.server import EvalAdapter
from evalport.server.adapters import LangGraphAgent, OpenAIAgentsAgent, PydanticAIAgent
from support.servers import running_server

REPLY = "Your parcel left the depot."
STUCK = 60.0
"""Not a margin: how long a held agent waits for a first token the client never sees
(an adapter that buffers its reply) before it goes on, so such a test fails instead of
hanging."""


class FirstTokenGate:
    """Holds an agent after the first chunk of its reply until the client's clock (a
    :class:`TurnClock` of the turn) has recorded the first token. The agent waits in a
    worker thread, so the gate works in the test's loop (``LocalTarget``) and in the
    server's thread (HTTP) alike."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.reached = False  # the agent came to the gate with the rest of its reply unwritten
        self.went_on_unobserved = False  # it gave up waiting: no first token reached the client
        self.released_at: float | None = None  # by the turn's clock, once it held a first token

    def seen(self, clock: TurnClock) -> None:
        """The client's clock saw an event: open the gate once it holds a first token."""
        if clock.first_token is not None and not self.opened.is_set():
            self.released_at = time.perf_counter() - clock.sent
            self.opened.set()

    async def hold(self) -> None:
        """The model's pause between two chunks: the first waits for the gate (open
        already when the client saw the first chunk before the model came here)."""
        self.reached = True
        if not await asyncio.to_thread(self.opened.wait, STUCK):
            self.went_on_unobserved = True


def pydantic_ai_agent(gate: FirstTokenGate) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    async def write(messages: Any, info: Any) -> AsyncIterator[str]:
        for index, word in enumerate(REPLY.split(" ")):
            if index:
                await gate.hold()
            yield word if index == 4 else word + " "

    return PydanticAIAgent(Agent(FunctionModel(stream_function=write)))


def openai_agents_agent(gate: FirstTokenGate) -> Any:
    from agents import Agent, RunConfig
    from agents.testing import assistant_message

    model = streaming_scripted_model([{"output": [assistant_message(REPLY)]}], pause=gate.hold)
    agent = Agent(name="support", model=model)
    return OpenAIAgentsAgent(agent, run_config=RunConfig(tracing_disabled=True))


def langgraph_agent(gate: FirstTokenGate) -> Any:
    from langgraph.graph import START, MessagesState, StateGraph

    model = chat_model(lambda users, results: REPLY, gate.hold)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    return LangGraphAgent(graph.compile())


FRAMEWORKS: dict[str, Callable[[FirstTokenGate], Any]] = {
    "pydantic-ai": pydantic_ai_agent,
    "openai-agents": openai_agents_agent,
    "langgraph": langgraph_agent,
}


def case_for(gate: FirstTokenGate) -> Any:
    """The eval, reading when ``gate`` let the agent go on."""

    @eval_case
    async def first_token_case(ctx) -> None:
        turn = await ctx.send("Where is my parcel?")
        ctx.equals(REPLY)
        assert gate.released_at is not None, "the client never saw a first token"
        # the first token came by the moment the agent was let go on to write the rest
        ctx.first_token_within(gate.released_at)
        assert turn.timing is not None and turn.timing.first_token is not None
        ctx.check(
            "the reply was whole only after the agent was let go on",
            gate.released_at < turn.timing.total,
        )

    return cases_from(first_token_case)[0]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("where", ["http", "local"])
async def test_an_eval_asserts_time_to_first_token(
    framework: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = FirstTokenGate()
    seen = TurnClock.seen

    def seen_and_open(clock: TurnClock, name: str) -> None:
        seen(clock, name)
        gate.seen(clock)

    monkeypatch.setattr(TurnClock, "seen", seen_and_open)
    agent = FRAMEWORKS[framework](gate)
    case = case_for(gate)
    try:
        if where == "local":
            async with LocalTarget(agent) as target:
                result = await run_trial(case, target)
        else:
            with running_server(EvalAdapter(agent, token=None).app()) as url:
                async with HttpTarget(url) as target:
                    result = await run_trial(case, target)
                    assert target.streamed_turns
    finally:
        gate.opened.set()  # a held agent never outlives the test
    assert gate.reached, "the model never paused after its first chunk"
    assert not gate.went_on_unobserved, "the first token did not reach the client while held"
    assert result.verdict == "passed", (
        result.error,
        [(a.name, a.message) for a in result.assertions],
    )
    (timing,) = result.timings
    assert timing.first_token is not None and gate.released_at is not None
    assert timing.first_token <= gate.released_at < timing.total
