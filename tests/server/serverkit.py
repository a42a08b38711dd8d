"""Shared pieces of the server tests (imported as ``serverkit``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from evalport.protocol import Message
from evalport.protocol.runtime import TurnContext, tool
from evalport.server import EvalAdapter

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped"}


async def echo_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    """Looks an order up, fails on 'boom', counts the session's turns."""
    lookup_order(message)
    if message == "boom":
        raise ValueError("the warehouse API is down")
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return f"{message} #{ctx.state['n']}"


async def open_session(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/evals/sessions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


Build = Callable[..., tuple[EvalAdapter, httpx.AsyncClient]]
"""The ``build`` fixture: ``build(agent, headers=..., prefix=..., **adapter_options)``."""
