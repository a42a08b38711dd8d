"""A turn's outcome written into the session's run: completed, failed or timed out.

Never a traceback in the run. Rules: see ARCHITECTURE.md,
"The agent runtime: sessions and turns".
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from .._models import ErrorInfo, Message, RunStatus, StopReason, StopSignal, Usage
from ._context import TurnContext
from ._control import TurnControl
from ._stamps import error_info

logger = logging.getLogger("evalport.agent")
details_logger = logging.getLogger("evalport.agent.details")


def complete(ctx: TurnContext, history: list[Message], reply: str, usage_before: Usage) -> None:
    """Record ``reply`` as the turn's completion."""
    run = ctx.run
    TurnControl(ctx).final_step(reply)
    run.reply = reply
    run.stop_signal = ctx.stop_signal or StopSignal(reason=StopReason.COMPLETED, source="runtime")
    run.status = RunStatus.STOPPED if ctx.stop_signal is not None else RunStatus.COMPLETED
    history.append(Message(role="user", content=ctx.message))
    history.append(Message(role="assistant", content=reply))
    run.sync_turn(usage_before)


def fail(ctx: TurnContext, history: list[Message], info: Any, usage_before: Usage) -> None:
    """Record the error ``info`` as the turn's failure."""
    run = ctx.run
    if ctx.stop_signal is None:
        ctx.stop_signal = StopSignal(
            reason=StopReason.ERROR, message=str(info.message), source="runtime"
        )
    TurnControl(ctx).error_step(info)
    run.reply = ""
    run.status = RunStatus.FAILED
    run.stop_signal = ctx.stop_signal
    run.error_details.append(info)
    text = f"{info.type}: {info.message}"
    run.errors = f"{run.errors}\n{text}" if run.errors else text
    history.append(Message(role="user", content=ctx.message))
    run.sync_turn(usage_before)


def fail_timeout(
    ctx: TurnContext, history: list[Message], timeout: float, usage_before: Usage
) -> None:
    """Record the turn as timed out after ``timeout`` seconds."""
    error = TimeoutError(f"the turn did not finish within {timeout:g} s")
    info = error_info(error)
    info.type = "TurnTimeout"
    ctx.stop_signal = StopSignal(reason=StopReason.TIME_LIMIT, message=str(error), source="runtime")
    fail(ctx, history, info, usage_before)


def agent_error(
    ctx: TurnContext, session_id: str, error: BaseException, *, log_details: bool
) -> ErrorInfo:
    """The error record of an exception the agent raised, logged with its id."""
    info = error_info(error)
    info.error_id = str(uuid.uuid4())
    where = (info.error_id, session_id, ctx.turn, info.type)
    extra = {"error_id": info.error_id, "error_type": info.type}
    if log_details:
        logger.error(
            "agent error %s in session %s turn %d: %s: %s",
            *where,
            info.message,
            exc_info=error,
            extra=extra,
        )
        return info
    logger.error(
        "agent error %s in session %s turn %d: %s (message and traceback withheld by "
        "the trace policy; DEBUG on logger evalport.agent.details shows them)",
        *where,
        extra=extra,
    )
    details_logger.debug("agent error %s: %s", info.error_id, info.message, exc_info=error)
    return info
