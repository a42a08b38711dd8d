"""A deterministic agent for target tests, and a canonical form of runs to compare them.

The agent uses every part of the turn context that reaches the wire: model steps with
tool calls, tool executions with secret payloads, usage, events, approvals (a message
containing "refund" asks for one), stop signals, and failures (a message with "boom").
"""

from __future__ import annotations

from typing import Any

import msgspec
from evalport.protocol import AgentRun, ToolCall, Usage
from evalport.protocol.runtime import SessionInfo, TurnContext

SECRET = "SECRET-4111111111111111"

# Keys whose values are generated per run (ids) or per moment (timings).
ID_KEYS = frozenset(("id", "toolCallId", "callId", "errorId", "sessionId"))
TIME_KEYS = frozenset(("startedAt", "completedAt", "at", "requestedAt", "decidedAt", "duration"))


class SupportAgent:
    """A session factory (the class itself): one instance per session."""

    agent_name = "support-bot"
    agent_version = "2.3.1"

    def __init__(self, info: SessionInfo) -> None:
        self.info = info
        self.turns = 0

    async def turn(self, message: str, ctx: TurnContext) -> str:
        self.turns += 1
        arguments = {"order_id": "A1049", "card": SECRET}
        ctx.model_step(
            content="let me check",
            tool_calls=[ToolCall(name="lookup", arguments=arguments)],
            usage=Usage(input=100, output=12, cache_read=40),
        )
        with ctx.tool_execution("lookup", arguments) as run:
            run.result = {"status": "shipped", "paid_with": SECRET}
        ctx.event("looked_up", {"turn": self.turns})
        if "refund" in message:
            ctx.model_step(
                tool_calls=[ToolCall(name="refund", arguments={"amount": 30, "card": SECRET})],
                usage=Usage(input=20, output=4),
            )
            try:
                async with ctx.tool_execution(
                    "refund", {"amount": 30, "card": SECRET}, approval=True
                ) as run:
                    run.result = "refunded"
            except Exception:
                ctx.model_step(content="the refund was rejected", usage=Usage(input=5, output=5))
                return "refund rejected"
        if "boom" in message:
            raise ValueError(f"the warehouse API failed for {SECRET}")
        if "stop" in message:
            ctx.stop("user_requested", "the user asked to stop")
        ctx.model_step(content="answering", usage=Usage(input=30, output=8))
        return f"order A1049 is shipped ({message})"


def canonical(run: AgentRun) -> Any:
    """``run`` as builtins, with ids renamed by first appearance and timings blanked."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        if key in TIME_KEYS and value is not None:
            return "<time>"
        if key in ID_KEYS and isinstance(value, str) and value:
            return names.setdefault(value, f"<id{len(names)}>")
        return value

    return walk(msgspec.to_builtins(run))
