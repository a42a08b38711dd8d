"""What the framework adapters share: recording framework results into a turn context.

Rules:

- A tool execution the framework already finished is recorded in one go with
  :func:`record_execution`: its result, or its error (``has_error`` with the framework's
  text), or a rejection (recorded exactly as the turn context records one of its own).
- Approvals: :func:`ask_all` asks every pending call at once, so the turn suspends once
  and the approver answers them together; the decisions come back keyed by call id, and
  each is also an ``approval.decided`` event (``callId``, ``tool``, ``approved``,
  ``reason``), so a decision that gated no tool execution still shows in the run.
- A reply that is not text is sent as compact JSON (the framework's structured output).
- Token counts: the frameworks count inclusively (input includes cache reads and writes,
  output includes reasoning); a step's :class:`~evalport.protocol.Usage` is disjoint, as
  Instructor adds it up, so :func:`step_usage` subtracts the parts from their totals.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
from evalport.protocol import Approval, ApprovalState, ToolExecution, Usage, compact_json
from evalport.protocol.runtime import ApprovalRejected, ApprovalResult, TurnContext, utc_now

DECIDED_EVENT = "approval.decided"


class ToolCallFailed(Exception):
    """A tool call that the framework reported as failed (its error text, no traceback)."""


class ApprovalAsk(NamedTuple):
    """One call waiting for a decision: its id, tool name, arguments and why it is gated."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    reason: str | None = None


def arguments_of(value: Any) -> dict[str, Any]:
    """Tool arguments as a dict: JSON text is parsed, a non-object is kept under ``value``."""
    if value is None or value == "":
        return {}
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError:
            return {"value": value if isinstance(value, str) else value.decode(errors="replace")}
    if isinstance(value, Mapping):
        return dict(value)
    return {"value": value}


def step_usage(
    input: int | None,
    output: int | None,
    *,
    cache_read: int | None = 0,
    cache_write: int | None = 0,
    reasoning: int | None = 0,
) -> Usage:
    """A step's disjoint usage from inclusive framework counts (``None`` counts as 0)."""
    read, write, thought = cache_read or 0, cache_write or 0, reasoning or 0
    return Usage(
        input=max((input or 0) - read - write, 0),
        output=max((output or 0) - thought, 0),
        cache_read=read,
        cache_write=write,
        reasoning=thought,
    )


def reply_text(output: Any) -> str:
    """The turn's reply: text as it is, anything else as compact JSON."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    try:
        return compact_json(output).decode()
    except (TypeError, ValueError, msgspec.EncodeError):
        return str(output)


async def ask_all(ctx: TurnContext, asks: Sequence[ApprovalAsk]) -> dict[str, ApprovalResult]:
    """Request every approval at once (one suspension); returns the decisions by call id."""
    decisions = await asyncio.gather(
        *(
            ctx.request_approval(ask.tool, ask.arguments, call_id=ask.call_id, reason=ask.reason)
            for ask in asks
        )
    )
    for ask, decision in zip(asks, decisions, strict=True):
        ctx.event(
            DECIDED_EVENT,
            {
                "callId": ask.call_id,
                "tool": ask.tool,
                "approved": decision.approved,
                "reason": decision.reason,
            },
        )
    return {ask.call_id: decision for ask, decision in zip(asks, decisions, strict=True)}


def mark_decision(execution: ToolExecution, decision: ApprovalResult | None) -> None:
    """Put an approver's decision on the execution of the call it gated."""
    if decision is None:
        return
    state = ApprovalState.APPROVED if decision.approved else ApprovalState.REJECTED
    execution.approval = Approval(state=state, reason=decision.reason, decided_at=utc_now())


def record_execution(
    ctx: TurnContext,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    call_id: str | None,
    result: Any = None,
    error: str | None = None,
    decision: ApprovalResult | None = None,
    started_at: str | None = None,
) -> ToolExecution:
    """Record a finished tool execution in the open step; returns it.

    ``error`` marks it failed with that text; a rejecting ``decision`` records the
    rejection (``has_error`` with the approver's reason), as gated tools of the turn
    context do.
    """
    block = ctx.tool_execution(name, arguments, call_id=call_id)
    run = block.__enter__()
    failure: BaseException | None = None
    if decision is not None and not decision.approved:
        failure = ApprovalRejected(name, decision.reason)
    elif error is not None:
        failure = ToolCallFailed(error)
    else:
        run.result = result
    block.__exit__(None if failure is None else type(failure), failure, None)
    execution = run.execution
    if started_at is not None:
        execution.started_at = started_at
    mark_decision(execution, decision)
    return execution
