"""An OpenAI Agents SDK support agent, served for evaluation with ``OpenAIAgentsAgent``.

Serve it with a real model (needs ``OPENAI_API_KEY``)::

    EVALPORT_TOKEN=dev-token SUPPORT_MODEL=gpt-4o-mini \\
        python examples/frameworks/openai_agents_agent.py

The refund tool needs approval (``needs_approval=True``): the run stops with an
interruption, the turn suspends until the evaluation's approval policy answers over the
protocol, and the run resumes from its ``RunState``.
"""

from __future__ import annotations

import os
from typing import Any

import shop
from agents import Agent, Model, function_tool
from evalport.server import EvalAdapter, ProtocolApp
from evalport.server.adapters import OpenAIAgentsAgent


@function_tool
def order_status(order_id: str) -> dict[str, Any]:
    """Where an order is."""
    return shop.order_status(order_id)


@function_tool(needs_approval=True)
def refund_order(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    return shop.refund_order(order_id, amount)


def build_agent(model: str | Model) -> Agent[Any]:
    """The agent, on a model name or any Agents SDK ``Model``."""
    return Agent(
        name="shop-support",
        instructions=shop.INSTRUCTIONS,
        model=model,
        tools=[order_status, refund_order],
    )


def create_app(model: str | Model) -> ProtocolApp:
    agent = build_agent(model)
    return EvalAdapter(OpenAIAgentsAgent(agent), token=os.environ["EVALPORT_TOKEN"]).app()


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(create_app(os.environ.get("SUPPORT_MODEL", "gpt-4o-mini")), port=8000)
