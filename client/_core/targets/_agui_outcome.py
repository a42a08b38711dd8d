"""What an AG-UI run's terminal event records on the run: its token usage and its
interrupts. Rules: see ARCHITECTURE.md, "An AG-UI run".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
from evalport.protocol import (
    AgentRun,
    LlmProfile,
    PendingApproval,
    PendingInterrupt,
    RunStatus,
    Step,
    Usage,
)
from evalport.protocol._reported import step_usage
from evalport.protocol.runtime import utc_now

if TYPE_CHECKING:
    from ag_ui.core import Interrupt, TokenUsage

NO_USAGE: Final = (
    "this AG-UI agent did not report token usage (its RUN_FINISHED or RUN_ERROR carried none)"
)


def record_usage(run: AgentRun, first_step: int, reported: list[TokenUsage] | None) -> None:
    """Add the terminal event's usage to the run's last step (of those from ``first_step``,
    this AG-UI run's), or mark the run's usage unreported."""
    if not reported:
        unreported = {} if run.unreported is msgspec.UNSET else run.unreported
        run.unreported = {**unreported, "usage": NO_USAGE}
        return
    total = Usage()
    for entry in reported:
        total = total + step_usage(
            entry.input_tokens,
            entry.output_tokens,
            cache_read=entry.cached_input_tokens,
            cache_write=entry.cache_write_input_tokens,
            reasoning=entry.reasoning_tokens,
        )
        if run.llm_profile is None and (entry.model or entry.provider):
            run.llm_profile = LlmProfile(driver=entry.provider, model=entry.model)
    steps = run.steps[first_step:]
    if steps:
        steps[-1].usage = steps[-1].usage + total


def record_interrupts(run: AgentRun, turn: int, interrupts: list[Interrupt]) -> dict[str, str]:
    """Record the run's interrupts as pending (turn ``turn``); returns the open ones (see
    :attr:`Conversation.open`)."""
    now = utc_now()
    run.status, run.reply = RunStatus.IN_PROGRESS, ""
    opened: dict[str, str] = {}
    for interrupt in interrupts:
        found = requested(run, turn, interrupt.tool_call_id) if interrupt.tool_call_id else None
        if found is not None:
            _, call = found
            opened[interrupt.id] = call.id or ""
            run.pending_approvals.append(
                PendingApproval(
                    call_id=call.id or "",
                    tool=call.name,
                    arguments=call.arguments,
                    turn=turn,
                    reason=interrupt.message,
                    requested_at=now,
                )
            )
            continue
        opened[interrupt.id] = ""
        payload = interrupt.model_dump(
            by_alias=True, include={"message", "response_schema", "metadata", "tool_call_id"}
        )
        run.pending_interrupts.append(
            PendingInterrupt(
                id=interrupt.id,
                kind=interrupt.reason,
                payload=payload,
                turn=turn,
                requested_at=now,
            )
        )
    return opened


def requested(run: AgentRun, turn: int, call_id: str) -> tuple[Step, Any] | None:
    """The step of turn ``turn`` that asked for call ``call_id``, and the call."""
    for step in reversed(run.steps):
        if step.turn != turn:
            break
        for call in step.requested_tool_calls:
            if call.id == call_id:
                return step, call
    return None
