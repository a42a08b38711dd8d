"""The run model: what an agent did in a session, as it travels on the wire.

``AgentRun`` is the run accumulated over every turn; its ``tools`` are derived from the
steps, never edited. Rules: see ARCHITECTURE.md, "The wire: run model, messages, codec".
"""

from __future__ import annotations

from typing import Any, Final

import msgspec


class RunStatus:
    """Known values of ``AgentRun.status`` (Instructor decodes exactly these five)."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"
    ALL = (PENDING, IN_PROGRESS, COMPLETED, STOPPED, FAILED)


class StepType:
    """Known values of ``Step.type``."""

    TOOL_EXECUTION = "tool_execution"
    FINAL_RESPONSE = "final_response"
    ERROR = "error"
    ALL = (TOOL_EXECUTION, FINAL_RESPONSE, ERROR)


class FinishReason:
    """Known values of ``Step.finish_reason``."""

    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"
    ERROR = "error"
    OTHER = "other"
    ALL = (STOP, LENGTH, TOOL_CALLS, CONTENT_FILTER, ERROR, OTHER)


class StopReason:
    """Known values of ``StopSignal.reason``; Instructor rejects any other value."""

    COMPLETED = "completed"
    STEPS_LIMIT = "steps_limit"
    TOKEN_LIMIT = "token_limit"
    TIME_LIMIT = "time_limit"
    RETRY_LIMIT = "retry_limit"
    ERROR = "error"
    STOP_REQUESTED = "stop_requested"
    FINISH_REASON = "finish_reason"
    USER_REQUESTED = "user_requested"
    UNKNOWN = "unknown"
    ALL = (
        COMPLETED,
        STEPS_LIMIT,
        TOKEN_LIMIT,
        TIME_LIMIT,
        RETRY_LIMIT,
        ERROR,
        STOP_REQUESTED,
        FINISH_REASON,
        USER_REQUESTED,
        UNKNOWN,
    )


class ApprovalState:
    """Known values of ``Approval.state``."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    ALL = (PENDING, APPROVED, REJECTED)


class _Wire(msgspec.Struct, kw_only=True, rename="camel", gc=False):
    """Base of every run-model Struct: camelCase on the wire, no GC tracking."""


class Usage(_Wire):
    """Token usage of one step, or of a whole run."""

    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        """Every kind of token added up, as Instructor counts them."""
        return self.input + self.output + self.cache_write + self.cache_read + self.reasoning

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_write=self.cache_write + other.cache_write,
            cache_read=self.cache_read + other.cache_read,
            reasoning=self.reasoning + other.reasoning,
        )


class ToolCall(_Wire):
    """A tool call the model requested. ``arguments`` may arrive as a JSON string."""

    id: str | None = None
    name: str = ""
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)


class Approval(_Wire):
    """The approval state of a gated tool call."""

    state: str = ApprovalState.PENDING
    reason: str | None = None
    decided_at: str | None = None


class ToolExecution(_Wire):
    """One tool execution inside a step. ``injected`` (evalport addition): its error or
    result came from a fault injected into the session, not from the tool."""

    id: str = ""
    name: str = ""
    tool_call_id: str | None = None
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)
    has_error: bool = False
    error: Any = None
    result: Any = None
    started_at: str | None = None
    completed_at: str | None = None
    approval: Approval | None = None
    injected: bool = False


class ToolRecord(_Wire, omit_defaults=True):
    """An entry of the flat ``tools`` list (the only tool source Instructor reads).

    Fields at their defaults are left out on the wire: Instructor requires ``id`` to be a
    UUID whenever the key is present, so an entry without an id must not send ``"id": ""``.
    """

    id: str = ""
    tool_call: ToolCall = msgspec.field(default_factory=ToolCall, name="tool_call")
    result: Any = None
    error: Any = None
    started_at: str | None = None
    completed_at: str | None = None
    turn: int = 0
    approval: Approval | None = None
    injected: bool = False


class ToolResult(msgspec.Struct, kw_only=True, gc=False):
    """A tool message's result in the form Instructor's ``Message`` reads (snake_case keys,
    ``content`` always text)."""

    content: str = ""
    call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False


class Message(_Wire):
    """A message a step produced (assistant text, assistant tool calls, tool results).

    Instructor's form (``tool_calls``: the same list; ``tool_result``) is derived on every
    construction and decode and sent only when it carries something; a message that
    arrives in that form alone is read into evalport's. After changing ``content`` or
    ``tool_calls`` in place, call :meth:`sync_instructor`.
    """

    role: str = "assistant"
    content: Any = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    instructor_tool_calls: list[ToolCall] | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="tool_calls"
    )
    instructor_tool_result: ToolResult | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="tool_result"
    )

    def __post_init__(self) -> None:
        if self.tool_calls is None and self.instructor_tool_calls:
            self.tool_calls = self.instructor_tool_calls
        result = self.instructor_tool_result
        if self.tool_call_id is None and result and result.call_id is not None:
            self.tool_call_id = result.call_id
            self.content = result.content if self.content is None else self.content
            self.name = result.tool_name if self.name is None else self.name
        self.sync_instructor()

    def sync_instructor(self) -> None:
        """Re-derive Instructor's ``tool_calls`` and ``tool_result`` from this message."""
        self.instructor_tool_calls = self.tool_calls or msgspec.UNSET
        if self.tool_call_id is None:
            self.instructor_tool_result = msgspec.UNSET
            return
        content = self.content
        text = content if type(content) is str else _json_text(content)
        previous = self.instructor_tool_result
        self.instructor_tool_result = ToolResult(
            content=text,
            call_id=self.tool_call_id,
            tool_name=self.name,
            is_error=bool(previous and previous.is_error),
        )


def _json_text(value: Any) -> str:
    return "" if value is None else msgspec.json.encode(value).decode()


class ErrorInfo(_Wire):
    """An error. ``class`` stays neutral on the wire; the Python type goes in ``type``.

    Instructor instantiates ``class`` reflectively when it names a PHP Throwable, and
    Python's exception names (``ValueError``, ``TypeError``, ``Exception``) are PHP
    Throwables too: ``class`` is never a Python exception name.
    """

    message: Any = ""
    error_class: str | None = msgspec.field(default=None, name="class")
    type: str | None = None
    error_id: str | None = None


class StopSignal(_Wire):
    """Why the agent stopped (``reason`` is one of :class:`StopReason`)."""

    reason: str = StopReason.COMPLETED
    message: str = ""
    context: dict[str, Any] = msgspec.field(default_factory=dict)
    source: str | None = None


class LlmProfile(_Wire):
    """The model behind the agent. Integers stay integers (Instructor requires it)."""

    driver: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    context_length: int | None = None
    max_output_length: int | None = None


class Step(_Wire):
    """One model step: a response, the tool calls it requested and their executions."""

    id: str = ""
    turn: int = 0
    index: int = 0
    type: str = StepType.FINAL_RESPONSE
    output_messages: list[Message] = msgspec.field(default_factory=list)
    requested_tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tool_executions: list[ToolExecution] = msgspec.field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    started_at: str | None = None
    completed_at: str | None = None
    duration: float = 0.0
    stop_signal: StopSignal | None = None
    errors: list[ErrorInfo] = msgspec.field(default_factory=list)
    has_errors: bool = False


class Event(_Wire):
    """A named event the agent emitted (evalport addition)."""

    name: str = ""
    turn: int = 0
    at: str | None = None
    data: Any = None


class PendingApproval(_Wire):
    """A tool call waiting for a human decision (evalport addition)."""

    call_id: str = ""
    tool: str = ""
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)
    turn: int = 0
    reason: str | None = None
    requested_at: str | None = None


class PendingInterrupt(_Wire):
    """A question the agent stopped to ask that is not a tool approval (evalport addition):
    a clarification, a choice, a form. ``kind`` names what it asks, ``payload`` is any
    JSON value (digested under a redacting trace policy, like tool arguments)."""

    id: str = ""
    kind: str = ""
    payload: Any = None
    turn: int = 0
    requested_at: str | None = None


class Interrupt(_Wire):
    """An interrupt the agent raised and the answer it got (evalport addition)."""

    id: str = ""
    kind: str = ""
    payload: Any = None
    answer: Any = None
    turn: int = 0
    requested_at: str | None = None
    answered_at: str | None = None


class UserPart(_Wire, omit_defaults=True):
    """One content part of a user's turn, as the run records it (evalport addition).

    Only turns sent with ``parts`` record them, each with its turn number, in order
    (``message`` as the first text part). A binary part (``image``, ``file``) carries its
    ``sha256`` (hex) and byte count (``bytes``) when inline; its ``data`` stays only under
    a verbatim trace policy (:mod:`evalport.protocol._policy`).
    """

    turn: int = 0
    type: str = ""  # text, image or file (kept as text, as every enumerated value of a run)
    text: str | None = None
    media_type: str | None = None
    url: str | None = None
    name: str | None = None
    data: bytes | None = None
    sha256: str | None = None
    size: int | None = msgspec.field(default=None, name="bytes")


UNREPORTABLE: Final = ("tools", "steps", "usage", "events")
"""What a run may not carry (:attr:`AgentRun.unreported`): its tool calls, its steps, its
token usage, the agent's own events."""


class AgentRun(_Wire):
    """The accumulated run of a session.

    The first eight fields are what Instructor's ``HttpAgentTarget`` reads; the rest are
    evalport additions that older clients ignore.
    """

    reply: str = ""
    status: str = RunStatus.PENDING
    turns: int = 0
    errors: str = ""
    tools: list[ToolRecord] = msgspec.field(default_factory=list)
    steps: list[Step] = msgspec.field(default_factory=list)
    stop_signal: StopSignal | None = None
    llm_profile: LlmProfile | None = None
    session_id: str | None = None
    user_messages: list[str] = msgspec.field(default_factory=list)
    events: list[Event] = msgspec.field(default_factory=list)
    pending_approvals: list[PendingApproval] = msgspec.field(default_factory=list)
    usage: Usage = msgspec.field(default_factory=Usage)
    error_details: list[ErrorInfo] = msgspec.field(default_factory=list)
    pending_interrupts: list[PendingInterrupt] = msgspec.field(default_factory=list)
    interrupts: list[Interrupt] = msgspec.field(default_factory=list)
    # Absent unless a turn was sent with parts: runs without them keep 1.0's bytes.
    user_parts: list[UserPart] | msgspec.UnsetType = msgspec.UNSET
    # Absent unless the run comes from a protocol that does not carry all of it (A2A has
    # no tool calls): what it lacks (one of UNREPORTABLE) -> why, naming the protocol.
    unreported: dict[str, str] | msgspec.UnsetType = msgspec.UNSET

    def not_reported(self, what: str) -> str:
        """Why this run does not carry ``what`` (one of :data:`UNREPORTABLE`), or ``""``
        when it does: an assertion that reads it is then not evaluable, with this reason."""
        return "" if self.unreported is msgspec.UNSET else self.unreported.get(what, "")

    def sync_tools(self) -> None:
        """Rebuild ``tools`` from the steps' executions (the steps are the source)."""
        self.tools = [
            tool_record(step, execution)
            for step in self.steps
            for execution in step.tool_executions
        ]

    def sync_usage(self) -> None:
        """Recompute ``usage`` as the sum of the steps' usage."""
        total = Usage()
        for step in self.steps:
            total = total + step.usage
        self.usage = total

    def sync_turn(self, usage_before: Usage) -> None:
        """Re-derive the latest turn's ``tools`` entries and the usage total from its steps.

        Earlier turns never change, so this costs what the latest turn recorded, not what
        the whole session did (:meth:`sync_tools` and :meth:`sync_usage` redo everything).
        ``usage_before`` is the total of the earlier turns.
        """
        turn = self.turns
        steps = self.steps
        first = len(steps)
        while first and steps[first - 1].turn == turn:
            first -= 1
        tools = self.tools
        keep = len(tools)
        while keep and tools[keep - 1].turn == turn:
            keep -= 1
        del tools[keep:]
        usage = usage_before
        for step in steps[first:]:
            if step.tool_executions:
                tools.extend(tool_record(step, execution) for execution in step.tool_executions)
            usage = usage + step.usage
        self.usage = usage

    def steps_of_turn(self, turn: int) -> list[Step]:
        """The steps recorded during turn number ``turn`` (1-based)."""
        return [step for step in self.steps if step.turn == turn]


def tool_record(step: Step, execution: ToolExecution) -> ToolRecord:
    """The flat ``tools`` entry for one execution of ``step``."""
    return ToolRecord(
        id=execution.id,
        tool_call=ToolCall(
            id=execution.tool_call_id, name=execution.name, arguments=execution.arguments
        ),
        result=execution.result,
        error=execution.error,
        started_at=execution.started_at,
        completed_at=execution.completed_at,
        turn=step.turn,
        approval=execution.approval,
        injected=execution.injected,
    )
