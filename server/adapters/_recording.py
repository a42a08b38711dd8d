"""What the framework adapters share: recording a framework's results into a turn context
the same way in every adapter (ARCHITECTURE.md, "Framework adapters").
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
from evalport.protocol import (
    AgentRun,
    Approval,
    ApprovalState,
    Step,
    StopReason,
    ToolExecution,
    compact_json,
)
from evalport.protocol._reported import arguments_of as arguments_of
from evalport.protocol._reported import step_usage as step_usage
from evalport.protocol.runtime import (
    FRAMEWORK_STATE,
    ApprovalRejected,
    ApprovalResult,
    TurnContext,
    utc_now,
)

DECIDED_EVENT = "approval.decided"


class ToolCallFailed(Exception):
    """A tool call that the framework reported as failed (its error text, no traceback)."""


class ApprovalAsk(NamedTuple):
    """One call waiting for a decision: its id, tool name, arguments and why it is gated."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    reason: str | None = None


def whole_reply(ctx: TurnContext, reply: str) -> str:
    """``reply``, sent as one text delta when the turn streamed nothing (its model
    answered whole)."""
    if reply and not ctx.streamed:
        ctx.text_delta(reply)
    return reply


def cannot_stream(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is a model's ``NotImplementedError`` for
    streaming."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, NotImplementedError):
            return True
        seen = seen.__cause__
    return False


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


def record_rejections(
    ctx: TurnContext, asks: Sequence[ApprovalAsk], decisions: Mapping[str, ApprovalResult]
) -> None:
    """Record each asked call its decision rejected, which the framework will not run."""
    for ask in asks:
        decision = decisions[ask.call_id]
        if not decision.approved:
            record_execution(ctx, ask.tool, ask.arguments, call_id=ask.call_id, decision=decision)


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
    error: str | BaseException | None = None,
    decision: ApprovalResult | None = None,
    started_at: str | None = None,
    replace: bool = False,
) -> ToolExecution:
    """Record a finished tool execution in the open step; returns it.

    ``error`` marks it failed (an exception is recorded with its own type and message,
    text as the framework's report); a rejecting ``decision`` records the rejection
    (``has_error`` with the approver's reason, no result), as gated tools of the turn
    context do. ``replace``: an execution of this turn with the same call id is dropped
    first (the framework ran the call again and kept this run).
    """
    if replace and call_id:
        _drop_execution(ctx, call_id)
    block = ctx.tool_execution(name, arguments, call_id=call_id)
    run = block.__enter__()
    failure: BaseException | None = None
    if decision is not None and not decision.approved:
        failure = ApprovalRejected(name, decision.reason)
    elif isinstance(error, BaseException):
        failure = error
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


def _turn_steps(ctx: TurnContext) -> list[Step]:
    return [step for step in ctx.run.steps if step.turn == ctx.turn]


def _drop_execution(ctx: TurnContext, call_id: str) -> None:
    for step in _turn_steps(ctx):
        step.tool_executions[:] = [
            execution for execution in step.tool_executions if execution.tool_call_id != call_id
        ]


def recorded_call_ids(ctx: TurnContext) -> set[str]:
    """The call ids this turn has recorded an execution for."""
    return {
        execution.tool_call_id
        for step in _turn_steps(ctx)
        for execution in step.tool_executions
        if execution.tool_call_id
    }


def finish_turn(ctx: TurnContext) -> None:
    """Put each step's executions of this turn in the order the model asked for the calls."""
    for step in _turn_steps(ctx):
        order = {call.id: index for index, call in enumerate(step.requested_tool_calls)}
        last = len(order)
        step.tool_executions.sort(key=lambda execution: order.get(execution.tool_call_id, last))


def steps_limit(ctx: TurnContext, error: BaseException) -> str:
    """End the turn as stopped by the framework's step limit; returns the (empty) reply."""
    ctx.stop(StopReason.STEPS_LIMIT, str(error) or type(error).__name__)
    return ""


def save_state(ctx: TurnContext, framework: str, state: Mapping[str, Any]) -> None:
    """Record what ``framework`` needs to continue the session on any replica."""
    ctx.event(FRAMEWORK_STATE, {"framework": framework, **state})


def saved_states(run: AgentRun, framework: str) -> list[dict[str, Any]]:
    """Every state ``framework`` saved in the session, oldest first."""
    return [
        event.data
        for event in run.events
        if event.name == FRAMEWORK_STATE
        and isinstance(event.data, dict)
        and event.data.get("framework") == framework
    ]


def unreadable_state(framework: str, error: BaseException) -> RuntimeError:
    """The error a turn fails with when the session's saved state could not be read back."""
    return RuntimeError(
        f"the session's saved {framework} state could not be read back on this replica "
        f"({type(error).__name__}: {error}); was it saved by another version of the "
        "framework or of evalport?"
    )
