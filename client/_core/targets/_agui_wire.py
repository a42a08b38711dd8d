"""What goes over the wire of an AG-UI thread: the run input a client sends, and the
events it reads back, decoded with the AG-UI SDK's own types. Rules: see
ARCHITECTURE.md, "The AG-UI target".
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
import pydantic
from ag_ui.core import PROTOCOL_VERSION as AGUI_VERSION
from ag_ui.core import (
    DataSource,
    DocumentPart,
    Event,
    EventType,
    Message,
    ResumeEntry,
    RunAgentInput,
    UrlSource,
    UserMessage,
)
from ag_ui.core import ImagePart as AgUiImagePart
from ag_ui.core import TextPart as AgUiTextPart
from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    ContentPart,
    ImagePart,
    ProtocolError,
    TextPart,
)
from evalport.protocol import Interrupt as AnsweredInterrupt
from evalport.protocol.runtime import utc_now

_EVENTS: Final = pydantic.TypeAdapter(Event)
_KNOWN: Final = frozenset(kind.value for kind in EventType)
_TEXT_DELTAS: Final = frozenset((EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_CHUNK))


def decode_event(data: str) -> Event | None:
    """One SSE ``data`` field as its AG-UI event; ``None`` for a type this SDK does not know."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError:
        raise ProtocolError(
            f"an AG-UI event is not JSON ({len(data)} characters)", path="$"
        ) from None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str):
        raise ProtocolError("an AG-UI event has no string 'type'", path="$.type")
    if kind not in _KNOWN:
        return None
    try:
        event: Event = _EVENTS.validate_python(raw)
    except pydantic.ValidationError as error:
        faults = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'][1:]) or kind}: {item['type']}"
            for item in error.errors(include_url=False, include_input=False, include_context=False)
        )
        raise ProtocolError(f"an AG-UI {kind} event does not validate: {faults}") from None
    return event


def is_text_delta(event: Event) -> bool:
    """Whether ``event`` brings text of the reply (the first token, for the turn's clock)."""
    return event.type in _TEXT_DELTAS and bool(getattr(event, "delta", None))


@dataclass
class Conversation:
    """What an AG-UI client keeps of a thread between runs."""

    messages: list[Message] = field(default_factory=list)
    state: Any = None
    # interrupt id -> the tool call it asks approval for ("" for a plain interrupt)
    open: dict[str, str] = field(default_factory=dict)

    def run_input(
        self, thread_id: str, messages: list[Message], resume: list[ResumeEntry] | None
    ) -> bytes:
        """The body of one run: the conversation so far, the state, the answers."""
        sent = RunAgentInput(
            thread_id=thread_id,
            run_id=uuid.uuid4().hex,
            protocol_version=AGUI_VERSION,
            state=self.state,
            messages=messages,
            tools=[],
            context=[],
            forwarded_props={},
            resume=resume,
        )
        return sent.model_dump_json(by_alias=True).encode()


def user_message(text: str, content: Sequence[ContentPart] = ()) -> UserMessage:
    """The user's turn as an AG-UI message: its text, or its content parts in order
    (images as image parts, files as document parts; inline bytes as base64 data, else
    their URL)."""
    if not content:
        return UserMessage(id=uuid.uuid4().hex, content=text)
    return UserMessage(id=uuid.uuid4().hex, content=[_part(part) for part in content])


def _part(part: ContentPart) -> Any:
    if isinstance(part, TextPart):
        return AgUiTextPart(text=part.text)
    media = None if part.media_type is msgspec.UNSET else part.media_type
    if part.data is not msgspec.UNSET:
        source: Any = DataSource(value=base64.b64encode(part.data).decode(), mime_type=media or "")
    else:
        source = UrlSource(value=str(part.url), mime_type=media)
    if isinstance(part, ImagePart):
        return AgUiImagePart(source=source)
    return DocumentPart(source=source)


def resume_entries(
    conversation: Conversation, decisions: dict[str, ApprovalDecision]
) -> list[ResumeEntry]:
    """One resume entry per open interrupt, from the decision for its call id (an
    approval) or its own id (an interrupt): ``{"approved": ...}`` as AG-UI's approval
    schema asks, an interrupt's answer as its payload."""
    entries = []
    for interrupt_id, call_id in conversation.open.items():
        decision = decisions[call_id or interrupt_id]
        if decision.decision == "answer":
            payload: Any = decision.answer
        else:
            payload = {"approved": decision.decision == "approve"}
            if decision.reason:
                payload["reason"] = decision.reason
        entries.append(ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=payload))
    return entries


def answered(run: AgentRun, decisions: dict[str, ApprovalDecision]) -> None:
    """Move the pending approvals and interrupts that ``decisions`` answer off ``run``
    (interrupts are kept, with their answers, in ``run.interrupts``)."""
    now = utc_now()
    for pending in run.pending_interrupts:
        decision = decisions.get(pending.id)
        if decision is not None:
            run.interrupts.append(
                AnsweredInterrupt(
                    id=pending.id,
                    kind=pending.kind,
                    payload=pending.payload,
                    answer=decision.answer,
                    turn=pending.turn,
                    requested_at=pending.requested_at,
                    answered_at=now,
                )
            )
    run.pending_interrupts = [item for item in run.pending_interrupts if item.id not in decisions]
    run.pending_approvals = [
        item for item in run.pending_approvals if item.call_id not in decisions
    ]
