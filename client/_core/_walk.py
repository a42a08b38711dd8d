"""The one walk of a run's conversation that every transcript renders (``-v``, the HTML
report, a judge's prompt): its parts in order, turn by turn.

Rule: a renderer formats these parts and never walks a run itself. See ARCHITECTURE.md,
"Transcripts: one walk".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Spoken:
    """A message of the user's or the agent's."""

    turn: int
    role: Literal["user", "agent"]
    text: str


@dataclass(frozen=True, slots=True)
class Attachment:
    """An image or file sent with the user's message: ``index`` in the run's
    ``userParts``."""

    turn: int
    part: Mapping[str, Any]
    index: int


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """A tool execution of a step (its ``toolExecutions`` entry)."""

    turn: int
    execution: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StepFailed:
    """An error a step recorded (its ``errors`` entry)."""

    turn: int
    error: Mapping[str, Any]


TranscriptPart = Spoken | Attachment | ToolCalled | StepFailed
"""One part of a conversation, as :func:`walk` yields it."""


def step_parts(step: Mapping[str, Any], turn: int = 0) -> Iterator[TranscriptPart]:
    """One step: its tool executions, the agent's text messages, its errors."""
    for execution in step.get("toolExecutions") or ():
        if isinstance(execution, Mapping):
            yield ToolCalled(turn, execution)
    for message in step.get("outputMessages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if message.get("role") == "assistant" and isinstance(content, str) and content:
            yield Spoken(turn, "agent", content)
    for error in step.get("errors") or ():
        if isinstance(error, Mapping):
            yield StepFailed(turn, error)


def walk(
    run: Mapping[str, Any],
    *,
    messages: Mapping[int, str] | None = None,
    replies: Mapping[int, str] | None = None,
) -> Iterator[TranscriptPart]:
    """The conversation of ``run`` (its JSON data): per turn the user's message, what
    was sent with it, then each step's parts; a turn whose steps said nothing is closed by
    its reply. ``messages`` and ``replies`` by turn number are what the caller saw (an eval
    context's turns); without them the run's ``userMessages``, and its ``reply`` for the
    last turn."""
    users: Sequence[Any] = run.get("userMessages") or ()
    by_turn: dict[int, list[Mapping[str, Any]]] = {}
    for step in run.get("steps") or ():
        if isinstance(step, Mapping):
            by_turn.setdefault(int(step.get("turn") or 0), []).append(step)
    attached: dict[int, list[tuple[int, Mapping[str, Any]]]] = {}
    for index, part in enumerate(run.get("userParts") or ()):
        if isinstance(part, Mapping) and part.get("type") != "text":
            attached.setdefault(int(part.get("turn") or 0), []).append((index, part))
    told = dict(messages or {})
    numbers = sorted({*range(1, len(users) + 1), *told, *(t for t in by_turn if t > 0)}) or [1]
    closing = dict(replies or {})
    if not closing and isinstance(run.get("reply"), str):
        closing[numbers[-1]] = run["reply"]
    for turn in numbers:
        message = told.get(turn, users[turn - 1] if 0 < turn <= len(users) else None)
        if isinstance(message, str) and message:
            yield Spoken(turn, "user", message)
        for index, part in attached.get(turn, ()):
            yield Attachment(turn, part, index)
        said: list[str] = []
        for step in by_turn.get(turn, ()):
            for item in step_parts(step, turn):
                if isinstance(item, Spoken):
                    said.append(item.text)
                yield item
        reply = closing.get(turn)
        if reply and reply not in said:
            yield Spoken(turn, "agent", reply)
