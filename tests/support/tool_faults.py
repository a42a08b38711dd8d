"""Helpers for the tool-fault tests: the real adapter behind httpx.ASGITransport."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.protocol import SessionInfo, as_factory
from evalport.server import EvalAdapter

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TOKEN = "faults-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


class CountingApp:
    """An ASGI app that counts the requests by (method, path) before passing them on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


async def skip_unless_sessions_carry_faults() -> None:
    """Skip while ``SessionManager.create`` does not pass ``request.faults`` into
    ``SessionInfo`` (server/sessions.py is edited elsewhere; the fault-injection report
    gives the change). Probed through the real adapter, not by reading its source."""
    seen: list[tuple[Any, ...]] = []

    def factory(info: SessionInfo) -> Any:
        seen.append(info.faults)
        from support_agent import agent

        return agent(info)

    adapter = EvalAdapter(as_factory(factory), token=None, faults=True)
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://probe.test") as http:
        body = {"faults": [{"tool": "order_status", "error": "probe"}]}
        created = await http.post("/evals/sessions", json=body)
    await adapter.aclose()
    assert created.status_code == 201, created.text
    if not (seen and seen[0]):
        pytest.skip(
            "server/sessions.py does not pass CreateSessionRequest.faults to SessionInfo yet"
        )
