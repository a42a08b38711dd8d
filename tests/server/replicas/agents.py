"""Agents that the replica and fault tests serve with ``evalport serve`` (as a file target).

``agent`` is a session factory whose handler keeps a turn counter in memory and rebuilds it
in ``restore(history, run)``; every reply names the replica (``$REPLICA``) and the count.
Messages steer it: ``slow:SECONDS`` (or ``slow:SECONDS:ANYTHING``) sleeps first, ``approve`` suspends on an approval, ``ask`` on an interrupt,
``crash`` kills the server process mid-turn. When ``$EFFECTS`` names a file, each turn
appends ``session<TAB>message`` to it before anything else: the tests count how often
the agent really ran.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from evalport.protocol import AgentRun, Message
from evalport.protocol.runtime import SessionInfo, TurnContext

REPLICA = os.environ.get("REPLICA", "?")


def _effect(session_id: str, message: str) -> None:
    path = os.environ.get("EFFECTS")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{session_id}\t{message}\n".encode())
        finally:
            os.close(fd)


class Counter:
    def __init__(self, info: SessionInfo) -> None:
        self.session_id = info.session_id
        self.turns = 0
        self.restored = False

    def restore(self, history: list[Message], run: AgentRun) -> None:
        self.turns = sum(1 for message in history if message.role == "user")
        self.restored = True

    async def turn(self, message: str, ctx: TurnContext) -> str:
        _effect(self.session_id, message)
        self.turns += 1
        if message.startswith("slow:"):
            await asyncio.sleep(float(message.split(":")[1]))
        elif message == "approve":
            decision = await ctx.request_approval("refund", {"order": "A1"})
            return f"approved={decision.approved} #{self.turns} on {REPLICA}"
        elif message == "ask":
            size = await ctx.interrupt("choice", {"options": ["S", "M"]})
            return f"size={size} #{self.turns} on {REPLICA}"
        elif message == "crash":
            os._exit(17)
        restored = " restored" if self.restored else ""
        return f"{message} #{self.turns} on {REPLICA}{restored} history={len(ctx.history)}"


agent: Any = Counter
