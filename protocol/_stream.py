"""Streamed turns (evalport addition): the events a turn sends as it runs, as tagged structs.

Rules: see ARCHITECTURE.md, "The stream on the wire".
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ._models import ErrorInfo, PendingApproval, PendingInterrupt, Step, ToolExecution

STREAMING_CAPABILITY: Final = "streaming"
EVENT_STREAM: Final = "text/event-stream"


class _Event(msgspec.Struct, kw_only=True, rename="camel", gc=False, tag_field="event"):
    """Base of the streamed events: camelCase on the wire, each tagged with its name (the
    same as its frame's ``event:`` field)."""


class TurnStarted(_Event, tag="turn-started"):
    """``turn-started``: the turn (its number in the session's run) began."""

    turn: int


class StepStarted(_Event, tag="step-started"):
    """``step-started``: a model step began."""

    turn: int
    index: int
    id: str


class StepCompleted(_Event, tag="step-completed"):
    """``step-completed``: a step ended; the whole step, as the run records it."""

    step: Step


class TextDelta(_Event, tag="text-delta"):
    """``text-delta``: the next chunk of text the agent's model wrote, as it wrote it (it
    belongs to the turn: a step recorded once its response is complete comes after it);
    ``chars`` is its length. The chunks of a turn whose model answered at once join into
    its reply; text a model wrote before calling tools streams too, so the reply itself
    is the final event's."""

    turn: int
    text: str = ""
    chars: int = 0


class ToolStarted(_Event, tag="tool-started"):
    """``tool-started``: a tool began to run."""

    turn: int
    call_id: str
    name: str
    arguments: Any = None


class ToolCompleted(_Event, tag="tool-completed"):
    """``tool-completed``: a tool ended; its execution as the run records it."""

    turn: int
    execution: ToolExecution


class ApprovalRequested(_Event, tag="approval-requested"):
    """``approval-requested``: a tool call waits for a decision (the turn suspends)."""

    approval: PendingApproval


class InterruptRequested(_Event, tag="interrupt-requested"):
    """``interrupt-requested``: the agent asks something (the turn suspends)."""

    interrupt: PendingInterrupt


class TurnFailed(_Event, tag="error"):
    """``error``: the agent failed; the error as the run records it."""

    turn: int
    error: ErrorInfo


class StreamOverflow(_Event, tag="overflow"):
    """``overflow``: this stream ends, the turn does not (ARCHITECTURE.md, "Streamed turns")."""

    detail: str
    kept_bytes: int


StreamEvent = (
    TurnStarted
    | StepStarted
    | StepCompleted
    | TextDelta
    | ToolStarted
    | ToolCompleted
    | ApprovalRequested
    | InterruptRequested
    | TurnFailed
    | StreamOverflow
)

STREAM_EVENTS: Final[dict[str, type[StreamEvent]]] = {
    str(kind.__struct_config__.tag): kind
    for kind in (
        TurnStarted,
        StepStarted,
        StepCompleted,
        TextDelta,
        ToolStarted,
        ToolCompleted,
        ApprovalRequested,
        InterruptRequested,
        TurnFailed,
        StreamOverflow,
    )
}
"""Every event a stream carries before its last, by its ``event:`` name."""

FINAL_EVENTS: Final = ("result", "problem")
"""The names of a stream's last event: its data is the answer without streaming."""

decode_event = msgspec.json.Decoder(StreamEvent)
"""Decodes any event's data (each names itself in its ``event`` field)."""


def event_name(event: StreamEvent) -> str:
    """The name ``event`` streams under."""
    return str(event.__struct_config__.tag)
