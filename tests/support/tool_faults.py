"""Helpers for the tool-fault tests: the real adapter behind httpx.ASGITransport."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
