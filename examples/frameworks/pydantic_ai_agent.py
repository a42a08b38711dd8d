"""A pydantic-ai support agent, served for evaluation with ``PydanticAIAgent``.

Serve it with a real model (any pydantic-ai model name)::

    EVALPORT_TOKEN=dev-token SUPPORT_MODEL=openai:gpt-4o-mini \\
        python examples/frameworks/pydantic_ai_agent.py

``SUPPORT_MODEL=test`` runs it offline on pydantic-ai's ``TestModel``. The refund tool
asks for approval (``requires_approval=True``): the turn suspends until the evaluation's
approval policy answers over the protocol.
"""

from __future__ import annotations

import os
from typing import Any

import shop
from evalport.server import EvalAdapter, ProtocolApp
from evalport.server.adapters import PydanticAIAgent
from pydantic_ai import Agent, ToolFailed


def build_agent(model: Any) -> Agent[None, str]:
    """The agent, on any pydantic-ai model (a name such as ``"openai:gpt-4o-mini"`` too)."""
    agent = Agent(model, name="shop-support", instructions=shop.INSTRUCTIONS)

    @agent.tool_plain
    def order_status(order_id: str) -> dict[str, Any]:
        """Where an order is."""
        try:
            return shop.order_status(order_id)
        except LookupError as error:
            raise ToolFailed(str(error)) from error

    @agent.tool_plain(requires_approval=True)
    def refund_order(order_id: str, amount: float) -> str:
        """Refund part or all of an order."""
        try:
            return shop.refund_order(order_id, amount)
        except (LookupError, ValueError) as error:
            raise ToolFailed(str(error)) from error

    return agent


def create_app(model: Any) -> ProtocolApp:
    agent = build_agent(model)
    return EvalAdapter(PydanticAIAgent(agent), token=os.environ["EVALPORT_TOKEN"]).app()


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(create_app(os.environ.get("SUPPORT_MODEL", "openai:gpt-4o-mini")), port=8000)
