"""A tiny Target over the real agent runtime (AgentSession), redacting with TracePolicy.

It stands in for LocalTarget in the context tests: same Session protocol, same runtime,
so suspensions and approvals behave as they do behind the real targets.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

from evalport.client import TargetIdentity, Turn
from evalport.protocol import AgentRun, ApprovalDecision, TracePolicy
from evalport.protocol.runtime import AgentSession, SessionInfo, TurnContext, tool


class FakeSession:
    def __init__(self, inner: AgentSession, policy: TracePolicy, log: list[str]) -> None:
        self._inner = inner
        self._policy = policy
        self._log = log
        self._run = policy.apply(inner.snapshot())

    @property
    def id(self) -> str:
        return self._inner.info.session_id

    @property
    def run(self) -> AgentRun:
        return self._run

    def _turn(self, message: str) -> Turn:
        self._run = self._policy.apply(self._inner.snapshot())
        index = self._run.turns
        return Turn(
            index=index, message=message, run=self._run, steps=self._run.steps_of_turn(index)
        )

    async def send(self, message: str) -> Turn:
        self._log.append(f"send {self.id} {message}")
        await self._inner.send(message)
        return self._turn(message)

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        self._log.append(
            f"decide {self.id} " + ",".join(f"{k}={v.decision}" for k, v in decisions.items())
        )
        await self._inner.decide(dict(decisions))
        return self._turn(self._run.user_messages[-1] if self._run.user_messages else "")

    async def refresh(self) -> AgentRun:
        self._run = self._policy.apply(self._inner.snapshot())
        return self._run

    async def close(self) -> None:
        self._log.append(f"close {self.id}")
        await self._inner.close()


class FakeTarget:
    def __init__(self, agent: Any, policy: TracePolicy | None = None) -> None:
        self.agent = agent
        self.policy = policy or TracePolicy.safe()
        self.sessions: dict[str, AgentSession] = {}
        self.log: list[str] = []
        self._ids = itertools.count(1)

    @property
    def identity(self) -> TargetIdentity:
        return TargetIdentity(kind="local", location="tests:fake")

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> FakeSession:
        session_id = f"s{next(self._ids)}"
        info = SessionInfo(session_id=session_id, case_id=case_id, description=description)
        inner = await AgentSession.open(self.agent, info)
        self.sessions[session_id] = inner
        self.log.append(f"open {session_id} {case_id}")
        return FakeSession(inner, self.policy, self.log)

    async def attach(self, session_id: str) -> FakeSession:
        if session_id not in self.sessions:
            raise LookupError(f"no session {session_id}")
        self.log.append(f"attach {session_id}")
        return FakeSession(self.sessions[session_id], self.policy, self.log)

    async def aclose(self) -> None:
        for session in self.sessions.values():
            await session.close()


# -- a small agent with gated tools ----------------------------------------------------


@tool
def lookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "total": 40 if order_id == "A1" else 400}


@tool(approval=lambda order_id, amount: amount > 100)
async def refund(order_id: str, amount: int) -> str:
    return f"refunded {amount} on {order_id}"


async def shop_agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    """Understands: 'hello', 'refund <id> <amount>', 'refund both', 'boom', 'slow', 'stop'."""
    ctx.usage(input=50, output=10)
    words = message.split()
    if message == "hello":
        ctx.event("greeted")
        return "Hello! How can I help?"
    if message == "boom":
        raise RuntimeError("the agent crashed")
    if message == "slow":
        await asyncio.sleep(5)
        return "late"
    if message == "stop":
        ctx.stop("steps_limit", "too many steps")
        return "I stop here."
    if message == "refund both":
        results = await asyncio.gather(
            _refund("A1", 150), _refund("B2", 300), return_exceptions=True
        )
        return "; ".join(str(r) for r in results)
    if words and words[0] == "refund" and len(words) == 3:
        lookup(words[1])
        return await _refund(words[1], int(words[2]))
    return f"You said: {message}"


async def _refund(order_id: str, amount: int) -> str:
    from evalport.protocol.runtime import ApprovalRejected

    try:
        return await refund(order_id, amount)
    except ApprovalRejected as rejected:
        return f"cannot refund {order_id}: {rejected.reason or 'rejected'}"
