"""A scripted pydantic-ai agent, served over AG-UI as pydantic-ai's docs serve one, and
the verdicts both targets give for it.

The model is a ``FunctionModel`` (streamed, as every AG-UI run is) that reads the
conversation it is sent: "order" asks for ``lookup``, "refund" for ``refund`` (which
needs approval), "boom" raises, "what did I ask" answers with the earlier user messages
(so the second turn sees the first only if the client sent the history), anything else
is greeted. After a tool's result it answers from that result.

:func:`agui_app` is the AG-UI endpoint, a Starlette route calling
``AGUIAdapter.dispatch_request``; :func:`verdicts` evaluates one battery of assertions on
a run, for comparing an AG-UI target with evalport's own adapter on the same agent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from evalport.client.assertions import (
    CalledTool,
    Contains,
    Failed,
    MaxSteps,
    MaxToolCalls,
    NoFailedActions,
    NotCalledTool,
    StepCount,
    Succeeded,
    ToolOrder,
    ToolWasApproved,
    ToolWasRejected,
    TotalTokensAtMost,
    UsedNoTools,
)
from evalport.protocol import AgentRun

PATH = "/agent"


def _last_prompt(messages: list[Any]) -> str:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    return str(part.content)
    return ""


def _prompts(messages: list[Any]) -> list[str]:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def respond(messages: list[Any], info: Any) -> Any:
    """The scripted model (see the module docstring)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    last = messages[-1]
    returns = [
        part
        for part in (last.parts if isinstance(last, ModelRequest) else ())
        if isinstance(part, ToolReturnPart)
    ]
    if returns:
        done = returns[-1]
        if done.tool_name == "lookup":
            return ModelResponse(parts=[TextPart(f"Order A1 is {done.content['status']}.")])
        return ModelResponse(parts=[TextPart(f"Refund: {done.content}")])
    prompt = _last_prompt(messages)
    if "boom" in prompt:
        raise ValueError("the model provider failed")
    if "refund" in prompt:
        return ModelResponse(parts=[ToolCallPart("refund", {"amount": 30})])
    if "order" in prompt:
        return ModelResponse(parts=[ToolCallPart("lookup", {"order_id": "A1"})])
    if "what did I ask" in prompt:
        return ModelResponse(parts=[TextPart("You asked: " + " | ".join(_prompts(messages)[:-1]))])
    return ModelResponse(parts=[TextPart("Hello there, how can I help?")])


async def stream(messages: list[Any], info: Any) -> AsyncIterator[Any]:
    """:func:`respond`, streamed: text word by word, tool calls whole."""
    from pydantic_ai.messages import TextPart
    from pydantic_ai.models.function import DeltaToolCall

    response = respond(messages, info)
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            for word in part.content.split(" "):
                yield word + " "
        else:
            yield {
                index: DeltaToolCall(
                    name=part.tool_name, json_args=json.dumps(part.args), tool_call_id=None
                )
            }


def support_agent() -> Any:
    """A fresh pydantic-ai agent over the scripted model, with its two tools."""
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.models.function import FunctionModel

    agent = Agent(
        FunctionModel(respond, stream_function=stream),
        output_type=[str, DeferredToolRequests],
        name="support",
    )

    @agent.tool_plain
    def lookup(order_id: str) -> dict[str, str]:
        """Look an order up."""
        return {"status": "shipped"}

    @agent.tool_plain(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund an amount."""
        return f"refunded {amount}"

    return agent


def agui_app(agent: Any, *, include_usage: bool = True) -> Any:
    """The agent's AG-UI endpoint at :data:`PATH`, as pydantic-ai's AG-UI docs write it
    (a Starlette route that hands the request to ``AGUIAdapter.dispatch_request``)."""
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def run_agent(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent, include_usage=include_usage)

    return Starlette(routes=[Route(PATH, run_agent, methods=["POST"])])


BATTERY = (
    Succeeded(),
    Failed(),
    Contains("shipped"),
    Contains("You asked: where is my order"),
    CalledTool("lookup"),
    CalledTool("lookup", {"order_id": "A1"}),
    CalledTool("lookup", result={"status": "shipped"}),
    CalledTool("refund", {"amount": 30}),
    NotCalledTool("refund"),
    UsedNoTools(),
    MaxToolCalls(1),
    MaxSteps(1),
    MaxSteps(2),
    StepCount(2),
    ToolOrder(["lookup"]),
    ToolWasApproved("refund"),
    ToolWasRejected("refund"),
    NoFailedActions(),
    TotalTokensAtMost(10_000),
    TotalTokensAtMost(1),
)


def verdicts(run: AgentRun, *, usage: bool = True) -> list[tuple[str, bool, bool]]:
    """Each assertion of :data:`BATTERY` on ``run``: its name, whether it passed, whether
    it was evaluated (``usage=False``: the token budgets left out)."""
    chosen = [item for item in BATTERY if usage or not isinstance(item, TotalTokensAtMost)]
    results = [assertion.evaluate(run) for assertion in chosen]
    return [(result.name, result.passed, result.evaluated) for result in results]
