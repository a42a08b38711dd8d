"""Hand-built runs for the assertion tests (verbatim, and redacted by TracePolicy.safe())."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from evalport.protocol import (
    AgentRun,
    Approval,
    Event,
    Message,
    PendingApproval,
    Step,
    StopSignal,
    ToolCall,
    ToolExecution,
    TracePolicy,
    Usage,
)


def call(
    name: str,
    args: dict[str, Any] | None = None,
    result: Any = None,
    *,
    error: Any = None,
    approval: str | None = None,
    reason: str | None = None,
    turn: int = 1,
) -> dict[str, Any]:
    return {
        "name": name,
        "args": args or {},
        "result": result,
        "error": error,
        "approval": approval,
        "reason": reason,
        "turn": turn,
    }


def make_run(
    calls: Sequence[dict[str, Any]] = (),
    *,
    reply: str = "All done.",
    status: str = "completed",
    usage: Usage | None = None,
    events: Iterable[str | tuple[str, Any]] = (),
    stop: str | None = "completed",
    pending: Sequence[tuple[str, str, dict[str, Any]]] = (),
    user_messages: Sequence[str] = ("hello",),
) -> AgentRun:
    step_usage = usage or Usage(input=100, output=20)
    steps: list[Step] = []
    for index, spec in enumerate(calls):
        call_id = f"call_{index}"
        approval = (
            Approval(state=spec["approval"], reason=spec["reason"]) if spec["approval"] else None
        )
        execution = ToolExecution(
            id=str(uuid.UUID(int=index + 1)),
            name=spec["name"],
            tool_call_id=call_id,
            arguments=spec["args"],
            result=spec["result"],
            error=spec["error"],
            has_error=spec["error"] is not None,
            approval=approval,
        )
        steps.append(
            Step(
                id=str(uuid.UUID(int=1000 + index)),
                turn=spec["turn"],
                index=index,
                type="tool_execution",
                requested_tool_calls=[
                    ToolCall(id=call_id, name=spec["name"], arguments=spec["args"])
                ],
                tool_executions=[execution],
                finish_reason="tool_calls",
                usage=step_usage,
            )
        )
    steps.append(
        Step(
            id=str(uuid.UUID(int=9999)),
            turn=max((spec["turn"] for spec in calls), default=1),
            index=len(steps),
            type="final_response",
            output_messages=[Message(role="assistant", content=reply)],
            finish_reason="stop",
            usage=step_usage,
        )
    )
    run = AgentRun(
        reply=reply,
        status=status,
        turns=len(user_messages),
        steps=steps,
        stop_signal=StopSignal(reason=stop) if stop else None,
        user_messages=list(user_messages),
        events=[
            Event(name=e, turn=1) if isinstance(e, str) else Event(name=e[0], turn=1, data=e[1])
            for e in events
        ],
        pending_approvals=[
            PendingApproval(call_id=cid, tool=tool, arguments=args, turn=1)
            for cid, tool, args in pending
        ],
    )
    run.sync_tools()
    run.sync_usage()
    return run


def redacted(run: AgentRun) -> AgentRun:
    return TracePolicy.safe().apply(run)


def both(run: AgentRun) -> list[AgentRun]:
    """The run verbatim and redacted (parametrise tests over both)."""
    return [run, redacted(run)]
